"""The worker's sandbox: what candidate code may touch, enforced by the kernel where it can be.

Scrubbed environment, private scratch, Landlock, seccomp (candidates), rlimits and namespaces,
each applied where the OS allows and reported in `EvalResult.sandbox`; docs/guards.md ("The
candidate sandbox") says what each layer holds and how it is tested.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import AbstractSet, Any, Sequence

# Environment variables a worker may inherit (exact names, or prefixes ending in "_").
_ENV_ALLOWED = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "USER", "LOGNAME", "SHELL",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
    "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CC", "CXX",
    "CUDA_AGENT_CACHE", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH",
    # Triton's tools and where its cache may live (languages/triton/language.py reads them)
    "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "CUDA_AGENT_TRITON_CACHE_DIR", "CUDA_AGENT_TRITON_EXEC",
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
# the candidate shares the host's PID namespace: CUDA IPC between the judge and it needs each
# to see the other's PID (the driver duplicates the exporter's handle by PID); the seccomp
# filter, not a PID namespace, is what keeps it from starting daemons
CANDIDATE_NAMESPACE_PREFIX = ("unshare", "--net", "--fork", "--kill-child")
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
TASKS_MAX = 1024  # threads and processes of one candidate client: an honest one (torch, CUDA, Triton's compiler) uses ~100
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_cgroups(root: Path, self_cgroup: Path, controller: str = "pids") -> list[Path]:
    """Where a `controller` cgroup may go: beside this process, inside its own cgroup (never above
    it, which would take the client out of whatever limits this process's cgroup sets): cgroup
    v1's hierarchy of that controller, or v2's where that cgroup hands the controller down."""
    found = []
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controller in controllers.split(","):
            found.append(root / controller / path.lstrip("/"))
        elif controllers == "":
            here = root / path.lstrip("/")
            try:
                if controller in (here / "cgroup.subtree_control").read_text().split():
                    found.append(here)
            except OSError:
                pass
    return found


_PEAK_FILES = ("memory.peak", "memory.max_usage_in_bytes")  # cgroup v2, v1
_USAGE_FILES = ("memory.current", "memory.usage_in_bytes")


def watch_memory(pid: int, tasks_group: Path | None, root: Path = CGROUP_ROOT,
                 self_cgroup: Path = Path("/proc/self/cgroup")) -> Path | None:
    """A memory cgroup holding the process tree under `pid`, for its peak (`memory_charged`): the
    kernel's count of everything charged to it (resident and shared memory, memory files, kernel
    objects) at its highest, between any two looks. The watch's sampled resident count missed
    700 MiB taken and let go inside one 0.2 s call, and 750 MiB of epoll watches in the kernel
    (red team round 10, m3 and e1). Nothing is limited by it (the watch decides); on cgroup v2 it
    is `tasks_group` itself where that has the memory controller, else one of its own (v1). None
    where the host has none to give."""
    if tasks_group is not None and any((tasks_group / name).exists() for name in _PEAK_FILES):
        return tasks_group
    for parent in _own_cgroups(root, self_cgroup, "memory"):
        if not parent.is_relative_to(root / "memory"):
            continue  # v2: one cgroup per process, and it is `tasks_group`'s
        group = _group_for(pid, parent, {})
        if group is not None:
            return group
    return None


def _group_for(pid: int, parent: Path, settings: dict[str, str]) -> Path | None:
    """A new cgroup under `parent` (named for `pid`: `_sweep_task_groups` finds it once that is
    gone) with `settings` written, holding the process tree under `pid`; None where it cannot be."""
    _sweep_task_groups(parent)
    group = parent / f"cuda-agent-{pid}-{os.urandom(3).hex()}"
    try:
        group.mkdir()
    except OSError:
        return None
    try:
        for name, value in settings.items():
            (group / name).write_text(value)
        for member in process_tree(pid):
            (group / "cgroup.procs").write_text(str(member))
        return group
    except OSError:
        release_tasks(group)
        return None


def memory_charged(group: Path | None) -> tuple[int, int]:
    """(the highest memory charged to `group` since it was made, what is charged to it now);
    0 for what cannot be read."""
    def first(files: tuple[str, ...]) -> int:
        for name in files:
            try:
                return int((group / name).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return 0

    return (first(_PEAK_FILES), first(_USAGE_FILES)) if group is not None else (0, 0)


def limit_tasks(pid: int, limit: int = TASKS_MAX, root: Path = CGROUP_ROOT,
                self_cgroup: Path = Path("/proc/self/cgroup")) -> Path | None:
    """Put the process tree under `pid` in a pids cgroup of its own, capped at `limit` tasks (each
    thread counts), inside this process's own cgroup where the host lets it make one; the cgroup,
    or None where it does not (no pids controller, a read-only cgroup tree). The candidate runs as
    root, where RLIMIT_NPROC binds nothing: red team round 7's loading library started 5,000
    threads (host tasks 114 -> 5,399), and a flood to the host's pid limit would break the judge
    too. Past the cap the candidate's own thread or process creation fails; nothing else on the
    host notices. Its threads and children go with it; those it starts later are born inside."""
    for parent in _own_cgroups(root, self_cgroup):
        group = _group_for(pid, parent, {"pids.max": str(limit)})
        if group is not None:
            return group
    return None


_SWEPT: set[Path] = set()


def _sweep_task_groups(parent: Path) -> None:
    """Once per process and parent: remove the empty cgroups of clients that are gone (a judge
    killed as a whole leaves its clients' behind; the name carries the client's PID)."""
    if parent in _SWEPT:
        return
    _SWEPT.add(parent)
    for group in parent.glob("cuda-agent-*-*"):
        pid = group.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            release_tasks(group)  # refused while it still holds a task


def release_tasks(group: Path | None) -> None:
    """Remove a cgroup from `limit_tasks` once its processes are gone (best effort: a cgroup
    still holding a task cannot be removed, and is left for the host)."""
    if group is not None:
        with suppress(OSError):
            group.rmdir()


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
_FS_REFER, _FS_TRUNCATE, _FS_WRITE_FILE = 1 << 13, 1 << 14, 1 << 1
_FS_EXECUTE = 1 << 0
_FS_READ_FILE, _FS_READ_DIR = 1 << 2, 1 << 3
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


_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS and SECBIT_NO_CAP_AMBIENT_RAISE, each with its lock
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_CAPSET = {"x86_64": 126, "aarch64": 91}
_CAP_VERSION_3 = 0x20080522


def drop_capabilities() -> dict[str, Any]:
    """No capability left in this process, nor in anything it starts: the bounding set and the
    ambient set emptied, root's exec rules locked off (securebits), then capset to nothing. Call
    it while the process has one thread (capabilities are per thread; threads started later
    inherit the empty sets). A client run by root kept every capability, and one ioctl
    (FS_IOC_SETFLAGS, allowed on a read-only fd) made its scratch, its log and any host file it
    could read immutable: left on the host past every evaluation (red team round 9, i1). Not
    root: there is nothing to drop, and the calls fail harmlessly. Returns what is left, read back."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0)
    number = _CAPSET.get(platform.machine())
    if number is not None:
        header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: two words each, all zero
        libc.syscall(ctypes.c_long(number), header, data)
    return {"capabilities": {name: _status_field(name) for name in ("CapEff", "CapPrm", "CapBnd")}}


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is absent or disabled."""
    nums = _SYS.get(platform.machine())
    if nums is None:
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(nums[0]), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(version))


def _landlock_rights(abi: int) -> tuple[int, int, int]:
    """(write rights, network rights, scopes) that this kernel's Landlock ABI can handle: the
    one list both the candidate's and the build's confinement use."""
    write = _FS_WRITE_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    return write, net, scoped


class _LandlockFailed(OSError):
    """A Landlock syscall refused (`_enforce`), as opposed to a path that could not be opened."""


def _enforce(handled: int, net: int, scoped: int, abi: int, grants: list[tuple[Path, int]], file_rights: int) -> None:
    """One Landlock ruleset handling `handled` (plus `net` / `scoped`), each grant a rule beneath
    its path (a single file takes only `file_rights`; a missing path is skipped), then
    no_new_privs and restrict_self. The one home of the syscalls behind `restrict_writes` and
    `restrict_filesystem`; raises _LandlockFailed naming what failed."""
    nums = _SYS[platform.machine()]
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    attr = _RulesetAttr(handled, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(ctypes.c_long(nums[0]), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _LandlockFailed(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path, granted in grants:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                rights = granted if os.path.isdir(path) else granted & file_rights
                rule = _PathBeneathAttr(rights, fd)
                if libc.syscall(ctypes.c_long(nums[1]), ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise _LandlockFailed(ctypes.get_errno(), f"landlock_add_rule on {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _LandlockFailed(ctypes.get_errno(), "no_new_privs")
        if libc.syscall(ctypes.c_long(nums[2]), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise _LandlockFailed(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def restrict_writes(writable: list[Path], executable: list[Path] | None = None,
                    readable: Sequence[Path] | None = None) -> dict[str, Any]:
    """Irreversibly limit this thread (and every thread or process it starts later) to writing
    under `writable`, with no TCP and no signals outside. With `executable` (files or dirs),
    execve is limited to those too (a JIT language's compilers). With `readable` (files or dirs;
    missing ones skipped), reading and listing are limited to those and `writable` too (the
    candidate: `candidate_read_paths`). Returns what was enforced."""
    abi = landlock_abi()
    if abi < 1:
        return {"landlock": "unavailable (kernel without Landlock)",
                **({"reads": "not confined (kernel without Landlock)"} if readable is not None else {})}
    fs, net, scoped = _landlock_rights(abi)
    read = (_FS_READ_FILE | _FS_READ_DIR) if readable is not None else 0
    fs |= read  # what a writable path grants: reading it too, where reads are confined
    grants = ([(p, fs) for p in writable] + [(p, _FS_EXECUTE | read) for p in executable or []]
              + [(p, read) for p in readable or []])
    try:
        # a single file (a device node) takes only the rights a file has
        _enforce(fs | (_FS_EXECUTE if executable is not None else 0), net, scoped, abi, grants,
                 _FS_WRITE_FILE | _FS_TRUNCATE | _FS_EXECUTE | _FS_READ_FILE)
    except _LandlockFailed as exc:
        return {"landlock": f"failed: {exc.args[1]}: {os.strerror(exc.errno or 0)}"}
    shown = {"executable": [str(p) for p in executable or [] if os.path.exists(p)]} if executable is not None else {}
    if readable is not None:
        shown["readable"] = [str(p) for p in readable if os.path.exists(p)]
    return {"landlock": f"abi {abi}", "writable": [str(p) for p in writable], **shown,
            "tcp_blocked": bool(net), "signals_scoped": bool(scoped),
            "threads_at_restriction": _thread_count()}


def restrict_filesystem(readable: Sequence[Path], writable: Sequence[Path], listable: Sequence[Path] = ()) -> dict[str, Any]:
    """Irreversibly limit this thread (and what it starts later) to reading and executing only
    under `readable` (dirs or single files), listing `listable` dirs (names only, not contents),
    and reading and writing under `writable`; no TCP, no signals outside. For a toolchain run
    on hostile sources (the build): no host file it was not given can be read, included or
    assembled into its output. Raises OSError where Landlock is absent or fails."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is unavailable on this kernel")
    write, net, scoped = _landlock_rights(abi)
    read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    grants = ([(Path(p), read) for p in readable] + [(Path(p), _FS_READ_DIR) for p in listable]
              + [(Path(p), read | write) for p in writable])
    _enforce(write | read, net, scoped, abi, grants, _FS_EXECUTE | _FS_READ_FILE | _FS_WRITE_FILE | _FS_TRUNCATE)
    return {"landlock": f"abi {abi}", "readable": [str(p) for p in readable],
            "writable": [str(p) for p in writable], "tcp_blocked": bool(net)}


