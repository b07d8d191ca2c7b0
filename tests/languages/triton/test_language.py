"""Triton workspaces and the JIT-time sandbox: the Triton build snapshots exactly the checked bytes,
the loader exposes public launchers only, and the loading-time sandbox lets only the listed
compilers run until the strict filter is stacked on top."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.backends import get_backend
from cuda_agent.isolation.sandbox import landlock_abi, seccomp_program
from cuda_agent.languages import get_language
from cuda_agent.languages.triton.language import _interpreters, install_triton_package
from cuda_agent.tasks import Task
from cuda_agent.workspace import create_workspace, open_workspace

from tests.conftest import RELU_TASK


def test_triton_workspace_layout_and_record(tmp_path: Path, cache_dir: Path) -> None:
    task = Task.from_source(RELU_TASK, name="relu")
    ws = create_workspace(task, tmp_path / "ws", "cuda", cache_dir=cache_dir, language="triton")
    root = ws.root
    assert "@triton.jit" in (root / "SKILL.md").read_text()
    assert "install_triton_package" in (root / "triton_extension.py").read_text()
    assert "triton_extension" in (root / "model_new.py").read_text()
    assert not (root / "binding.cpp").exists()
    assert open_workspace(root, cache_dir=cache_dir).language == "triton"
    os.chmod(root / "SKILL.md", 0o644)
    (root / "SKILL.md").write_text("anything goes")
    assert ws.tampered_files() == ["SKILL.md"]
    with pytest.raises(ValueError):
        create_workspace(task, tmp_path / "cpu", "cpu", cache_dir=cache_dir, language="triton")


def test_triton_build_snapshots_the_checked_bytes(tmp_path: Path) -> None:
    lang = get_language("triton")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "a.py").write_text("def relu(x):\n    return x\n")
    res = lang.build(tmp_path, get_backend("cpu"), cache_dir=tmp_path / "cache", timeout_s=10)
    assert res.ok and res.library.endswith(".triton.json")
    manifest = json.loads(Path(res.library).read_text())
    assert manifest["files"] == ["a.py"]
    (tmp_path / "kernels" / "a.py").write_text("def relu(x):\n    return 'changed after the check'\n")
    assert "changed" not in (Path(res.library).parent / "a.py").read_text()
    (tmp_path / "kernels" / "a.py").write_text("def relu(x:\n")
    bad = lang.build(tmp_path, get_backend("cpu"), cache_dir=tmp_path / "cache", timeout_s=10)
    assert not bad.ok and "kernels/a.py" in bad.log


def test_triton_loader_exposes_public_launchers_only(tmp_path: Path) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    (d / "common.py").write_text("def _scale():\n    return 2\n")
    (d / "ops.py").write_text("from .common import _scale\n\ndef double(x):\n    return x * _scale()\n\n"
                              "def _hidden(x):\n    return x\n")
    mod = install_triton_package("lang_test_ext", d)
    try:
        assert mod.double(3) == 6 and not hasattr(mod, "_hidden") and not hasattr(mod, "_scale")
        (d / "other.py").write_text("def double(x):\n    return x\n")
        with pytest.raises(ImportError, match="both"):
            install_triton_package("lang_test_ext2", d)
    finally:
        for name in [m for m in sys.modules if m.startswith("lang_test_ext")]:
            del sys.modules[name]


def test_loading_filter_allows_processes_but_never_namespaces() -> None:
    strict = seccomp_program("x86_64", 1)
    loading = seccomp_program("x86_64", 1, allow_processes=True)
    execve = 59
    assert any(ins[0] == 0x15 and ins[3] == execve for ins in strict)
    assert not any(ins[0] == 0x15 and ins[3] == execve for ins in loading)
    assert any(ins[3] == 0x7E020000 for ins in loading)  # namespace flags still checked on clone


CHILD = textwrap.dedent('''
    import json, os, subprocess, sys
    from pathlib import Path
    from cuda_agent.isolation import sandbox
    scratch, allowed = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
    out = {}
    out["landlock"] = sandbox.restrict_writes([scratch], executable=allowed)["landlock"]
    out["seccomp"] = sandbox.deny_syscalls(allow_processes=True)["seccomp"]
    def run(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, timeout=20).returncode
        except OSError as e:
            return e.strerror
    out["allowed"] = run([os.path.realpath("/bin/true")])
    out["other"] = run([os.path.realpath("/bin/ls"), "/"])
    sandbox.deny_syscalls()
    out["after_strict"] = run([os.path.realpath("/bin/true")])
    print(json.dumps(out))
''')


@pytest.mark.skipif(landlock_abi() < 1 or sys.platform != "linux" or os.uname().machine != "x86_64",
                    reason="needs Landlock on x86-64")
def test_loading_sandbox_runs_only_listed_binaries_until_tightened(tmp_path: Path) -> None:
    true = Path(os.path.realpath("/bin/true"))
    allowed = [true, *(Path(os.path.realpath(p)) for p in _interpreters(true))]
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), *map(str, allowed)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["landlock"].startswith("abi"), out
    assert out["allowed"] == 0, out                 # a listed compiler runs while loading
    assert out["other"] == "Permission denied", out  # anything else: Landlock EACCES
    assert out["after_strict"] == "Operation not permitted", out  # stacked strict filter: EPERM
