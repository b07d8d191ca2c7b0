"""Cache of eager / torch.compile timings per (task, device, torch, compile mode, backend).

torch.compile costs seconds to minutes per process; paying it for every candidate of the
same task would dominate RL's evaluation budget. Eager is re-measured in every run
(interleaved with the candidate); the cached compile time is rescaled by how eager moved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel

from ..backends.base import digest
from .records import TimingStats


class Baseline(BaseModel):
    eager: TimingStats
    compile: TimingStats | None = None


class BaselineCache:
    def __init__(self, root: Path) -> None:
        self.root = root / "baselines"

    @staticmethod
    def key(task_hash: str, device: str, torch_version: str, compile_mode: str | None, backend: str,
            timing_fingerprint: str, precision: str | None = None) -> str:
        """The measurement's identity; an fp16/bf16 run times other kernels than fp32 does."""
        extra = () if precision in (None, "fp32") else (precision,)
        return digest(task_hash, device, torch_version, str(compile_mode), backend, timing_fingerprint, *extra)

    def get(self, key: str) -> Baseline | None:
        path = self.root / f"{key}.json"
        try:
            return Baseline.model_validate_json(path.read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, baseline: Baseline) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{key}.json"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(baseline.model_dump(), indent=1))
        os.replace(tmp, path)
