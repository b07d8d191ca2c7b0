"""CUDA backend: `kernels/*.cu` through nvcc for the device's architecture, device events
for timing, and an L2 flush before every timed trial."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from .sharing import CudaIpc, SharingError, layout_extent, view_bytes
from .base import Arena, Backend, OutputReader, Timer, digest, host_compiler, python_id, tool_version, torch_lib_dir, torch_version

_CUSHION_CYCLES = 200_000  # ~0.1 ms at Hopper clocks
# device name fragment -> (HBM TB/s, dense fp16/bf16 tensor TFLOP/s), public datasheets
_PEAKS = {"H200": (4.8, 989.0), "H100": (3.35, 989.0), "A100": (2.04, 312.0), "L40S": (0.86, 362.0),
          "A10": (0.6, 125.0), "L4": (0.3, 121.0), "B200": (8.0, 2250.0)}


class _EventTimer(Timer):
    def __init__(self, event_cls: Any) -> None:
        self._start = event_cls(enable_timing=True)
        self._stop = event_cls(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._stop.record()

    def elapsed_ms(self) -> float:
        return float(self._start.elapsed_time(self._stop))


class CudaBackend(Backend):
    name = "cuda"
    torch_device = "cuda"
    extension_name = "cuda_extension"
    kernel_suffix = ".cu"
    allowed_kernel_flags: ClassVar[frozenset[str]] = frozenset(
        {"--use_fast_math", "-use_fast_math", "--ftz=true", "--extra-device-vectorization"}
    ) | frozenset(f"-maxrregcount={n}" for n in (32, 40, 48, 64, 72, 80, 96, 128, 168, 255))
    gpu = True
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    address_space_cap = False
    task_window_ms = (1.0, 100.0)  # the paper's window
    max_task_tensor_mb = 512.0
    languages = frozenset({"cpp", "triton", "paper"})
    runtime_symbols = (
        r"__cuda\w+|__nv\w+|cuda[A-Z]\w*|cu[A-Z]\w*",
        r"c10::cuda::(getStreamFromPool|setCurrentCUDAStream|MaybeSetDevice|getCurrentCUDAStream|getDefaultCUDAStream"
        r"|getStreamFromExternal|ExchangeDevice|MaybeExchangeDevice|SetDevice|GetDevice|device_count\w*|current_device"
        r"|c10_cuda_check_implementation|CUDACachingAllocator::.*|impl::CUDAGuardImpl::.*|warning_state|CUDAStream::.*"
        r"|get_cuda_check_suffix|getDeviceIndexWithPrimaryContext|CUDAKernelLaunchRegistry::.*)|c10::impl::GPUTrace::.*",
        r"at::cuda::(getCurrentDeviceProperties|getDeviceProperties|warp_size|getCurrentCUDAStream"
        r"|getDefaultCUDAStream)")
    denied_runtime_symbols = r"cudaDeviceReset|cudaThreadExit|cuDevicePrimaryCtxReset\w*|cuCtxDestroy\w*"
    runtime_title = "the CUDA runtime and driver"
    runtime_headers = frozenset(
        "cuda.h cuda_runtime.h cuda_runtime_api.h cuda_fp16.h cuda_fp16.hpp cuda_bf16.h cuda_bf16.hpp cuda_fp8.h "
        "cuda_fp6.h cuda_fp4.h mma.h cooperative_groups.h cuda_pipeline.h cuda_pipeline_primitives.h "
        "cuda_awbarrier.h cuda_awbarrier_primitives.h device_launch_parameters.h device_functions.h vector_types.h "
        "vector_functions.h math_constants.h driver_types.h cuda_texture_types.h texture_types.h surface_types.h "
        "sm_60_atomic_functions.h sm_61_intrinsics.h cublas_v2.h cublas_api.h cublasLt.h cudnn.h library_types.h "
        "cuda_device_runtime_api.h cudaTypedefs.h".split())
    runtime_header_dirs = ("cooperative_groups/", "cuda/", "cub/", "crt/")
    vendor_library_headers = frozenset("cublas_v2.h cublas_api.h cublas.h cublasLt.h cudnn.h cusparse.h cufft.h "
                                       "cusolverDn.h curand.h".split())

    def __init__(self) -> None:
        self._flush_buffer: Any = None
        self._event_cls: Any = None

    # ---- build side -------------------------------------------------------------
    def host_defines(self) -> list[str]:
        return [*super().host_defines(), "-DCUDA_AGENT_CUDA", f"-I{cuda_home()}/include"]

    def kernel_compile_cmd(self, src: Path, obj: Path, extra_flags: list[str]) -> list[str]:
        arch = cuda_arch()
        return [nvcc(), "-O3", "-std=c++17", "-lineinfo", "-Xcompiler", "-fPIC",
                f"-gencode=arch=compute_{arch},code=sm_{arch}", f"-ccbin={host_compiler()}",
                *[a for d in _nvidia_wheel_include_dirs() for a in ("-isystem", d)],  # cudnn.h (`paper` rules)
                *extra_flags, "-c", str(src), "-o", str(obj)]

    def link_cmd(self, objects: list[Path], out: Path, libraries: list[str]) -> list[str]:
        tlib = torch_lib_dir()
        dirs = [tlib, f"{cuda_home()}/lib64", *_nvidia_wheel_lib_dirs()]
        # the shared C++ runtime by name: where a machine lacks the libstdc++.so dev link, g++
        # would silently link the static archive's locale / random_device code into the library
        return [host_compiler(), "-shared", *map(str, objects), "-o", str(out), "-l:libstdc++.so.6",
                *[f"-L{d}" for d in dirs], *[f"-Wl,-rpath,{d}" for d in dirs],
                "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-lcudart", *libraries]

    def optional_libraries(self, sources_text: str) -> list[str]:
        libs = []
        if re.search(r"\bcublas(Lt)?\w*\s*\(", sources_text):
            libs += [_library_flag("cublas"), _library_flag("cublasLt")]
        if re.search(r"\bcudnn\w*\s*\(", sources_text):
            libs.append(_library_flag("cudnn"))
        return libs

    def toolchain_id(self) -> str:
        return digest("cuda", tool_version(nvcc()), tool_version(host_compiler()),
                      torch_version(), python_id(), cuda_arch())

    def device_key(self) -> str:
        return gpu_name_from_smi()

    def preprocess_cmds(self, src: Path, extra_flags: list[str]) -> list[list[str]]:
        """nvcc's own host preprocessing passes (its device pass cannot reach the OS)."""
        import shlex

        cmd = super().preprocess_cmds(src, extra_flags)[0]
        compile_cmd = self.kernel_compile_cmd(src, Path(os.devnull), extra_flags)
        dry = subprocess.run([compile_cmd[0], "--dryrun", *compile_cmd[1:]], capture_output=True, text=True,
                             timeout=60)
        cmds = []
        for ln in (dry.stdout + dry.stderr).splitlines():
            if ln.startswith("#$ ") and " -E " in ln and "-D__CUDA_ARCH__=" not in ln:
                argv = shlex.split(ln[3:])
                if "-o" in argv:
                    j = argv.index("-o")
                    argv = argv[:j] + argv[j + 2:]
                cmds.append(argv)
        return cmds or [[host_compiler(), "-E", "-x", "c++", "-D__CUDACC__", *cmd[1:]]]

    def device_source(self, path: Path) -> bool:
        return path.suffix == self.kernel_suffix

    # ---- run side -------------------------------------------------------------------
    def is_available(self) -> bool:
        import torch

        return torch.cuda.is_available()

    def start_device(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.empty(1, device=self.torch_device)

    def start_driver(self) -> None:
        import torch

        if torch.cuda.is_available():  # cuInit and the device count: no context (0 bytes in the driver's table)
            torch.cuda.init()

    def device_name(self) -> str:
        import torch

        return torch.cuda.get_device_name()

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def new_timer(self) -> Timer:
        import torch

        if self._event_cls is None:  # captured once, before candidate code can patch it
            self._event_cls = torch.cuda.Event
        return _EventTimer(self._event_cls)

    def flush_cache(self, cushion: bool = True) -> None:
        import torch

        if self._flush_buffer is None:
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            self._flush_buffer = torch.empty(max(2 * l2, 1 << 24) // 4, dtype=torch.int32, device="cuda")
        self._flush_buffer.zero_()
        # then ~0.1 ms of GPU sleep before the start event, so host-side launch overhead
        # (the runtime guard's included) is hidden and the events measure device time only
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None and cushion:
            sleep(_CUSHION_CYCLES)

    # ---- judge / candidate memory sharing ------------------------------------------------
    def _ipc(self) -> CudaIpc:
        if getattr(self, "_ipc_obj", None) is None:
            self._ipc_obj = CudaIpc()
        return self._ipc_obj

    def release_memory(self) -> None:
        import torch

        torch.cuda.empty_cache()
        if getattr(self, "_ipc_obj", None) is not None:  # the arenas it exported may be gone, their handles with them
            self._ipc_obj.forget_exports()

    def make_arena(self, nbytes: int) -> Arena:
        return _CudaArena(self._ipc(), nbytes)

    def open_arena(self, description: dict, fds: list[int]) -> Any:
        import torch

        if not int(description.get("nbytes", 0)):
            return torch.empty(0, dtype=torch.uint8, device="cuda")
        raw = self._ipc().tensor_at(str(description["handle"]))
        off, n = int(description["offset"]), int(description["nbytes"])
        if off < 0 or off + n > raw.numel():
            raise SharingError("arena description outside its allocation")
        return raw[off:off + n]

    def locate(self, tensor: Any) -> dict:
        return self._ipc().export(tensor.data_ptr())

    def output_reader(self, pid: int) -> OutputReader:
        return _CudaReader(self._ipc(), pid)

    def idle_probe(self) -> None:
        import torch

        if getattr(self, "_probe", None) is None:
            self._probe = torch.zeros(1, device="cuda")
        self._probe.add_(1)
        torch.cuda.synchronize()

    def peak_rates(self) -> tuple[float, float] | None:
        """Published HBM bandwidth and dense 16-bit tensor-core rate, each +25% headroom."""
        name = self.device_name().upper()
        for key, (tb_s, tflops) in _PEAKS.items():
            if key in name:
                return tb_s * 1.25e12, tflops * 1.25e12
        return 10e12, 2500e12  # unknown GPU: beyond any current part


class _CudaArena(Arena):
    def __init__(self, ipc: CudaIpc, nbytes: int) -> None:
        import torch

        # an allocation of its own (`CudaIpc.allocate`): the handle a client maps holds the arena only
        self.raw = ipc.allocate(nbytes) if nbytes else torch.empty(0, dtype=torch.uint8, device="cuda")
        self.fds = []
        self._where = ipc.export(self.raw.data_ptr()) if nbytes else {"handle": "", "offset": 0}

    def describe(self) -> dict:
        return {**self._where, "nbytes": self.raw.numel()}


class _CudaReader(OutputReader):
    def __init__(self, ipc: CudaIpc, owner: int) -> None:
        self.ipc, self.owner = ipc, owner  # the client whose outputs it reads (`CudaIpc.open`)

    def claim(self, arena: Arena) -> None:
        handle = arena.describe().get("handle")
        if handle:
            self.ipc.claim(str(handle), self.owner)

    def read(self, where: dict, layout: dict, copy: bool = True) -> Any:
        raw = self.ipc.tensor_at(str(where.get("handle", "")), self.owner)
        view = view_bytes(raw, layout, int(where.get("offset", -1)))
        # a copy (queued on the judge's stream at once): the candidate frees and reuses its memory
        return view.clone() if copy else view

    def span(self, where: dict, layout: dict) -> tuple[int, int]:
        base, size = self.ipc.open(str(where.get("handle", "")), self.owner)
        offset, extent = int(where.get("offset", -1)), layout_extent(layout)[-1]
        if offset < 0 or offset + extent > size:
            raise SharingError(f"tensor of {extent} bytes at offset {offset} is outside its {size}-byte allocation")
        return base + offset, base + offset + extent

    def in_arena(self, spans: list[tuple[int, int]], arena: Arena) -> list[bool]:
        lo = arena.raw.data_ptr() if arena.raw.numel() else 0
        hi = lo + arena.raw.numel()
        return [start < hi and lo < end for start, end in spans]

    def close(self) -> None:
        self.ipc.close_all()


@cache
def cuda_home() -> str:
    """The toolkit root: the one whose include/ has cuda_runtime.h (nvcc may be a wrapper)."""
    env = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if env:
        return env
    exe = shutil.which("nvcc")
    if exe and (Path(exe).resolve().parent.parent / "include" / "cuda_runtime.h").is_file():
        return str(Path(exe).resolve().parent.parent)
    return "/usr/local/cuda"


def nvcc() -> str:
    return shutil.which("nvcc") or f"{cuda_home()}/bin/nvcc"


@cache
def cuda_arch() -> str:
    """Compute capability without creating a CUDA context: env, then nvidia-smi, then 90."""
    env = os.environ.get("CUDA_AGENT_CUDA_ARCH")
    if env:
        return env.replace("sm_", "").replace(".", "")
    caps = _smi("--query-gpu=compute_cap")
    return caps[0].strip().replace(".", "") if caps else "90"


@cache
def gpu_name_from_smi() -> str:
    """The first visible GPU's name via nvidia-smi, so the evaluator needs no CUDA context."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    names = _smi(f"--id={visible}", "--query-gpu=name")
    return names[0].strip() if names else "cuda"


def _smi(*query: str) -> list[str]:
    """nvidia-smi's CSV lines for `query`; none where it is missing or fails."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, *query, "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


@cache
def _nvidia_wheel_root() -> Path:
    import torch

    return Path(torch.__file__).parent.parent / "nvidia"


@cache
def _nvidia_wheel_lib_dirs() -> tuple[str, ...]:
    """cuBLAS / cuDNN shipped as pip wheels beside torch (nvidia/*/lib)."""
    root = _nvidia_wheel_root()
    if not root.is_dir():
        return ()
    return tuple(sorted(str(p) for p in root.glob("*/lib") if p.is_dir()))


@cache
def _nvidia_wheel_include_dirs() -> tuple[str, ...]:
    """The wheels' include folders that hold a vendor header the toolkit may lack (cudnn.h,
    cublas_v2.h); passed as -isystem, so the toolkit's own headers still come first."""
    root = _nvidia_wheel_root()
    if not root.is_dir():
        return ()
    return tuple(sorted(str(p) for p in root.glob("*/include")
                        if (p / "cudnn.h").is_file() or (p / "cublas_v2.h").is_file()))


def _library_flag(name: str) -> str:
    """`-lNAME` where a development link libNAME.so exists, else `-l:libNAME.so.N`: the pip
    wheels beside torch ship only the versioned file."""
    dirs = [Path(cuda_home()) / "lib64", *map(Path, _nvidia_wheel_lib_dirs())]
    if any((d / f"lib{name}.so").exists() for d in dirs):
        return f"-l{name}"
    for d in dirs:
        versioned = sorted(d.glob(f"lib{name}.so.[0-9]*"), key=lambda p: len(p.name))
        if versioned:
            return f"-l:{versioned[0].name}"
    return f"-l{name}"