CONFINE_WRITES_ENV = "CUDA_AGENT_CONFINE_WRITES"  # set by the judge: the candidate confines writes first


def confine_writes_early(scratch: Path, extra: Sequence[Path] = (), dev: Path = Path("/dev")) -> dict[str, Any]:
    """Landlock (ABI < 8) binds only the calling thread and those it starts later, and candidate
    code can run on threads that exist before the candidate sandbox (OpenMP pools, the driver's
    callback threads; a probe wrote outside scratch from torch's OpenMP pool). So this confines
    writes first, before torch and the driver start any thread: to scratch, `extra`, /dev/null,
    every NVIDIA node (the driver opens its nodes while it starts; the candidate sandbox narrows
    that to the visible GPUs' later) and this process's /proc dir."""
    nodes = [dev / name for name in sorted(os.listdir(dev)) if name == "null" or name.startswith("nvidia")]
    return restrict_writes([scratch, *extra, *nodes, Path(f"/proc/{os.getpid()}")])


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


# ---- device nodes the candidate may write (worker side) -----------------------------------
def device_write_paths(gpu: bool, *, dev: Path = Path("/dev"), proc: Path = Path("/proc")) -> list[Path]:
    """The only paths outside the scratch dir the candidate may write: /dev/null (libraries
    open it to silence output; it keeps nothing) and, on a GPU backend, the driver's control and UVM
    nodes plus the nodes of the GPUs this process sees (not every GPU of the host: another
    evaluation may run on those). Never /dev as a whole, /dev/shm, /tmp or the workspace."""
    paths = [dev / "null"]
    if gpu:
        paths += [dev / "nvidiactl", dev / "nvidia-uvm", dev / "nvidia-uvm-tools"]
        minors = gpu_minors(_visible_pci_ids(), proc)
        if minors is None:  # the mapping is unknown: every GPU node rather than a CUDA failure
            paths += sorted(p for p in dev.glob("nvidia[0-9]*") if p.name[6:].isdigit())
        else:
            paths += [dev / f"nvidia{m}" for m in minors]
    return [p for p in paths if p.exists()]


