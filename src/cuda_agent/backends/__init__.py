"""Device backends, by name. A new backend is one module plus one line in `_REGISTRY`."""

from __future__ import annotations

from .base import Backend, Timer
from .cpu import CpuBackend
from .cuda import CudaBackend

_REGISTRY: dict[str, type[Backend]] = {"cuda": CudaBackend, "cpu": CpuBackend}

BACKEND_NAMES = tuple(_REGISTRY)


def get_backend(name: str) -> Backend:
    """A fresh backend instance for `name` ('cuda' or 'cpu')."""
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def default_backend_name() -> str:
    """'cuda' when a CUDA device is visible to torch, else 'cpu'."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


__all__ = ["Backend", "Timer", "BACKEND_NAMES", "get_backend", "default_backend_name"]
