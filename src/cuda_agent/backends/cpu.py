"""CPU backend: `kernels/*.cpp` through g++ -O3 -march=native -fopenmp, wall-clock timing."""

from __future__ import annotations

import os
import weakref
import platform
import time
from pathlib import Path
from typing import Any, ClassVar

from .sharing import SharingError, layout_extent, map_fd, memfd_arena, read_process_memory, view_bytes
from .base import Arena, Backend, OutputReader, Timer, digest, host_compiler, python_id, tool_version, torch_lib_dir, torch_version


_clock = time.perf_counter_ns  # bound at import, before any candidate code exists


class _WallTimer(Timer):
    def __init__(self) -> None:
        self._t0 = self._t1 = 0

    def start(self) -> None:
        self._t0 = _clock()

    def stop(self) -> None:
        self._t1 = _clock()

    def elapsed_ms(self) -> float:
        return (self._t1 - self._t0) / 1e6


class CpuBackend(Backend):
    name = "cpu"
    torch_device = "cpu"
    extension_name = "cpu_extension"
    kernel_suffix = ".cpp"
    allowed_kernel_flags: ClassVar[frozenset[str]] = frozenset({"-ffast-math", "-funroll-loops"})
    # 1-50 ms: the CPU backend times >= 100 rounds of eager, compile and candidate per
    # evaluation; 100 ms tasks would make each evaluation on a small CPU box last minutes
    task_window_ms = (1.0, 50.0)
    max_task_tensor_mb = 64.0
    languages = frozenset({"cpp", "paper"})
    runtime_symbols = (r"(GOMP|omp|kmp|__kmpc)_\w+",)
    runtime_title = "OpenMP"

    def kernel_compile_cmd(self, src: Path, obj: Path, extra_flags: list[str]) -> list[str]:
        return [host_compiler(), "-O3", "-march=native", "-fopenmp", "-fPIC", "-std=c++17",
                *extra_flags, "-c", str(src), "-o", str(obj)]

    def link_cmd(self, objects: list[Path], out: Path, libraries: list[str]) -> list[str]:
        lib = torch_lib_dir()
        return [host_compiler(), "-shared", "-fopenmp", *map(str, objects), "-o", str(out),
                f"-L{lib}", f"-Wl,-rpath,{lib}", "-lc10", "-ltorch_cpu", *libraries]

    def toolchain_id(self) -> str:
        return digest("cpu", tool_version(host_compiler()), torch_version(), python_id(),
                      platform.machine(), _native_arch())

    def is_available(self) -> bool:
        return True

    def device_name(self) -> str:
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return platform.processor() or platform.machine()

    def synchronize(self) -> None:
        return None

    def new_timer(self) -> Timer:
        return _WallTimer()

    # ---- judge / candidate memory sharing ------------------------------------------------
    def make_arena(self, nbytes: int) -> Arena:
        return _MemfdArena(nbytes)

    def open_arena(self, description: dict, fds: list[int]) -> Any:
        if len(fds) != 1:
            raise SharingError("the arena's file descriptor did not arrive")
        mm, raw = map_fd(fds[0], int(description["nbytes"]))
        self._mapped = mm  # keep the mapping alive with the backend
        return raw

    def locate(self, tensor: Any) -> dict:
        return {"address": tensor.data_ptr()}

    def output_reader(self, pid: int) -> OutputReader:
        return _ProcessReader(pid)

    def peak_rates(self) -> tuple[float, float] | None:
        """Beyond any current server CPU (DRAM ~0.6 TB/s, AMX bf16 ~0.1 PFLOP/s)."""
        return 2e12, 2e14


class _MemfdArena(Arena):
    def __init__(self, nbytes: int) -> None:
        fd, self._mm, self.raw = memfd_arena(nbytes)
        self.fds = [fd]
        # an arena dropped without close (an evaluation that failed midway) still gives its fd back:
        # otherwise its pages stay with the judge for good (red team round 8: 64 MiB each time)
        self._close_fds = weakref.finalize(self, _close_all, self.fds)
        st = os.fstat(fd)
        self.file_id = (st.st_dev, st.st_ino)  # how its mappings look in another process's /proc/<pid>/maps

    def describe(self) -> dict:
        return {"nbytes": self.raw.numel()}

    def close(self) -> None:
        self._close_fds()


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()