# ---- what the candidate may read (worker side) ---------------------------------------------
# the system's programs, libraries and headers; of /etc only what the loader and libc read
_HOST_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/etc/ld.so.cache",
              "/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
              "/etc/nsswitch.conf", "/etc/passwd", "/etc/group")
# kernel facts torch, OpenMP, glibc and the driver read (CPU count and caches, memory, NUMA, PCI);
# never another process's /proc dir, /sys/firmware or /sys/kernel beyond memory settings
_PROC_READ = ("cpuinfo", "meminfo", "stat", "filesystems", "sys/kernel", "sys/vm", "sys/fs", "driver/nvidia")
_SYS_READ = ("devices", "bus", "class", "dev", "module", "fs/cgroup", "kernel/mm")
_DEV_READ = ("null", "zero", "full", "random", "urandom")
# files inside those trees that say which host this is and nothing a program needs (/etc/os-release
# links to the first: round 5's e1 read it through the link; the second holds serial numbers)
_HOST_HIDDEN = ("/usr/lib/os-release", "/sys/devices/virtual/dmi")


def _all_but(roots: list[Path], hidden: Sequence[str]) -> list[Path]:
    """`roots` with every hidden path cut out: a root holding one is replaced by its entries
    (Landlock only allows, so a tree minus a file is the tree's other entries, level by level)."""
    out: list[Path] = []
    for root in roots:
        inside = [Path(h) for h in hidden if Path(h).is_relative_to(root) and Path(h) != root]
        if not inside or not root.is_dir() or root.is_symlink():
            out += [] if any(root == Path(h) for h in hidden) else [root]
            continue
        try:
            entries = sorted(root.iterdir())
        except OSError:
            continue
        out += _all_but(entries, [str(h) for h in inside])
    return out


