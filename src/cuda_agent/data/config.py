"""Settings for synthesis, filtering and auditing: validated records, sent to workers as JSON."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator, model_validator

from ..backends import backend_class
from .canonical import DEFAULT_VERDICTS

# Composition sizes as published for CUDA-Agent-Ops-6K (SPEC §3): torch×1 3.4%, ×2 83.8%,
# ×3 7.6%, ×4 2.8%, ×5 1.2% (the remaining 1.2% are transformers tasks, spread over sizes here).
OPS6K_MIX: dict[int, float] = {1: 3.4, 2: 83.8, 3: 7.6, 4: 2.8, 5: 1.2}


class FilterConfig(BaseModel):
    """What a task must pass (SPEC §3), and how hard each check looks."""

    window_ms: tuple[float, float] | None = Field(
        default=None, description="eager runtime window; None = the backend's default (Backend.task_window_ms)")
    compile: bool = Field(default=True, description="run the eager-vs-torch.compile check")
    compile_backend: str = Field(default="inductor", description="torch.compile backend ('eager' and "
                                 "'aot_eager' are cheap stand-ins for tests)")
    compile_mode: str | None = None
    atol: float = Field(default=1e-2, description="eager vs compile tolerance (the paper's 1e-2)")
    rtol: float = 1e-2
    determinism_atol: float = Field(default=0.0, description="0 = two same-seed runs must agree bit for bit")
    seed: int = 42
    timing_runs: int = Field(default=10, ge=1, description="timed calls for the eager runtime (median)")
    timing_budget_ms: float = Field(default=400.0, gt=0, description="stop timing early once this much is spent")
    max_parameter_checks: int = Field(default=16, ge=0, description="parameters perturbed by the unused-state check")
    early_exit: bool = Field(default=True, description="stop at the first failure (synthesis); audit runs all")
    gpu_lock: str | None = Field(default=None, description="device lock file, set by synth / audit when several "
                                 "workers share a device: the runtime filter's timings never overlap")
    quiet_timing: bool = Field(default=False, description="also hold every other device step off a running timer "
                               "(docs/data.md: consistent runtimes, ~5x fewer tasks per hour on an H100)")
    first_call_cut: float = Field(default=10.0, gt=0, description="reject as too slow when the first forward, "
                                  "and then a second (warm) one, take longer than this many times the window's "
                                  "upper bound")
    degenerate: bool = Field(default=True, description="run the degenerate-work checks (degenerate.py): "
                             "redundant ops, random loss targets, overflow, degenerate domains, near-constant output")

    def shared_lock(self) -> str | None:
        """The lock file other device work holds (shared) under quiet timing; None otherwise."""
        return self.gpu_lock if self.quiet_timing else None

    def window(self, backend: str) -> tuple[float, float]:
        return self.window_ms or backend_class(backend).task_window_ms

    @field_validator("window_ms")
    @classmethod
    def _window_ordered(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not 0 <= v[0] < v[1]:
            raise ValueError(f"window_ms must be (low, high) with 0 <= low < high, got {v}")
        return v


class ComposeConfig(BaseModel):
    """How plans are sampled from the catalogue."""

    mix: dict[int, float] = Field(default_factory=lambda: dict(OPS6K_MIX),
                                  description="number of operators -> weight")
    rank_weights: dict[int, float] = Field(default_factory=lambda: {1: 0.5, 2: 3.0, 3: 2.0, 4: 3.0, 5: 1.0})
    first_category_weights: dict[str, float] = Field(default_factory=lambda: {
        "parametric": 6.0, "reduction": 1.0, "mixing": 1.5, "elementwise": 1.0, "reshape": 0.3, "expanding": 0.2})
    later_category_weights: dict[str, float] = Field(default_factory=lambda: {
        "parametric": 1.5, "reduction": 1.5, "mixing": 1.5, "elementwise": 3.0, "reshape": 0.3, "expanding": 0.2})
    transformers_share: float = Field(default=0.012, ge=0, le=1, description="share of tasks that use one "
                                      "transformers layer (Ops-6K: 1.2%); the others use torch only")
    include_transformers: bool | None = Field(default=None, description="None = when installed")
    max_tensor_mb: float | None = Field(default=None, description="cap on any tensor of a task; None = the backend's "
                                        "default (Backend.max_task_tensor_mb: 512 MiB on GPU, 64 MiB on CPU)")
    max_scale_steps: int = Field(default=8, ge=1, description="timing rounds the size search may spend")

    @model_validator(mode="after")
    def _check(self) -> "ComposeConfig":
        if not self.mix or any(k < 1 or k > 8 or w < 0 for k, w in self.mix.items()) or sum(self.mix.values()) <= 0:
            raise ValueError(f"mix must map sizes 1-8 to non-negative weights with a positive sum: {self.mix}")
        if any(r not in range(1, 6) for r in self.rank_weights):
            raise ValueError("rank_weights keys must be ranks 1-5")
        return self

    def tensor_cap_bytes(self, backend: str) -> int:
        mb = self.max_tensor_mb or backend_class(backend).max_task_tensor_mb
        return int(mb * 2**20)


class SynthConfig(BaseModel):
    """One synthesis run. Seed + config + catalogue decide every plan (see docs/data.md)."""

    count: int = Field(default=100, ge=1, description="accepted tasks wanted")
    seed: int = 0
    backend: str | None = Field(default=None, description="'cuda' or 'cpu'; None = the local device")
    workers: int = Field(default=1, ge=1, description="worker processes (each runs one candidate at a time)")
    max_candidates: int | None = Field(default=None, description="stop after this many candidates in all")
    time_budget_s: float | None = Field(default=None, description="stop dispatching after this long")
    candidate_timeout_s: float = Field(default=300.0, gt=0)
    similarity_threshold: float = Field(default=0.9, gt=0, le=1.0)
    eval_sets: list[str] = Field(default_factory=list, description="task sources to stay away from "
                                 "(KernelBench checkout, files, tables)")
    contamination_verdicts: list[str] = Field(
        default_factory=lambda: list(DEFAULT_VERDICTS),
        description="canonical-form verdicts that reject a task as equivalent to an evaluation task "
                    "(canonical.py; 'eval_composition' = a chain of operators each of which is an evaluation task; "
                    "the default is measured in docs/data.md, Choosing the verdicts)")
    semantic_dedup: bool = Field(default=True, description="reject a task whose canonical operator sequence "
                                 "equals one already accepted (near_duplicate)")
    devices: list[int] | None = Field(default=None, description="GPU indices the workers are spread over (worker "
                                      "k uses devices[k % len]); one timing lock per device. None = the default "
                                      "device")
    parquet_every: int = Field(default=50, ge=1, description="rewrite the parquet file every N accepted")
    generator: str = Field(default="catalogue", description="'catalogue' (sampled) or 'llm'")
    compose: ComposeConfig = Field(default_factory=ComposeConfig)
    filters: FilterConfig = Field(default_factory=FilterConfig)
