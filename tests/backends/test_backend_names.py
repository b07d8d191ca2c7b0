"""Backend decisions are asked of the backend: no module above `backends/` compares a backend's
name. Adding a backend is then one module and one registry line (docs/architecture.md)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from cuda_agent.backends import (BACKEND_NAMES, HOST_BACKEND, PRIMARY_BACKEND, Backend, backend_class,
                                 backend_of_device, default_backend_name, get_backend, model_backend)
from cuda_agent.backends.cpu import CpuBackend
from cuda_agent.backends.cuda import CudaBackend
from cuda_agent.languages import get_language

SRC = Path(__file__).resolve().parents[2] / "src" / "cuda_agent"

# Where a backend's name is data, not a decision: path under src/cuda_agent -> how many times.
ALLOWED: dict[str, int] = {
    "isolation/channel.py": 1,  # `.to("cpu")`: a torch device argument (isolation is below backends)
    "data/compose.py": 1,  # `device="cpu"`: the torch default for host tensors
    "data/ops.py": 1,  # the same
    "suites/flashinfer.py": 2,  # FlashInfer-Bench's solution schema: "language": "cuda", target_hardware
    "train/verl/data.py": 1,  # verl's dataset column `ability`: a label, not a backend
    "languages/cpp/source_rules.py": 1,  # `at::cuda::` in C++ source: a namespace, not a backend
    "train/fastgen.py": 5,  # torch's device type of the policy's weights: CUDA graphs, streams and the
    # generator exist only there (the sampler runs where the trainer put the model, not on a backend)
}


def _names_in(path: Path) -> int:
    """String constants that are exactly a backend's name (docstrings and prose never are)."""
    tree = ast.parse(path.read_text(), str(path))
    return sum(isinstance(n, ast.Constant) and n.value in BACKEND_NAMES for n in ast.walk(tree))


def test_no_backend_name_is_compared_above_backends() -> None:
    found = Counter({p.relative_to(SRC).as_posix(): _names_in(p) for p in SRC.rglob("*.py")
                     if p.relative_to(SRC).parts[0] != "backends"})
    found = +found  # drop the files without any
    allowed = ALLOWED
    extra = {f: n for f, n in found.items() if n > allowed.get(f, 0)}
    assert not extra, (f"backend names spelled above backends/ (ask the backend instead: "
                       f"backend_class(name).gpu, .torch_device, ...): {extra}")
    stale = {f: n for f, n in allowed.items() if found.get(f, 0) < n}
    assert not stale, f"allow-list entries with fewer occurrences than listed (trim them): {stale}"


def test_registry_lookups() -> None:
    assert set(BACKEND_NAMES) == {"cuda", "cpu"}
    assert {HOST_BACKEND, PRIMARY_BACKEND} <= set(BACKEND_NAMES)
    for name in BACKEND_NAMES:
        cls = backend_class(name)
        assert issubclass(cls, Backend) and cls.name == name
        assert isinstance(get_backend(name), cls)
    with pytest.raises(ValueError, match="unknown backend"):
        backend_class("tpu")
    assert default_backend_name() in BACKEND_NAMES
    assert backend_class(HOST_BACKEND)().is_available()


def test_backend_properties() -> None:
    assert CudaBackend.gpu and not CpuBackend.gpu
    assert CudaBackend.visible_devices_env == "CUDA_VISIBLE_DEVICES" and CpuBackend.visible_devices_env is None
    assert not CudaBackend.address_space_cap and CpuBackend.address_space_cap
    assert CudaBackend.task_window_ms == (1.0, 100.0) and CpuBackend.task_window_ms == (1.0, 50.0)
    assert CudaBackend.max_task_tensor_mb == 512.0 and CpuBackend.max_task_tensor_mb == 64.0
    assert CudaBackend.runtime_title == "the CUDA runtime and driver" and CpuBackend.runtime_title == "OpenMP"
    assert "cuda_runtime.h" in CudaBackend.runtime_headers and not CpuBackend.runtime_headers
    assert "cublas_v2.h" in CudaBackend.vendor_library_headers and not CpuBackend.vendor_library_headers
    assert CudaBackend().device_source(Path("k/a.cu")) and not CudaBackend().device_source(Path("k/a_binding.cpp"))
    assert not CpuBackend().device_source(Path("k/a.cpp"))


def test_languages_follow_the_backends() -> None:
    assert get_language("cpp").backends == ("cuda", "cpu")
    assert get_language("triton").backends == ("cuda",)
    get_language("triton").check_backend("cuda")
    with pytest.raises(ValueError, match="runs on cuda"):
        get_language("triton").check_backend("cpu")


def test_model_devices() -> None:
    assert backend_of_device("cuda:1") is CudaBackend
    assert backend_of_device("cpu") is CpuBackend
    assert backend_of_device("mps") is CpuBackend  # no backend runs there: the host's
    assert model_backend(HOST_BACKEND) is CpuBackend
    assert model_backend(PRIMARY_BACKEND) in (CudaBackend, CpuBackend)


def test_data_defaults_come_from_the_backend() -> None:
    from cuda_agent.data.config import ComposeConfig, FilterConfig

    for name in BACKEND_NAMES:
        cls = backend_class(name)
        assert FilterConfig().window(name) == cls.task_window_ms
        assert ComposeConfig().tensor_cap_bytes(name) == int(cls.max_task_tensor_mb * 2**20)
    assert FilterConfig(window_ms=(2.0, 3.0)).window("cuda") == (2.0, 3.0)


def test_symbol_allow_lists_come_from_the_backend() -> None:
    from cuda_agent.languages.cpp.symbols import classify

    assert classify("cudaMalloc", "cuda") is None
    assert classify("cudaMalloc", "cpu")[0] == "symbol-not-allowed"
    assert classify("GOMP_parallel", "cpu") is None
    assert "OpenMP" in classify("cudaMalloc", "cpu")[1]
    assert classify("cudaDeviceReset", "cuda") == ("symbol-not-allowed", "resets or destroys the device context")