def candidate_read_paths(gpu: bool, *, dev: Path = Path("/dev"), proc: Path = Path("/proc"),
                         sys_dir: Path = Path("/sys")) -> list[Path]:
    """What honest candidate code reads whatever the task (red team round 5, e1: a library
    read `/etc/os-release` and the project's `pyproject.toml` and raised with their text): the
    system's toolchain and libraries, Python's installation and every `sys.path` dir (torch,
    triton, the NVIDIA wheels, this package), the CUDA toolkit the environment names, this
    process's own /proc dir and the kernel facts above, and the device nodes that hold nothing
    (plus the GPU nodes on a GPU). Not the project tree around the package, home dirs, the rest
    of /etc, other processes, other workspaces or other snapshots: the caller adds its own
    snapshot (and scratch, as writable)."""
    paths = [Path(p) for p in _HOST_READ]
    paths += [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}]
    paths += [Path(p) for p in sys.path if p and os.path.isabs(p)]
    paths += [Path(os.environ[k]) for k in ("CUDA_HOME", "CUDA_PATH") if os.path.isabs(os.environ.get(k, ""))]
    paths += [proc / str(os.getpid()), *(proc / p for p in _PROC_READ), *(sys_dir / p for p in _SYS_READ)]
    paths += [dev / p for p in _DEV_READ]
    if gpu:
        paths += sorted(dev.glob("nvidia*"))
    # a rule lands on what a link names (/lib -> usr/lib): cut hidden files out of that
    unique = dict.fromkeys(p.resolve() for p in paths if p.exists())
    return list(dict.fromkeys(_all_but([p for p in unique if p != Path("/")], _HOST_HIDDEN)))


def _visible_pci_ids() -> list[tuple[int, int, int]] | None:
    """(domain, bus, device) of each GPU torch sees, when CUDA is already initialised here."""
    import sys

    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
        return [(p.pci_domain_id, p.pci_bus_id, p.pci_device_id) for p in props]
    except (AttributeError, RuntimeError):
        return None


def gpu_minors(pci_ids: list[tuple[int, int, int]] | None, proc: Path = Path("/proc")) -> list[int] | None:
    """/dev/nvidia<minor> numbers of the given PCI devices, from the driver's
    /proc/driver/nvidia/gpus/<bus id>/information; None when any is not found."""
    if not pci_ids:
        return None
    minors = []
    for domain, bus, device in pci_ids:
        info = proc / "driver" / "nvidia" / "gpus" / f"{domain:04x}:{bus:02x}:{device:02x}.0" / "information"
        try:
            line = next(ln for ln in info.read_text().splitlines() if ln.startswith("Device Minor:"))
            minors.append(int(line.split(":", 1)[1]))
        except (OSError, StopIteration, ValueError):
            return None
    return minors


