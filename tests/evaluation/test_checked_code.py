"""The candidate process runs exactly the checked bytes (issue 24, class 4): model_new.py is
compiled from the checked source, never a `__pycache__` .pyc, and nothing from the workspace
(or the candidate's writable scratch) can shadow a module imported later."""

from __future__ import annotations

import importlib.util
import py_compile
import sys

import pytest

from cuda_agent.evaluation import evaluate
from cuda_agent.evaluation.config import GuardConfig

from tests.conftest import RELU_MODEL_NEW

pytestmark = pytest.mark.slow

PYC_SOURCE = '''
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        raise RuntimeError("PYC_RAN: unchecked bytecode ran")
'''


def test_a_planted_pyc_is_never_imported(make_workspace, fast_config, tmp_path):
    ws = make_workspace()
    fake = tmp_path / "model_new.py"
    fake.write_text(PYC_SOURCE)
    cache = ws.root / "__pycache__"
    cache.mkdir(exist_ok=True)
    tag = sys.implementation.cache_tag
    # an unchecked-hash pyc: the import system uses it without looking at the source at all
    py_compile.compile(str(fake), cfile=str(cache / f"model_new.{tag}.pyc"),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, doraise=True)
    assert importlib.util.cache_from_source(str(ws.root / "model_new.py")).endswith(f"model_new.{tag}.pyc")
    res = evaluate(ws, fast_config)
    assert "PYC_RAN" not in res.reason + res.worker_log
    assert res.correct and res.reward >= 1, res.reason


def test_a_workspace_module_never_shadows_what_torch_imports_later(make_workspace, fast_config):
    ws = make_workspace()
    for name in ("sympy", "numpy", "typing_extensions", "filelock"):
        (ws.root / f"{name}.py").write_text(f'raise RuntimeError("SHADOW_RAN: workspace {name}.py imported")\n')
    res = evaluate(ws, fast_config)
    assert "SHADOW_RAN" not in res.reason + res.worker_log
    assert res.correct and res.reward >= 1, res.reason


PATH_PROBE = RELU_MODEL_NEW.replace("class ModelNew(nn.Module):", '''import os
import sys


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        scratch = os.environ.get("HOME", "/nonexistent")
        bad = [p for p in sys.path if p in ("", ".", os.getcwd()) or p.startswith(scratch)
               or os.path.exists(os.path.join(p or ".", "kernels"))]
        if bad:
            raise RuntimeError(f"UNSAFE_PATH: the workspace or the writable scratch is importable: {bad}")
''')


def test_neither_the_workspace_nor_a_writable_dir_is_on_sys_path(make_workspace, fast_config):
    # the grammar would refuse this probe; it is switched off so the probe can look
    ws = make_workspace(model_new=PATH_PROBE)
    cfg = fast_config.model_copy(update={"guards": GuardConfig(static_checks=False)})
    res = evaluate(ws, cfg)
    assert "UNSAFE_PATH" not in res.reason, res.reason
    assert res.correct, res.reason
