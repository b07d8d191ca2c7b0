"""The `bash` tool's runner: one command in the workspace, confined as far as the OS allows.

Each command runs with cwd = the workspace and a scrubbed environment (no API keys reach it;
HOME and TMPDIR are a private scratch folder outside the workspace). Where available it runs in
new network and PID namespaces (no network, as in the paper; anything it leaves running dies
when the command ends) and under Landlock, so it can write only to the workspace, the scratch
folder, its own build cache and /dev, never the trusted cache the loop's evaluations read. It
reuses the evaluation sandbox's primitives (`cuda_agent.evaluation.sandbox`). On timeout the whole process
tree is killed. Output goes to a file (never a pipe that can fill) and is read back capped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CONFINE = Path(__file__).with_name("_confine.py")
_SANDBOX = Path(__file__).resolve().parents[1] / "evaluation" / "sandbox.py"
AGENT_CACHE = "agent-shell"


@dataclass(kw_only=True)
class ShellConfig:
    """How `bash` is confined. Turning a layer off is for debugging only."""

    isolate_network: bool = True
    restrict_writes: bool = True
    extra_writable: list[str] = field(default_factory=list)
    shell: str = "/bin/bash"
    cache_dir: str | None = None  # the trusted cache (default: CUDA_AGENT_CACHE or ~/.cache/cuda-agent)


@dataclass
class ShellRun:
    output: str
    exit_code: int | None
    timed_out: bool
    truncated: bool
    seconds: float


class ShellRunner:
    """Runs commands for one workspace; `confinement` says which layers are in force."""

    def __init__(self, root: Path, config: ShellConfig, extra_env: dict[str, str] | None = None):
        from ..evaluation.build import default_cache_dir

        self.root = root
        self.config = config
        trusted = (Path(config.cache_dir) if config.cache_dir else default_cache_dir()).resolve()
        # Commands get their own cache below the trusted one: a build cache or a baseline the
        # agent could write would be read by the trusted evaluation (a planted torch.compile
        # baseline, or an object file that is not what the sources say).
        self.cache_dir = trusted / AGENT_CACHE
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.scratch = Path(tempfile.mkdtemp(prefix="cuda-agent-shell-")).resolve()
        (self.scratch / "tmp").mkdir()
        self.env = _environment(self.scratch, self.cache_dir, extra_env or {})
        self.prefix, self.confinement = self._prefix()

    def _prefix(self) -> tuple[list[str], dict[str, Any]]:
        prefix: list[str] = []
        info: dict[str, Any] = {"network": "shared", "writes": "unrestricted", "pid_namespace": False}
        sandbox = _sandbox_module()
        if self.config.isolate_network and sandbox is not None and sandbox.namespaces_available():
            prefix += list(sandbox.NAMESPACE_PREFIX)
            info.update(network="none (own namespace)", pid_namespace=True)
        if self.config.restrict_writes and sandbox is not None and sandbox.landlock_abi() >= 1:
            writable = [self.root, self.scratch, self.cache_dir, Path("/dev"),
                        *(Path(p).resolve() for p in self.config.extra_writable)]
            prefix += [sys.executable, "-I", "-S", str(_CONFINE), str(_SANDBOX), *map(str, writable), "--"]
            info["writes"] = "landlock: " + ", ".join(map(str, writable))
        return prefix, info

    def run(self, command: str, *, timeout_s: float, max_chars: int) -> ShellRun:
        t0 = time.monotonic()
        with tempfile.TemporaryFile(dir=self.scratch) as out:
            proc = subprocess.Popen([*self.prefix, self.config.shell, "-c", command], cwd=self.root, env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            timed_out = False
            try:
                code: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                code = None
            _kill_group(proc)  # anything left in the background dies with the command
            if code is not None and code < 0:
                code = 128 - code
            text, truncated = _read_capped(out, max_chars)
        return ShellRun(output=text, exit_code=code, timed_out=timed_out, truncated=truncated,
                        seconds=time.monotonic() - t0)

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _sandbox_module() -> Any:
    """The evaluation sandbox's primitives, or None where that module is not there."""
    try:
        from ..evaluation import sandbox
    except ImportError:
        return None
    return sandbox


def _environment(scratch: Path, cache_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    base = {"CUDA_AGENT_CACHE": str(cache_dir), "PYTHONUNBUFFERED": "1", **extra}
    sandbox = _sandbox_module()
    if sandbox is not None:
        env = sandbox.scrubbed_environment(dict(os.environ), scratch, base)
    else:  # minimal fallback: the same idea, fewer variables
        env = {k: os.environ[k] for k in ("PATH", "LANG", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
                                          "PYTHONPATH", "VIRTUAL_ENV") if k in os.environ}
        env.update(HOME=str(scratch), TMPDIR=str(scratch / "tmp"), **base)
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in env.get("PATH", "").split(os.pathsep):  # `python`, `cuda-agent` are this install's
        env["PATH"] = os.pathsep.join(p for p in (venv_bin, env.get("PATH", "/usr/bin:/bin")) if p)
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _read_capped(fh: Any, max_chars: int) -> tuple[str, bool]:
    """Head and tail of the output file, decoded; the middle of long output is cut with a note."""
    size = fh.seek(0, os.SEEK_END)
    budget = max_chars * 4  # bytes; decoding and cap_text trim to characters
    fh.seek(0)
    if size <= budget:
        data = fh.read()
        text = data.decode("utf-8", errors="replace")
    else:
        head = fh.read(budget // 2).decode("utf-8", errors="replace")
        fh.seek(size - budget // 2)
        tail = fh.read().decode("utf-8", errors="replace")
        text = f"{head}\n[... {size - budget} bytes cut ...]\n{tail}"
    from .tools import cap_text

    return cap_text(text, max_chars)