# ---- seccomp (worker side) ---------------------------------------------------------------
# name: (x86_64, aarch64); None where the architecture has no such call. Every one answers
# EPERM: sockets (inherited fds stay usable), processes, other processes' memory, namespaces
# and mounts, keys, BPF, perf, io_uring (it would bypass this filter), the kernel, the clocks,
# credentials, System V IPC and POSIX message queues.
_DENY_SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "socket": (41, 198), "socketpair": (53, 199), "connect": (42, 203), "bind": (49, 200), "listen": (50, 201),
    "accept": (43, 202), "accept4": (288, 242), "ptrace": (101, 117), "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271), "pidfd_open": (434, 434), "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424), "kcmp": (312, 272), "process_madvise": (440, 440),
    "process_mrelease": (448, 448), "mount": (165, 40), "umount2": (166, 39), "unshare": (272, 97),
    "setns": (308, 268), "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428),
    "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "fspick": (433, 433), "mount_setattr": (442, 442), "execve": (59, 221), "execveat": (322, 281),
    "fork": (57, None), "vfork": (58, None), "tkill": (200, 130), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "bpf": (321, 280), "perf_event_open": (298, 241), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "userfaultfd": (323, 282),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264), "mknod": (133, None),
    "mknodat": (259, 33), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "iopl": (172, None), "ioperm": (173, None),
    "acct": (163, 89), "settimeofday": (164, 170), "clock_settime": (227, 112), "clock_adjtime": (305, 266),
    "adjtimex": (159, 171), "setuid": (105, 146), "setgid": (106, 144), "setreuid": (113, 145),
    "setregid": (114, 143), "setresuid": (117, 147), "setresgid": (119, 149), "setfsuid": (122, 151),
    "setfsgid": (123, 152), "setgroups": (116, 159), "capset": (126, 91), "personality": (135, 92),
    "quotactl": (179, 60), "vhangup": (153, 58), "syslog": (103, 116), "sethostname": (170, 161),
    "setdomainname": (171, 162), "migrate_pages": (256, 238), "uselib": (134, None),
    "lookup_dcookie": (212, 18),
    # System V IPC: its objects outlive the process in the host's IPC namespace (red team round 5,
    # s1: a segment kept 64 MiB of host memory and a message between evaluations); nothing of
    # torch, CUDA or the harness uses it (POSIX shared memory is files, under the write confinement)
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197), "semget": (64, 190),
    "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192), "msgget": (68, 186), "msgsnd": (69, 189),
    "msgrcv": (70, 188), "msgctl": (71, 187),
    # POSIX message queues, the same class: a queue created read-only outlives the process
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182), "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
    # CPU affinity, its own too: on a GPU the judge pins both timed clients to one shared core, and
    # a candidate that moved itself to a less busy core would be timed against a baseline that
    # cannot (review of issue 23's pinning); a red-team candidate once pinned the baseline client
    "sched_setaffinity": (203, 122),
    # scheduling and I/O priority: not even its own (a candidate at nice -20 or SCHED_FIFO would
    # win CPU from other load that the baselines, timed while it is frozen, still compete with)
    "setpriority": (141, 140), "sched_setscheduler": (144, 119), "sched_setparam": (142, 118),
    "sched_setattr": (314, 274), "ioprio_set": (251, 30), "move_pages": (279, 239),
    # its own process group or session: one that left the judge's signals would run while frozen
    # (a red-team candidate finished its outputs after answering, untimed)
    "setpgid": (109, 154), "setsid": (112, 157),
    # file metadata, which Landlock does not cover: a root candidate changed the mode, owner,
    # times and xattrs of files outside its scratch dir, and kept state across evaluations in one
    "chmod": (90, None), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452),
    "chown": (92, None), "fchown": (93, 55), "lchown": (94, None), "fchownat": (260, 54),
    "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7), "setxattrat": (463, 463),
    "removexattr": (197, 14), "lremovexattr": (198, 15), "fremovexattr": (199, 16), "removexattrat": (466, 466),
    "utime": (132, None), "utimes": (235, None), "futimesat": (261, None), "utimensat": (280, 88),
    # the same flags through the calls Linux 6.17 added (red team round 12, f1: SYNC, NODUMP, NOATIME,
    # DAX and PROJINHERIT set on a host directory it could not open, kept past its evaluation)
    "file_setattr": (469, 469), "quotactl_fd": (443, 443),
    # signals made by the kernel, which resume a frozen candidate (red team round 12, s1: a timer whose
    # signal was SIGCONT woke it 26-50 times an evaluation while the baselines were timed; also F_SETSIG,
    # in _DENY_FCNTLS), and Linux AIO, whose io_submit does a whole batch's copies in one call that a
    # SIGSTOP waits out (u2); directory watches, which named other evaluations' files
    "timer_create": (222, 107), "io_setup": (206, 0), "io_submit": (209, 2),
    "inotify_init": (253, None), "inotify_init1": (294, 26), "fanotify_init": (300, 262), "fanotify_mark": (301, 263),
}
# signals only to this process itself (raise, pthread_kill, Python's os.kill(os.getpid(), ...))
_OWN_PID_SYSCALLS = {"kill": (62, 129), "tgkill": (234, 131), "rt_sigqueueinfo": (129, 138),
                     "rt_tgsigqueueinfo": (297, 240)}
# calls that name a process: only 0 (itself) or its own pid
_SELF_TARGET_SYSCALLS = {"prlimit64": (302, 261)}
_SECCOMP = {"x86_64": (0xC000003E, 317, 56, 435, 16), "aarch64": (0xC00000B7, 277, 220, 435, 29)}
_CLONE_THREAD, _CLONE_VFORK = 0x00010000, 0x00004000
_CLONE_NEW_NAMESPACES = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C  # typing into (or reading) the controlling terminal
# ioctls on files an owner may make on a read-only fd, which Landlock does not cover: inode flags
# (immutable, append-only, sync, nodump: red team round 9 i1, round 10 f1), the inode generation, the
# project/xattr flags; and whole-filesystem freeze, thaw and shutdown (x86-64 and aarch64 alike)
_DENY_IOCTLS = (_TIOCSTI, _TIOCLINUX, 0x40086602, 0x40046602, 0x40087602, 0x40047602, 0x401C5820,
                0xC0045877, 0xC0045878, 0x8004587D,
                0x40086604, 0x40046604)  # ext4's own number for the generation (round 11, i2: EXT4_IOC_SETVERSION)
