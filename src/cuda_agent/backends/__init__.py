"""Device backends, by name. A new backend is one module plus one line in `_REGISTRY`.

The layers above ask a backend (`backend_class(name).gpu`, `.torch_device`, ...) rather than
compare its name; `tests/backends/test_backend_names.py` keeps it so."""

from __future__ import annotations

import os

from .base import Backend, Timer
from .cpu import CpuBackend
from .cuda import CudaBackend

# in order of preference: the local default is the first one present
_REGISTRY: dict[str, type[Backend]] = {"cuda": CudaBackend, "cpu": CpuBackend}

BACKEND_NAMES = tuple(_REGISTRY)
HOST_BACKEND = "cpu"
"""The machine itself: always present; where device-free work (the catalogue probe) runs."""
PRIMARY_BACKEND = "cuda"
"""The backend the project is for (the paper's GPUs): the default where the local device does
not decide, e.g. training data built on a laptop for a GPU cluster."""


def backend_class(name: str) -> type[Backend]:
    """The backend class for `name`: its class attributes, without building an instance."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def get_backend(name: str) -> Backend:
    """A fresh backend instance for `name` (one of `BACKEND_NAMES`)."""
    return backend_class(name)()


def default_backend_name() -> str:
    """The first backend whose device is present here: 'cuda' when torch sees a GPU, else 'cpu'."""
    return next(name for name, cls in _REGISTRY.items() if cls().is_available())


def missing_device(name: str, *, device: bool = True) -> str | None:
    """Why `name`'s work cannot run here, as one line a person can act on, or None when it can.
    `device=False` asks only for what a build needs (a torch built for the device), not for a
    device. Asked before any work starts: a GPU verb on a CPU box fails at once with the cause,
    not minutes later as a compile error naming a missing torch header (issue 28)."""
    import torch

    cls = backend_class(name)
    if not cls.gpu:
        return None
    if getattr(torch.version, cls.torch_device, None) is None:
        return (f"this torch ({torch.__version__}) is a build without {name} support; install a {name} build "
                f"of torch (TORCH_SPEC, README), or use --backend {HOST_BACKEND}")
    if device and not cls().is_available():
        env = cls.visible_devices_env
        seen = f" ({env}={os.environ[env]!r})" if env and env in os.environ else ""
        return f"torch sees no {name} device on this machine{seen}; use --backend {HOST_BACKEND} or a machine with one"
    return None


def model_backend(name: str | None = None) -> type[Backend]:
    """The backend whose device a model (a policy, a trainer) runs on: `name`'s where its
    device is present here, else the host's; None: the local default."""
    cls = backend_class(name or default_backend_name())
    return cls if cls().is_available() else backend_class(HOST_BACKEND)


def backend_of_device(torch_device: str) -> type[Backend]:
    """The backend whose torch device `torch_device` ('cuda:1', 'cpu') is on; the host's for
    a device no backend runs on (e.g. 'mps')."""
    kind = torch_device.split(":", 1)[0]
    return next((cls for cls in _REGISTRY.values() if cls.torch_device == kind), backend_class(HOST_BACKEND))


__all__ = ["Backend", "Timer", "BACKEND_NAMES", "HOST_BACKEND", "PRIMARY_BACKEND", "backend_class", "get_backend",
           "default_backend_name", "missing_device", "model_backend", "backend_of_device"]
