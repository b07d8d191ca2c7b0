"""Which devices a run may use, counted once: one evaluation slot per visible GPU (so no two
timings share one), or a number of CPU slots. The agent, the benchmark and data synthesis
all place their work through `device_slots`; `slots.py` schedules jobs over them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SlotSpec:
    """One evaluation slot: a label for records and the environment that pins its device."""

    label: str
    env: dict[str, str] = field(default_factory=dict)


def device_slots(backend: str, devices: list[int] | None = None, cpu_slots: int = 1) -> list[SlotSpec]:
    """One slot per GPU (all visible ones unless `devices` says which), or `cpu_slots` on a
    backend without one. A device index is mapped through an inherited visibility variable."""
    from . import backend_class

    env_key = backend_class(backend).visible_devices_env
    if not backend_class(backend).gpu or env_key is None:
        return [SlotSpec(f"{backend}:{i}") for i in range(max(1, cpu_slots))]
    if devices is None:
        devices = list(range(visible_gpu_count()))
    if not devices:
        raise RuntimeError(f"the {backend} backend needs at least one visible GPU")
    visible = os.environ.get(env_key)
    physical = [d.strip() for d in visible.split(",")] if visible else None
    out = []
    for d in devices:
        dev = physical[d] if physical and d < len(physical) else str(d)
        out.append(SlotSpec(f"{backend}:{dev}", {env_key: dev}))
    return out


def spread(slots: list[SlotSpec], workers: int) -> list[SlotSpec]:
    """`workers` slots dealt round-robin over `slots` (several workers may share one device)."""
    return [slots[k % len(slots)] for k in range(workers)]


def visible_gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


__all__ = ["SlotSpec", "device_slots", "spread", "visible_gpu_count"]