# fcntl: a lease (it blocks another process's open of the file until the holder lets go, and a
# candidate that ignores the signal holds it until it dies: round 10, f1), directory notifications,
# the signal sent for I/O on a descriptor (round 12, s1)
_DENY_FCNTLS = (1024, 1026, 10)  # F_SETLEASE, F_NOTIFY, F_SETSIG (a signal of its choosing on I/O: SIGCONT)
_FCNTL = {"x86_64": 72, "aarch64": 25}
# prctl: the parent-death signal the sandbox set (SIGKILL with the judge): replaced (by SIGCONT, or 0) it let a
# candidate outlive a judge that died (red team round 28)
_DENY_PRCTLS = (1,)  # PR_SET_PDEATHSIG
_PRCTL = {"x86_64": 157, "aarch64": 167}
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_LD_ABS, _JEQ, _JGE, _JSET, _RET, _JA = 0x20, 0x15, 0x35, 0x45, 0x06, 0x05
# the calls a busy kernel, allocator or thread pool makes most (futex, mmap, ...), allowed first:
# each syscall walks the filter, and a 200-instruction walk cost the candidate ~25% on a small
# CPU op that the judge's own (unfiltered) baseline did not pay. (x86-64, aarch64)
_HOT_SYSCALLS = ((202, 98), (9, 222), (11, 215), (28, 233), (10, 226), (12, 214), (0, 63), (1, 64),
                 (47, 212), (46, 211), (24, 124), (25, 216), (230, 115), (35, 101), (39, 172), (186, 178),
                 (271, 73))
_ARCH_OFF, _NR_OFF, _ARG0_OFF, _ARG1_OFF = 4, 0, 16, 24  # struct seccomp_data, low words (little-endian)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


# allowed while a JIT language loads: its compilers fork, exec and set their outputs' modes
_PROCESS_SYSCALLS = frozenset("execve execveat fork vfork chmod fchmod fchmodat fchmodat2 utime utimes futimesat "
                              "utimensat".split())


def seccomp_program(machine: str, own_pid: int, allow_processes: bool = False) -> list[tuple[int, int, int, int]]:
    """The classic-BPF filter, as (code, jt, jf, k): a foreign syscall ABI kills the process
    (int 0x80 on x86-64, x32); the calls above fail with EPERM; clone only makes threads
    (no new process, no namespace), clone3 is ENOSYS so glibc falls back to clone; signals
    go only to this process; no terminal injection, inode-flag or filesystem-freeze ioctls, no
    file leases and no new parent-death signal (`_DENY_IOCTLS`, `_DENY_FCNTLS`, `_DENY_PRCTLS`);
    everything else is allowed.
    `allow_processes`: the loading-time variant for JIT languages, which also lets the
    process fork and exec (Landlock limits what it may execute); stack the strict one after."""
    arch, _, nr_clone, nr_clone3, nr_ioctl = _SECCOMP[machine]
    col = 0 if machine == "x86_64" else 1
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    prog = [(_LD_ABS, 0, 0, _ARCH_OFF), (_JEQ, 1, 0, arch), (_RET, 0, 0, _RET_KILL_PROCESS), (_LD_ABS, 0, 0, _NR_OFF)]
    if machine == "x86_64":
        prog += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _RET_KILL_PROCESS)]  # x32 ABI
    hot = [nums[col] for nums in _HOT_SYSCALLS]
    prog += [(_JEQ, len(hot) - i, 0, nr) for i, nr in enumerate(hot)] + [(_JA, 0, 0, 1), (_RET, 0, 0, _RET_ALLOW)]
    for name, nums in _DENY_SYSCALLS.items():
        if allow_processes and name in _PROCESS_SYSCALLS:
            continue
        if nums[col] is not None:
            prog += [(_JEQ, 0, 1, nums[col]), (_RET, 0, 0, eperm)]
    prog += [(_JEQ, 0, 1, nr_clone3), (_RET, 0, 0, enosys)]
    for nums in _OWN_PID_SYSCALLS.values():
        prog += [(_JEQ, 0, 4, nums[col]), (_LD_ABS, 0, 0, _ARG0_OFF), (_JEQ, 0, 1, own_pid),
                 (_RET, 0, 0, _RET_ALLOW), (_RET, 0, 0, eperm)]
    for nums in _SELF_TARGET_SYSCALLS.values():
        prog += [(_JEQ, 0, 5, nums[col]), (_LD_ABS, 0, 0, _ARG0_OFF), (_JEQ, 2, 0, 0), (_JEQ, 1, 0, own_pid),
                 (_RET, 0, 0, eperm), (_RET, 0, 0, _RET_ALLOW)]
    if allow_processes:  # new processes, never new namespaces
        prog += [(_JEQ, 0, 4, nr_clone), (_LD_ABS, 0, 0, _ARG0_OFF), (_JSET, 1, 0, _CLONE_NEW_NAMESPACES),
                 (_RET, 0, 0, _RET_ALLOW), (_RET, 0, 0, eperm)]
    else:
        # a vfork-style thread: its parent waits in an uninterruptible sleep that SIGSTOP does not reach
        prog += [(_JEQ, 0, 5, nr_clone), (_LD_ABS, 0, 0, _ARG0_OFF), (_JSET, 2, 0, _CLONE_NEW_NAMESPACES | _CLONE_VFORK),
                 (_JSET, 0, 1, _CLONE_THREAD), (_RET, 0, 0, _RET_ALLOW), (_RET, 0, 0, eperm)]
    for nr, arg, commands in ((nr_ioctl, _ARG1_OFF, _DENY_IOCTLS), (_FCNTL[machine], _ARG1_OFF, _DENY_FCNTLS),
                              (_PRCTL[machine], _ARG0_OFF, _DENY_PRCTLS)):  # by their command
        prog += [(_JEQ, 0, len(commands) + 3, nr), (_LD_ABS, 0, 0, arg)]
        prog += [(_JEQ, len(commands) - i, 0, cmd) for i, cmd in enumerate(commands)]
        prog += [(_RET, 0, 0, _RET_ALLOW), (_RET, 0, 0, eperm)]
    return prog + [(_RET, 0, 0, _RET_ALLOW)]


