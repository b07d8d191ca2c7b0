"""What differs per device: the toolchain that builds `kernels/`, and the clock and cache
control the timing harness uses. Nothing above this package names a device."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from abc import ABC, abstractmethod
from functools import cache
from pathlib import Path
from typing import Any, ClassVar


class Timer(ABC):
    """Measures one region of device work, in milliseconds."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def elapsed_ms(self) -> float:
        """Valid after `Backend.synchronize()`."""


class Backend(ABC):
    """One device family. Build-side methods run in the evaluator (no device needed);
    run-side methods run inside the isolated worker."""

    name: ClassVar[str]
    torch_device: ClassVar[str]
    extension_name: ClassVar[str]
    kernel_suffix: ClassVar[str]
    binding_suffix: ClassVar[str] = "_binding.cpp"
    # Per-file flags a kernel may ask for with a `// @flags: ...` line, nothing else.
    allowed_kernel_flags: ClassVar[frozenset[str]]

    # ---- what the layers above ask, instead of comparing backend names ------------------
    # An accelerator with its own driver: work is placed one slot per visible device, a Ray
    # task asks for a GPU, a model trains and runs in bf16 on it.
    gpu: ClassVar[bool] = False
    # The environment variable that says which of the host's devices a process sees.
    visible_devices_env: ClassVar[str | None] = None
    # A hard address-space limit (RLIMIT_AS) is safe for a candidate; False where the driver
    # maps huge virtual ranges.
    address_space_cap: ClassVar[bool] = True
    # Synthesised tasks: the eager runtime window (ms) and the cap on any one tensor (MiB).
    task_window_ms: ClassVar[tuple[float, float]]
    max_task_tensor_mb: ClassVar[float]
    # The languages (`languages/<name>.py`) a candidate may be written in on this device.
    languages: ClassVar[frozenset[str]]
    # The device runtime a built library may import: regexes over demangled symbol names,
    # one regex of its calls that are never allowed, and what the runtime is called.
    runtime_symbols: ClassVar[tuple[str, ...]] = ()
    denied_runtime_symbols: ClassVar[str | None] = None
    runtime_title: ClassVar[str]
    # Headers of the device toolkit a kernel may include (by name, or under a folder), and
    # vendor-library headers that are refused as a library fallback.
    runtime_headers: ClassVar[frozenset[str]] = frozenset()
    runtime_header_dirs: ClassVar[tuple[str, ...]] = ()
    vendor_library_headers: ClassVar[frozenset[str]] = frozenset()

    # ---- build side -------------------------------------------------------------
    @abstractmethod
    def kernel_compile_cmd(self, src: Path, obj: Path, extra_flags: list[str]) -> list[str]:
        """Compile one raw kernel file (no torch headers) to an object."""

    @abstractmethod
    def link_cmd(self, objects: list[Path], out: Path, libraries: list[str]) -> list[str]:
        """Link all objects into the extension library."""

    @abstractmethod
    def toolchain_id(self) -> str:
        """Compiler versions and target: part of every build-cache key."""

    def host_defines(self) -> list[str]:
        """Macros the binding files are compiled with (also baked into the PCH)."""
        return [f"-DCUDA_AGENT_EXTENSION={self.extension_name}"]

    def host_flags(self) -> list[str]:
        """Flags for binding files and the precompiled header; must match exactly."""
        abi = int(_torch_cxx11_abi())
        return ["-O3", "-fPIC", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                *self.host_defines(), *[f"-isystem{p}" for p in torch_include_dirs()]]

    def optional_libraries(self, sources_text: str) -> list[str]:
        """Extra link libraries a kernel's sources ask for (e.g. cuBLAS)."""
        return []

    def device_key(self) -> str:
        """Names the device for cache keys, from the evaluator's side (no device context)."""
        return self.device_name()

    def preprocess_cmds(self, src: Path, extra_flags: list[str]) -> list[list[str]]:
        """The host preprocessor command(s) that compiling the kernel file `src` amounts to
        (the static checks read their output)."""
        cmd = self.kernel_compile_cmd(src, Path(os.devnull), extra_flags)
        i = cmd.index("-o")
        return [[c if c != "-c" else "-E" for c in cmd[:i] + cmd[i + 2:]]]

    def device_source(self, path: Path) -> bool:
        """Whether a kernels/ file is compiled for the device rather than the host."""
        return False

    # ---- run side (inside the worker) ---------------------------------------------
    @abstractmethod
    def is_available(self) -> bool: ...

    def start_device(self) -> None:
        """Start the device's driver in this process where the device is present: before a
        sandbox closes the filesystem (the driver writes while it starts)."""

    def start_driver(self) -> None:
        """Start the driver only, without the device's context (which holds device memory):
        what a spare held for a later evaluation does ahead of need (`start_device` follows)."""

    @abstractmethod
    def device_name(self) -> str: ...

    @abstractmethod
    def synchronize(self) -> None: ...

    @abstractmethod
    def new_timer(self) -> Timer: ...

    def release_memory(self) -> None:
        """Judge side: give the device memory this process no longer uses back to the device
        (and forget whatever named it to other processes)."""

    def flush_cache(self, cushion: bool = True) -> None:
        """Evict caches before a timed trial so every trial starts equally cold. `cushion`:
        also queue a short device-side delay that hides host launch overhead from the device
        timer (off for the host-clock cross-check, which must see everything)."""

    def peak_rates(self) -> tuple[float, float] | None:
        """(bytes/s, flop/s) no kernel on this device can beat, generous on purpose; None where
        unknown. A measured time below max(bytes / rate, flops / rate) is not physical."""
        return None

    # ---- memory shared between the judge and the candidate (see sharing.py) ---------
    @abstractmethod
    def make_arena(self, nbytes: int) -> "Arena":
        """Judge side: one device allocation the candidate process can map."""

    @abstractmethod
    def open_arena(self, description: dict, fds: list[int]) -> Any:
        """Candidate side: the judge's arena as a uint8 tensor on this device."""

    @abstractmethod
    def locate(self, tensor: Any) -> dict:
        """Candidate side: where a tensor's memory is, in terms the judge can read it by."""

    @abstractmethod
    def output_reader(self, pid: int) -> "OutputReader":
        """Judge side: reads tensors the candidate process `pid` located, from outside it."""

    def idle_probe(self) -> None:
        """Judge side: a tiny piece of device work, waited for: the end of every timed interval
        (work a client left queued ahead of it is inside the interval)."""