class _ProcessReader(OutputReader):
    """Copies the candidate's output bytes out of its address space (process_vm_readv)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._vmas: _Vmas | None = None

    def read(self, where: dict, layout: dict, copy: bool = True) -> Any:
        address = where.get("address")
        if not isinstance(address, int) or address <= 0:
            raise SharingError("malformed output address")
        extent = layout_extent(layout)[-1]
        if extent > 1 << 36:
            raise SharingError("output larger than any task's")
        raw = read_process_memory(self.pid, address, extent)
        return view_bytes(raw, layout, 0)

    def span(self, where: dict, layout: dict) -> tuple[int, int]:
        address = where.get("address")
        if not isinstance(address, int) or address <= 0:
            raise SharingError("malformed output address")
        return address, address + layout_extent(layout)[-1]

    def in_arena(self, spans: list[tuple[int, int]], arena: Arena) -> list[bool]:
        """Whether a span touches a mapping of the arena's memfd (by device and inode, from the
        kernel: the candidate may map it anywhere, any number of times)."""
        file_id = getattr(arena, "file_id", None)
        if file_id is None or not spans:
            return [False] * len(spans)
        if self._vmas is None:
            self._vmas = _Vmas(self.pid)
        self._vmas.cache = []  # the mappings may have changed since the last batch
        return [self._touches(start, end, file_id) for start, end in spans]

    def _touches(self, start: int, end: int, file_id: tuple[int, int]) -> bool:
        at = start
        while at < end:  # mapping after mapping: an output may straddle two
            vma = self._vmas.at(at)
            if vma is None:
                return False  # unmapped: reading it fails anyway
            if vma[2] == file_id:
                return True
            at = vma[1]
        return False

    def close(self) -> None:
        if self._vmas is not None:
            self._vmas.close()
            self._vmas = None


class _Vmas:
    """The mapping (VMA) that holds an address of another process: the kernel's PROCMAP_QUERY
    ioctl on /proc/<pid>/maps (Linux 6.11+; a few microseconds, and the answer covers the whole
    mapping, so outputs in one heap cost one query), else the maps file parsed once per batch."""

    _QUERY = (3 << 30) | (104 << 16) | (ord("f") << 8) | 17  # _IOWR('f', 17, struct procmap_query)

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd = os.open(f"/proc/{pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
        self.ioctl = True
        self.cache: list[tuple[int, int, tuple[int, int] | None]] = []

    def close(self) -> None:
        os.close(self.fd)

    def at(self, address: int) -> tuple[int, int, tuple[int, int] | None] | None:
        """(start, end, (device, inode) or None for anonymous memory) of the mapping that holds
        `address`; None where nothing is mapped."""
        for vma in self.cache:
            if vma[0] <= address < vma[1]:
                return vma
        if not self.ioctl:
            return self._parse(address)
        found = self._query(address)
        if found is not None:
            self.cache.append(found)
        return found

    def _query(self, address: int) -> tuple[int, int, tuple[int, int] | None] | None:
        import fcntl
        import struct

        buf = bytearray(struct.pack("=QQQQQQQQQIIIIQQ", 104, 0, address, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        try:
            fcntl.ioctl(self.fd, self._QUERY, buf)
        except OSError as exc:
            if exc.errno == 2:  # ENOENT: nothing mapped there
                return None
            self.ioctl = False  # an older kernel: read the maps file instead
            self.cache = []
            return self._parse(address)
        vals = struct.unpack("=QQQQQQQQQIIIIQQ", bytes(buf))
        start, end, inode, major, minor = vals[3], vals[4], vals[8], vals[9], vals[10]
        return start, end, (os.makedev(major, minor), inode) if inode else None

    def _parse(self, address: int) -> tuple[int, int, tuple[int, int] | None] | None:
        """Every mapping at once into the cache (one read of the maps file per batch)."""
        if not self.cache:
            with open(f"/proc/{self.pid}/maps") as f:
                for line in f:
                    parts = line.split()
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    major, minor = (int(v, 16) for v in parts[3].split(":"))
                    inode = int(parts[4])
                    self.cache.append((lo, hi, (os.makedev(major, minor), inode) if inode else None))
        return next((vma for vma in self.cache if vma[0] <= address < vma[1]), None)


def _native_arch() -> str:
    """-march=native differs per CPU model, so objects must not be shared across them."""
    try:
        flags = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")]
        return digest(flags[0]) if flags else platform.processor()
    except OSError:
        return platform.processor()
