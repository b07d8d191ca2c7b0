"""Checks, inside the worker, that candidate code left the measuring instruments alone.

The timing path (clocks, CUDA events, synchronisation, the harness functions and the
module globals they look names up in) is fingerprinted before candidate code is imported
and compared after timing. A candidate that patched a timer, swapped a function's code or
rebound a name in the harness's modules is caught by name. The host-clock cross-check in
the parent covers what this cannot see (patches below Python, in C).
"""

from __future__ import annotations

import os
import sys
import time
import types
from typing import Any

_MODULES = ("cuda_agent.evaluation.timing", "cuda_agent.evaluation.guards", "cuda_agent.evaluation.verify",
            "cuda_agent.evaluation.channel", "cuda_agent.backends.base", "cuda_agent.backends.cpu",
            "cuda_agent.backends.cuda")
_TIME_NAMES = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns")


def _function_parts(fn: Any) -> tuple[int, ...]:
    fn = getattr(fn, "__func__", fn)
    parts = [id(fn)]
    for attr in ("__code__", "__defaults__", "__kwdefaults__", "__closure__"):
        parts.append(id(getattr(fn, attr, None)))
    return tuple(parts)


def _class_entries(prefix: str, cls: type, out: dict[str, tuple[int, ...]]) -> None:
    for name, value in vars(cls).items():
        if isinstance(value, (types.FunctionType, classmethod, staticmethod, property)):
            out[f"{prefix}.{name}"] = _function_parts(getattr(value, "__func__", value))
        elif callable(value):
            out[f"{prefix}.{name}"] = (id(value),)


def timing_fingerprint(backend: Any) -> dict[str, tuple[int, ...]]:
    """Identities of everything the timing path calls or looks up."""
    fp: dict[str, tuple[int, ...]] = {}
    for name in _TIME_NAMES:
        fp[f"time.{name}"] = (id(getattr(time, name, None)),)
    for modname in _MODULES:
        module = sys.modules.get(modname)
        if module is None:
            continue
        for name, value in vars(module).items():
            if name.startswith("__"):
                continue
            if isinstance(value, types.FunctionType):
                fp[f"{modname}.{name}"] = _function_parts(value)
            elif isinstance(value, type) and value.__module__ == modname:
                _class_entries(f"{modname}.{name}", value, fp)
            else:
                fp[f"{modname}.{name}"] = (id(value),)
    _class_entries(f"backend:{type(backend).__name__}", type(backend), fp)
    for cls in type(backend).__mro__[1:]:
        if cls is not object:
            _class_entries(f"backend-base:{cls.__name__}", cls, fp)
    torch = sys.modules.get("torch")
    if torch is not None and getattr(backend, "name", "") == "cuda":
        fp["torch.cuda.synchronize"] = (id(torch.cuda.synchronize),)
        fp["torch.cuda.Event"] = (id(torch.cuda.Event),)
        fp["torch.cuda._sleep"] = (id(getattr(torch.cuda, "_sleep", None)),)
        _class_entries("torch.cuda.Event", torch.cuda.Event, fp)
    return fp


def changed_entries(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> list[str]:
    """Names whose identity changed, appeared or disappeared."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def thread_count() -> int:
    """Threads of this process right now (Linux); -1 where unknown."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1
