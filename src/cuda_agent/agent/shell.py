"""The `bash` tool's runner: one command in the workspace, sealed off from the rest of the host.

Each command gets cwd = the workspace and a scrubbed environment (no API keys; HOME and TMPDIR
in a private scratch folder). By default it runs in bubblewrap with its own mount view (the
workspace, its scratch and build cache writable; the toolchain read-only; nothing else of the
host) and new PID and network namespaces. `seal=False` (machines without bubblewrap) falls back
to `unshare` namespaces and Landlock write confinement. On timeout the whole tree is killed;
output goes to a file (never a pipe that can fill) and is read back capped.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..isolation import confine, sandbox
from ..isolation.paths import default_cache_dir
from ..isolation.processes import PDEATHSIG_PREFIX, remove_tree

_CONFINE = Path(confine.__file__)
AGENT_CACHE = "agent-shell"
SEAL_ENV = "CUDA_AGENT_SEAL"  # "0": bash unsealed by default, for a machine without bubblewrap (the operator's choice)


def seal_by_default() -> bool:
    """Whether bash is sealed unless a config says otherwise: yes, except where the operator set
    CUDA_AGENT_SEAL=0 (never guessed from a missing bubblewrap: a missing seal is refused, not hidden)."""
    return os.environ.get(SEAL_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


@dataclass(kw_only=True)
class ShellConfig:
    """How `bash` is confined. Turning a layer off is for debugging only."""

    seal: bool = field(default_factory=seal_by_default)  # bubblewrap mount view (module doc); False: namespaces + Landlock
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


class ShellUnavailable(RuntimeError):
    """The sealed shell cannot be set up on this machine (the message says how to fix it)."""


class ShellRunner:
    """Runs commands for one workspace; `confinement` says which layers are in force."""

    def __init__(self, root: Path, config: ShellConfig, extra_env: dict[str, str] | None = None):
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
        try:
            self.prefix, self.confinement = self._sealed_prefix() if config.seal else self._prefix()
        except ShellUnavailable:
            remove_tree(self.scratch)
            raise

    def _sealed_prefix(self) -> tuple[list[str], dict[str, Any]]:
        """bubblewrap: a mount view holding the workspace, its scratch and cache, and the toolchain."""
        bwrap = bwrap_path()
        writable = [self.root, self.scratch, self.cache_dir, *(Path(p).resolve() for p in self.config.extra_writable)]
        readable = toolchain_paths()
        args = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        if self.config.isolate_network:
            args.append("--unshare-net")
        for link in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # usr-merged systems: keep the links
            host = Path("/") / link
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        for path in readable:
            args += ["--ro-bind-try", str(path), str(path)]
        for dev in sorted(Path("/dev").glob("nvidia*")) + [Path("/dev/dri")]:
            args += ["--dev-bind-try", str(dev), str(dev)]
        for path in writable:
            args += ["--bind", str(path), str(path)]
        args += ["--chdir", str(self.root), "--"]
        info: dict[str, Any] = {"sealed": "bubblewrap", "network": "none (own namespace)" if self.config.isolate_network
                                else "shared", "pid_namespace": True,
                                "writes": "mount view: " + ", ".join(map(str, writable)) + ", /tmp (private)",
                                "reads": "toolchain only: " + ", ".join(map(str, readable))}
        return args, info

    def _prefix(self) -> tuple[list[str], dict[str, Any]]:
        prefix: list[str] = []
        info: dict[str, Any] = {"sealed": False, "network": "shared", "writes": "unrestricted", "pid_namespace": False}
        if self.config.isolate_network and sandbox.namespaces_available():
            prefix += [*PDEATHSIG_PREFIX, *sandbox.NAMESPACE_PREFIX]  # unshare dies with us, its child with it
            info.update(network="none (own namespace)", pid_namespace=True)
        if self.config.restrict_writes and sandbox.landlock_abi() >= 1:
            writable = [self.root, self.scratch, self.cache_dir, Path("/dev"),
                        *(Path(p).resolve() for p in self.config.extra_writable)]
            prefix += [sys.executable, "-I", "-S", str(_CONFINE), *map(str, writable), "--"]
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
            finally:  # also when interrupted (Ctrl-C, SIGTERM): nothing outlives the call
                _kill_group(proc)  # anything left in the background dies with the command
            if code is not None and code < 0:
                code = 128 - code
            text, truncated = _read_capped(out, max_chars)
        return ShellRun(output=text, exit_code=code, timed_out=timed_out, truncated=truncated,
                        seconds=time.monotonic() - t0)

    def close(self) -> None:
        remove_tree(self.scratch)  # the agent's commands filled it: any depth, any count


_TOOLCHAIN_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
                  "localtime", "os-release", "debian_version", "gcc", "ssl/openssl.cnf")


def toolchain_paths() -> list[Path]:
    """What the sealed shell may read besides its workspace: /usr, this Python and its packages,
    the import root of cuda_agent (never a whole checkout), CUDA, /sys and the /etc files the
    loader and compilers need. Nested paths are bound once."""
    import sysconfig

    cands = [Path("/usr"), Path("/sys"), *(Path("/etc") / f for f in _TOOLCHAIN_ETC),
             Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent,
             Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"]),
             *(Path(p) for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")),
             Path(__file__).resolve().parents[2]]  # the import root holding cuda_agent (src/ when editable)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cands.append(Path(os.environ[var]))
    cands += [Path("/usr/local/cuda"), Path("/opt/nvidia")]
    real = sorted({p.resolve() for p in cands if p.exists()}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for p in real:
        if p == Path("/"):
            continue
        if not any(p.is_relative_to(q) for q in out):
            out.append(p)
    return out


_BWRAP_OK: dict[str, str | None] = {}


def bwrap_problem() -> str | None:
    """Why the sealed shell cannot start on this machine (None: it can), checked once per process."""
    if "path" not in _BWRAP_OK:
        path = shutil.which("bwrap")
        problem = None
        if path is None:
            problem = ("the sealed bash tool needs bubblewrap, a system package (`apt-get install bubblewrap`, "
                       f"README); seal=False (--no-seal, or {SEAL_ENV}=0) runs it unsealed")
        else:
            probe = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent",
                                    "true"], capture_output=True, text=True, timeout=30)
            if probe.returncode != 0:
                problem = (f"bubblewrap cannot create its sandbox here: {probe.stderr.strip()[:200]} (needs root or "
                           f"unprivileged user namespaces); seal=False (--no-seal, or {SEAL_ENV}=0) runs the bash "
                           "tool unsealed")
        _BWRAP_OK["path"], _BWRAP_OK["problem"] = path, problem
    return _BWRAP_OK["problem"]


def bwrap_path() -> str:
    """The bubblewrap binary; ShellUnavailable says how to get it."""
    problem = bwrap_problem()
    if problem:
        raise ShellUnavailable(problem)
    return str(_BWRAP_OK["path"])


def _environment(scratch: Path, cache_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    base = {"CUDA_AGENT_CACHE": str(cache_dir), "PYTHONUNBUFFERED": "1", **extra}
    env = sandbox.scrubbed_environment(dict(os.environ), scratch, base)
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in env.get("PATH", "").split(os.pathsep):  # `python`, `cuda-agent` are this install's
        env["PATH"] = os.pathsep.join(p for p in (venv_bin, env.get("PATH", "/usr/bin:/bin")) if p)
    return env


_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\\\)|[@-Z\\\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def readable(data: bytes) -> str:
    """Command output as text a model can use: terminal escapes removed; output that is mostly
    not text (a binary `cat`) replaced by a one-line note with its size and first bytes; stray
    control bytes in text shown as escapes rather than passed through as junk."""
    text = _ANSI.sub("", data.decode("utf-8", errors="replace"))
    junk = text.count("\ufffd") + len(_CONTROL.findall(text))
    if text and junk > max(8, len(text) // 10):
        return (f"[binary output, {len(data)} bytes, not shown (starts {data[:16].hex(' ')}); inspect it with "
                "`xxd FILE | head` or `od -c FILE | head`]")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


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
    """Head and tail of the output file, made readable; the middle of long output is cut with a note."""
    size = fh.seek(0, os.SEEK_END)
    budget = max_chars * 4  # bytes; decoding and cap_text trim to characters
    fh.seek(0)
    if size <= budget:
        text = readable(fh.read())
    else:
        head = readable(fh.read(budget // 2))
        fh.seek(size - budget // 2)
        tail = readable(fh.read())
        text = f"{head}\n[... {size - budget} bytes cut ...]\n{tail}"
    return cap_text(text, max_chars)


def cap_text(text: str, max_chars: int) -> tuple[str, bool]:
    """Keep the head and tail of long text (compiler errors start early, results print late)."""
    if len(text) <= max_chars:
        return text, False
    note_room = 80
    head = (max_chars - note_room) * 2 // 5
    tail = max_chars - note_room - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut from the middle ...]\n{text[-tail:]}", True
