"""The worker's sandbox: what candidate code may touch, enforced by the kernel where it can be.

Layers, each applied where the OS allows and each reported in `EvalResult.sandbox`:
- a scrubbed environment (no API keys, tokens or the parent's settings reach the worker);
- a private scratch directory as HOME / TMPDIR and for torch.compile's and Triton's caches,
  so nothing the candidate writes is ever read by a later evaluation's trusted phase;
- Landlock (Linux >= 5.13, unprivileged, irreversible): writes only to the workspace, the
  scratch directory and /dev; no TCP connect or bind (ABI >= 4); no signals to processes
  outside the worker (ABI >= 6). Applied in the worker's main thread before it runs any
  code that starts a thread pool, so the threads candidate code runs on inherit it;
- rlimits: file size, CPU seconds, open files, processes (the last is ignored for root,
  which is why the parent also watches the worker's process tree);
- new network and PID namespaces (`unshare`) where available: no network at all, and a
  daemon the candidate starts dies with the worker.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any

# Environment variables a worker may inherit (exact names, or prefixes ending in "_").
_ENV_ALLOWED = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "USER", "LOGNAME", "SHELL",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CC", "CXX",
    "CUDA_AGENT_CACHE", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH",
)


def scrubbed_environment(base: dict[str, str], scratch: Path, extra: dict[str, str]) -> dict[str, str]:
    """Only the variables the worker needs; caches and temp files in the scratch dir."""
    env = {k: v for k, v in base.items() if k in _ENV_ALLOWED}
    env.update({
        "HOME": str(scratch), "TMPDIR": str(scratch / "tmp"),
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"), "TRITON_CACHE_DIR": str(scratch / "triton"),
        "CUDA_CACHE_PATH": str(scratch / "nv"), "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
    })
    env.update(extra)
    return env


def make_scratch(root: Path) -> Path:
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    return root


# ---- namespaces (parent side) ------------------------------------------------------------
NAMESPACE_PREFIX = ("unshare", "--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc")
# --mount-proc: CUDA fails to initialise (error 304) in a PID namespace that still sees the
# parent's /proc (measured on H100)


@functools.cache
def namespaces_available() -> bool:
    """Whether this OS lets us start the worker in new, empty network and PID namespaces."""
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run([*NAMESPACE_PREFIX, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# ---- rlimits (worker side) ---------------------------------------------------------------
def apply_limits(file_size_bytes: int | None, cpu_seconds: int | None, open_files: int | None,
                 processes: int | None, address_space: int | None) -> dict[str, Any]:
    """Set the limits that exist; return what was applied."""
    applied: dict[str, Any] = {}
    for name, res, value in (("core", resource.RLIMIT_CORE, 0), ("file_size", resource.RLIMIT_FSIZE, file_size_bytes),
                             ("cpu_seconds", resource.RLIMIT_CPU, cpu_seconds),
                             ("open_files", resource.RLIMIT_NOFILE, open_files),
                             ("processes", resource.RLIMIT_NPROC, processes),
                             ("address_space", resource.RLIMIT_AS, address_space)):
        if value is None:
            continue
        soft, hard = resource.getrlimit(res)
        value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        try:
            resource.setrlimit(res, (value, value))
            applied[name] = value
        except (ValueError, OSError):
            applied[name] = f"not applied (hard limit {hard})"
    if os.geteuid() == 0 and "processes" in applied:
        applied["processes"] = f"{applied['processes']} (not enforced for root: the parent watches the process tree)"
    return applied


# ---- Landlock (worker side) --------------------------------------------------------------
_SYS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
# filesystem rights that create, change or remove something (reading stays allowed)
_FS_WRITE_V1 = sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))  # write_file, remove_*, make_*
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is absent or disabled."""
    nums = _SYS.get(platform.machine())
    if nums is None:
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(nums[0]), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(version))


def restrict_writes(writable: list[Path]) -> dict[str, Any]:
    """Irreversibly limit this thread (and every thread or process it starts later) to writing
    under `writable`, with no TCP and no signals outside. Returns what was enforced."""
    abi = landlock_abi()
    if abi < 1:
        return {"landlock": "unavailable (kernel without Landlock)"}
    nums = _SYS[platform.machine()]
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    fs = _FS_WRITE_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(ctypes.c_long(nums[0]), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return {"landlock": f"failed: {os.strerror(ctypes.get_errno())}"}
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(fs, fd)
                if libc.syscall(ctypes.c_long(nums[1]), ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    return {"landlock": f"failed on {path}: {os.strerror(ctypes.get_errno())}"}
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return {"landlock": f"failed: no_new_privs: {os.strerror(ctypes.get_errno())}"}
        if libc.syscall(ctypes.c_long(nums[2]), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            return {"landlock": f"failed: {os.strerror(ctypes.get_errno())}"}
    finally:
        os.close(ruleset)
    return {"landlock": f"abi {abi}", "writable": [str(p) for p in writable],
            "tcp_blocked": bool(net), "signals_scoped": bool(scoped),
            "threads_at_restriction": _thread_count()}


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


# ---- the worker's process tree (parent side) ---------------------------------------------
def process_tree(root_pid: int) -> list[int]:
    """`root_pid` and all its descendants (orphans inside a PID namespace are re-parented to
    the namespace's init, which is the worker, so they stay in the tree)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                stat = fh.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def resident_bytes(pids: list[int]) -> int:
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total