_SECCOMP_TSYNC, _SECCOMP_SPEC_ALLOW = 1, 4  # SECCOMP_FILTER_FLAG_*


def _status_field(name: str) -> str:
    """A field of /proc/self/status ("" where the kernel has none, or the sandbox hides /proc)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def deny_syscalls(allow_processes: bool = False) -> dict[str, Any]:
    """Irreversibly install the seccomp filter on every thread of this process (TSYNC: torch,
    OpenMP and CUDA threads started before it are covered too). Returns what was enforced.
    Filters stack: a later call can only deny more."""
    machine = platform.machine()
    if machine not in _SECCOMP:
        return {"seccomp": f"unavailable (no syscall table for {machine})"}
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    prog = seccomp_program(machine, os.getpid(), allow_processes)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return {"seccomp": f"failed: no_new_privs: {os.strerror(ctypes.get_errno())}"}
    threads = _thread_count()
    # SPEC_ALLOW: without it a kernel that mitigates speculative store bypass "via prctl and
    # seccomp" turns the mitigation on for a filtered process: every host instruction of the
    # candidate slower, none of the unfiltered baseline client it is timed against. (The lent H100
    # mitigates "via prctl" only: there the gap between the clients was the CPU core each ran on,
    # issue 23, `Judge.share_a_core`.) Kernels before 4.17: without.
    for flags in (_SECCOMP_TSYNC | _SECCOMP_SPEC_ALLOW, _SECCOMP_TSYNC):
        rc = libc.syscall(ctypes.c_long(_SECCOMP[machine][1]), ctypes.c_uint(1), ctypes.c_uint(flags),
                          ctypes.byref(fprog))
        if not (rc < 0 and ctypes.get_errno() == errno.EINVAL):
            break
    if rc != 0:
        why = os.strerror(ctypes.get_errno()) if rc < 0 else f"thread {rc} could not be synchronised"
        return {"seccomp": f"failed: {why}"}
    col = 0 if machine == "x86_64" else 1
    return {"seccomp": f"on ({machine}, {len(prog)} instructions, all {threads} threads)",
            "speculation_store_bypass": _status_field("Speculation_Store_Bypass"),
            "denied": sorted(n for n, nums in _DENY_SYSCALLS.items() if nums[col] is not None
                             and not (allow_processes and n in _PROCESS_SYSCALLS))
            + (["clone with namespace flags"] if allow_processes else ["clone without CLONE_THREAD or with CLONE_VFORK"])
            + ["clone3 (ENOSYS)", "signals to other processes", "limits of other processes"]}


@functools.cache
def seccomp_supported() -> bool:
    """Whether this host can put a process under our syscall filter, found by doing it in a
    small child (isolated Python, this file loaded by path): where it cannot, no candidate
    can be asked to show one."""
    if platform.machine() not in _SECCOMP:
        return False
    probe = ("import importlib.util, sys\n"
             f"spec = importlib.util.spec_from_file_location('_probe_sandbox', {__file__!r})\n"
             "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
             "sys.exit(0 if str(m.deny_syscalls().get('seccomp', '')).startswith('on') else 1)\n")
    try:
        return subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def apply_candidate_sandbox(scratch: Path, gpu: bool, *, limits: dict[str, Any] | None = None,
                            address_space_limit: int | None = None, filesystem: bool = True,
                            syscalls: bool = True, writable: Sequence[Path] = (),
                            spawn: bool = False, executable: Sequence[Path] = (),
                            readable: Sequence[Path] | None = None) -> dict[str, Any]:
    """Every layer for a candidate process, in order: rlimits (`limits`: file_size_bytes,
    cpu_seconds, open_files, processes), then writes only to `scratch`, the device nodes (`gpu`: the backend's device is a GPU) and
    `writable`, then the syscall filter. Call it after the device started, before loading any
    candidate code. `spawn`: the language starts compilers while loading (Triton): execution is
    then limited by Landlock to `executable`, and the filter lets processes start (the strict one
    is stacked after loading). `readable` (with `filesystem`): reads confined too, to
    `candidate_read_paths` and these (the candidate's own snapshot)."""
    limits = limits or {}
    report = apply_limits(limits.get("file_size_bytes"), limits.get("cpu_seconds"), limits.get("open_files"),
                          limits.get("processes"), address_space_limit)
    if filesystem:
        paths = [p for p in [scratch, *device_write_paths(gpu), *writable] if p.exists()]
        reads = None if readable is None else [*candidate_read_paths(gpu), *readable]
        report.update(restrict_writes(paths, executable=list(executable) if spawn else None, readable=reads))
    if syscalls:
        report.update(deny_syscalls(allow_processes=spawn))
    report["processes_while_loading"] = spawn
    return report


# ---- the worker's process tree (parent side) ---------------------------------------------
def process_tree(root_pid: int, max_age_s: float = 0.0) -> list[int]:
    """`root_pid` and all its descendants (orphans inside a PID namespace are re-parented to
    the namespace's init, which is the worker, so they stay in the tree). `max_age_s` > 0 takes
    a scan of /proc that another thread of this process made that recently: watchers share one
    (each scan reads every process's stat on the host, 43 ms among 1,721 processes on a 2-core
    box, and a data run's parent has a watching thread per worker, 48 on four GPUs). Kills and
    counts that decide something at once pass 0: a fresh scan.

    Where the kernel keeps each thread's children list (/proc/PID/task/TID/children, as CRIU
    reads it), the tree is walked down from `root_pid` instead: the same parent links the scan
    reads from every process's stat, at the cost of the tree's own threads, not the host's
    processes (~5 ms a scan on an H100 host, 16-25 of them an evaluation: issue 23)."""
    if _CHILDREN_LISTS:
        walked = _walk_children(root_pid)
        if walked is not None:
            return walked
    children = _children_by_parent(max_age_s)
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


CHILDREN_LIST_BYTES = 2048  # a children list read whole in one read() (the kernel serves a page per call)


def _walk_children(root_pid: int) -> list[int] | None:
    """`root_pid` and its descendants from the children lists of every thread met on the way (a
    child belongs to the thread that made it), each once. A process gone on the way is left out, as
    a scan made a moment later would leave it. None, for the scan, where a list can't be read for
    another reason or is long: the kernel serves a page per read() and restarts the next read by
    position, so a sibling gone between two reads can hide a live child from the walk (a review of
    the sixteenth session, P1: 800 children of one thread); a list read in one call is whole."""
    tree, todo, seen = [], [root_pid], {root_pid}
    while todo:
        pid = todo.pop()
        tree.append(pid)
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        except OSError:
            return None
        for tid in threads:
            try:
                fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY)
            except FileNotFoundError:  # the thread (or its process) ended since it was listed
                continue
            except OSError:
                return None
            try:
                text = os.read(fd, CHILDREN_LIST_BYTES + 1)
            except OSError:
                return None
            finally:
                os.close(fd)
            if len(text) > CHILDREN_LIST_BYTES:
                return None
            try:
                children = [int(child) for child in text.split()]
            except ValueError:
                return None
            todo.extend(c for c in children if c not in seen)  # a child met twice (its thread ended mid-walk
            seen.update(children)  # and it moved to a sibling thread read later) counts once (review, P2)
    return tree


_CHILDREN_LISTS = os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")  # CONFIG_PROC_CHILDREN
_SCAN_LOCK = threading.Lock()
_last_scan: tuple[float, dict[int, list[int]]] = (-math.inf, {})


def _children_by_parent(max_age_s: float) -> dict[int, list[int]]:
    global _last_scan
    with _SCAN_LOCK:  # a thread that waited here for another's scan takes that one
        made, children = _last_scan
        if max_age_s > 0 and time.monotonic() - made <= max_age_s:
            return children
        started, children = time.monotonic(), {}  # its age counts from its start
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
        _last_scan = (started, children)
        return children


def memfd_bytes(pids: list[int], exclude: AbstractSet[tuple[int, int]] = frozenset(), *, mapped: bool = True) -> int:
    """Bytes allocated to memory files (memfd_create) that `pids` hold open or map, each file once,
    less those in `exclude` (dev, inode): the judge's own, shared with them. A memfd's pages are
    no process's resident memory until touched through a mapping: a candidate that fallocated
    2 GiB of them at load held that much of the host's memory beyond any resident limit (red team
    round 7, m2). Read from /proc: the open files, and with `mapped` the mapped ones too (found in
    `maps`, thousands of lines for a process of torch, and looked at through `map_files`, which
    root can read); what cannot be read is not counted."""
    seen, total = set(exclude), 0

    def count(path: str) -> None:
        nonlocal total
        try:
            st = os.stat(path)
        except OSError:
            return
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512

    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    count(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
        if not mapped:
            continue
        try:  # bytes: a file's name in `maps` is the candidate's, and need not be text (red team round 9, u1)
            with open(f"/proc/{pid}/maps", "rb") as fh:
                spans = [line.split(None, 1)[0].decode("ascii", "replace") for line in fh if b"/memfd:" in line]
        except OSError:
            spans = []
        for span in spans:
            count(f"/proc/{pid}/map_files/{span}")
    return total


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