class Arena(ABC):
    raw: Any  # uint8 tensor over the whole allocation
    fds: list[int]

    @abstractmethod
    def describe(self) -> dict: ...

    def close(self) -> None:
        """Release the allocation."""


class OutputReader(ABC):
    @abstractmethod
    def read(self, where: dict, layout: dict, copy: bool = True) -> Any:
        """The tensor `layout` (dtype, shape, strides) at `where`, checked against the
        allocation it names; raises SharingError on anything out of bounds. `copy=False` may
        return a view of the other process's memory (only for a trusted client's outputs)."""

    @abstractmethod
    def span(self, where: dict, layout: dict) -> tuple[int, int]:
        """[start, end) of the bytes `layout` at `where` can touch, in one address space shared by
        every output this reader names (the candidate's on the CPU, the judge's mappings of its
        allocations on the GPU): two outputs share memory only if their spans overlap. Checked
        against the allocation it names, nothing read."""

    @abstractmethod
    def in_arena(self, spans: list[tuple[int, int]], arena: "Arena") -> list[bool]:
        """For each span, whether any of it lies in the judge's input arena (inputs, weights)."""

    def claim(self, arena: "Arena") -> None:
        """`arena` is this reader's client's: no other client's output may name it (`CudaIpc.claim`)."""

    def close(self) -> None:
        """Unmap whatever was mapped."""


# ---- shared toolchain facts ---------------------------------------------------------
@cache
def torch_include_dirs() -> tuple[str, ...]:
    import torch

    root = Path(torch.__file__).parent / "include"
    return (str(root), str(root / "torch" / "csrc" / "api" / "include"),
            sysconfig.get_paths()["include"])


@cache
def torch_lib_dir() -> str:
    import torch

    return str(Path(torch.__file__).parent / "lib")


@cache
def torch_version() -> str:
    import torch

    return torch.__version__


@cache
def _torch_cxx11_abi() -> bool:
    import torch

    return bool(torch._C._GLIBCXX_USE_CXX11_ABI)


@cache
def tool_version(tool: str) -> str:
    """First line of `tool --version`, or 'missing'."""
    path = shutil.which(tool)
    if not path:
        return "missing"
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return lines[-1] if tool == "nvcc" and lines else (lines[0] if lines else "unknown")


def host_compiler() -> str:
    return os.environ.get("CXX", "g++")


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()


def python_id() -> str:
    return f"{sys.implementation.name}{sys.version_info.major}.{sys.version_info.minor}"
