"""The worker's sandbox on the CPU backend: candidate code that writes outside its scratch
dir, starts processes, reads secrets from the environment or rewrites protected files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.evaluation import EvalConfig, GuardConfig, evaluate
from cuda_agent.evaluation.sandbox import landlock_abi, namespaces_available

pytestmark = pytest.mark.slow

HOSTILE = '''
import os, subprocess
import torch.nn as nn
import cpu_extension

class ModelNew(nn.Module):
    def forward(self, x):
        ACTION
        return cpu_extension.relu(x.contiguous())
'''


def _cfg(fast_config: EvalConfig, **guards) -> EvalConfig:
    return fast_config.model_copy(update={"measure": False,
                                          "guards": GuardConfig(static_checks=False, **guards)})


@pytest.mark.skipif(landlock_abi() < 1, reason="kernel without Landlock")
def test_candidate_cannot_write_outside_its_scratch_dir(make_workspace, fast_config, tmp_path):
    target = tmp_path / "leak.txt"
    ws = make_workspace(model_new=HOSTILE.replace("ACTION", f"open({str(target)!r}, 'w').write('x')"), name="fs")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == -1 and "Permission denied" in res.reason, res.reason
    assert not target.exists()
    assert res.sandbox["landlock"].startswith("abi") and "/dev" in res.sandbox["writable"]
    # the workspace itself (e.g. model_new.py, kernels/) is read-only while it is being evaluated
    ws2 = make_workspace(model_new=HOSTILE.replace("ACTION", "open(__file__, 'a').write('#')"), name="fs2")
    assert evaluate(ws2, _cfg(fast_config)).reward == -1
    # writing to the scratch dir (HOME, TMPDIR) is fine
    ws3 = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "open(os.path.join(os.environ['TMPDIR'], 'ok'), 'w').write('x')"), name="fs3")
    assert evaluate(ws3, _cfg(fast_config)).reward == 1


def test_a_process_started_by_the_candidate_kills_the_evaluation(make_workspace, fast_config):
    ws = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "subprocess.Popen(['sleep', '30'], start_new_session=True); __import__('time').sleep(1)"),
        name="proc")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == -1 and "process creation" in res.reason, res.reason


def test_worker_environment_is_scrubbed(make_workspace, fast_config, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    ws = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "assert 'OPENAI_API_KEY' not in os.environ, 'secret leaked'\n"
                  "        assert os.environ['HOME'] == os.environ['TMPDIR'].rsplit('/', 1)[0]"), name="env")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == 1, res.reason


def test_protected_file_rewritten_during_evaluation_is_tampering(make_workspace, fast_config):
    # Without Landlock (switched off here) the after-check still catches it.
    ws = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "p = os.path.join(os.path.dirname(__file__), 'binding.cpp'); os.chmod(p, 0o644); open(p, 'a').write('//')"), name="tamper")
    res = evaluate(ws, _cfg(fast_config, filesystem=False))
    assert res.reward == -1 and "tampered during evaluation" in res.reason, res.reason


def test_file_size_limit(make_workspace, fast_config):
    ws = make_workspace(model_new=HOSTILE.replace(
        "ACTION", "open(os.path.join(os.environ['TMPDIR'], 'big'), 'wb').write(b'0' * (3 << 20))"), name="fsize")
    res = evaluate(ws, _cfg(fast_config, max_file_bytes=1 << 20))
    assert res.reward == -1 and "File too large" in res.reason, res.reason


@pytest.mark.skipif(not namespaces_available(), reason="this OS refuses new namespaces")
def test_worker_runs_in_its_own_pid_namespace(make_workspace, fast_config):
    ws = make_workspace(model_new=HOSTILE.replace("ACTION", "assert os.getpid() == 1, os.getpid()"), name="pidns")
    res = evaluate(ws, _cfg(fast_config))
    assert res.reward == 1 and res.sandbox["namespaces"], res.reason
