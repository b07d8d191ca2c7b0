"""Evaluation settings: one validated record, serialised into every worker request."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, Field, field_validator


class TimingConfig(BaseModel):
    warmup_ms: float = Field(default=100.0, description="run each model this long (wall time, at least two batches) "
                             "before timing")
    min_trials: int = Field(default=30, ge=3, description="fewest interleaved rounds when the budget allows")
    max_trials: int = Field(default=2000, ge=3)
    budget_s: float = Field(default=1.0, gt=0, description="target wall seconds of the timed rounds, the judge's "
                            "own work between intervals included")
    floor_trials: int = Field(default=12, ge=3, description="fewest rounds where the budget ends them, even for slow "
                              "models (an early stop's own rule decides when it may come): 12 is the fewest at which "
                              "the median's 99% interval leaves out the slowest and fastest round, so one slow round "
                              "cannot take an honest speed-up's credit (at 10, red team round 29's 1.7-1.9x kernel "
                              "lost it in 5 of 7 runs on the CPU box)")
    early_stop: bool = Field(default=True, description="stop at a look (12, 24, 48 ... 768 rounds, a quarter of the budget "
                             "spent) once every 'faster' decision is settled at a confidence shared out over the "
                             "looks (Bonferroni), or once eager's bar is out of reach at a laxer one (from round 8, "
                             "15% of the budget and 12 calls compared; only ever a 'not faster': `judge.FUTILE_LEVEL`)")
    input_set_bytes: int = Field(default=1 << 29, description="cap on memory for a batch's inputs and outputs (held "
                                 "by the judge, each client's arena and the candidate's snapshot: 3x each). At 1 GiB "
                                 "level2/12_Gemm_Multiply_LeakyReLU took 4 calls per interval and 3.1x the naive "
                                 "harness's memory (issue 23); 512 MiB gives it 2 calls of 2.7 ms")
    confidence: float = Field(default=0.99, gt=0.5, lt=1.0, description="for the 'faster' decision")
    interval_ms: float = Field(default=10.0, gt=0, description="calls are batched so one timed interval lasts about this long")
    max_batch: int = Field(default=256, ge=1, description="most calls in one timed interval")


class GuardConfig(BaseModel):
    """Anti-hacking checks (all on by default); switch one off only for research."""

    static_checks: bool = Field(default=True, description="AST / source scan before building")
    disabled_rules: list[str] = Field(default_factory=list, description="static rule ids to skip")
    torch_compute: bool = Field(default=True, description="block torch compute in ModelNew.forward at the dispatcher")
    input_mutation: bool = Field(default=True, description="the candidate must leave its inputs as the reference does")
    constant_output: bool = Field(default=True, description="output must change when the reference's does")
    no_network: bool = Field(default=True, description="worker in new, empty network and PID namespaces where the OS allows")
    filesystem: bool = Field(default=True, description="worker may write only to its scratch dir and /dev (Landlock, where the kernel has it)")
    confine_reads: bool | None = Field(default=True, description="the candidate may read only what honest code needs "
                                       "(Landlock): system libraries, Python's paths, its own artifact; on a GPU too since "
                                       "an H100 run showed honest CUDA, Triton and vendor-library kernels keep their "
                                       "rewards under it (bench/results/h100_issue23_2026-11-26e). None (older configs): on")
    no_processes: bool = Field(default=True, description="a new process in the worker's tree after candidate import kills it")
    fresh_values: bool = Field(default=True, description="new input values every timed round (no fingerprint caching)")
    speed_of_light: bool = Field(default=True, description="a time below the device's bytes/flops bound is flagged and re-measured")
    peak_scale: float = Field(default=1.0, gt=0, description="scales the device's peak rates in the speed-of-light bound (research knob)")
    max_file_bytes: int = Field(default=1 << 30, description="largest file the worker may write (RLIMIT_FSIZE)")
    syscalls: bool = Field(default=True, description="seccomp filter in the candidate process: no sockets, no new "
                           "processes, no ptrace (where the kernel has seccomp)")
    symbols: bool = Field(default=True, description="the built library may import only allowlisted symbols")

    @classmethod
    def off(cls) -> "GuardConfig":
        return cls(static_checks=False, torch_compute=False, input_mutation=False, constant_output=False,
                   no_network=False, filesystem=False, no_processes=False, fresh_values=False,
                   speed_of_light=False, syscalls=False, symbols=False)


class StageTimeouts(BaseModel):
    """How long each stage of the candidate may take before it is called hung (seconds);
    the whole evaluation is also bounded by `EvalConfig.worker_timeout_s`."""

    load_s: float = Field(default=180.0, gt=0, description="loading the library, importing model_new.py, building ModelNew")
    verify_s: float = Field(default=120.0, gt=0, description="one correctness trial")
    time_s: float = Field(default=120.0, gt=0, description="one timed batch of calls")


TOLERANCE_PROFILES = ("paper", "kernelbench")
class RulesProfile(str, Enum):
    """The vendor-library rule (languages/cpp/vendor.py has the table; a command-line choice)."""

    paper = "paper"
    strict = "strict"


RULES_PROFILES = tuple(p.value for p in RulesProfile)  # the same as languages/cpp/vendor.py's (checked by a test)
RULES_HELP = ("rules profile: 'paper' (the paper's rule: cuBLAS / cuBLASLt GEMM and cuDNN convolution allowed, "
              "nothing else of them) or 'strict' (no vendor library)")


class EvalConfig(BaseModel):
    """Everything that shapes one evaluation; defaults follow the paper (SPEC §1)."""

    backend: str | None = Field(default=None, description="'cuda' or 'cpu'; None = local device")
    trials: int = Field(default=5, ge=1, description="correctness checks on fresh inputs")
    seed: int = 42
    atol: float = Field(default=1e-2, description="absolute tolerance of the 'paper' profile (fp32 outputs)")
    rtol: float = Field(default=1e-2, description="relative tolerance of the 'paper' profile (fp32 outputs)")
    tolerance: str = Field(default="paper", description="'paper' (atol = rtol = 1e-2) or 'kernelbench' "
                           "(1e-4 for fp32, 1e-2 for fp16 / bf16); both add a check scaled by the output's own size")
    rules: str = Field(default="paper", description="rules profile for vendor libraries: 'paper' (the CUDA Agent "
                       "release's rule: cuBLAS / cuBLASLt for GEMM and cuDNN for convolution, nothing else of them) "
                       "or 'strict' (no vendor library); docs/guards.md")
    margin: float = Field(default=0.05, description="'faster' means (t_base - t) / t_base > margin")
    measure: bool = Field(default=True, description="False: build and verify only (reward 1 if correct)")
    compile_mode: str | None = Field(default="default", description="torch.compile mode; None skips it")
    use_baseline_cache: bool = True
    timing: TimingConfig = Field(default_factory=TimingConfig)
    guards: GuardConfig = Field(default_factory=GuardConfig)
    build_timeout_s: float = 300.0
    worker_timeout_s: float = Field(default=600.0, gt=0, description="the whole evaluation after the build")
    timeouts: StageTimeouts = Field(default_factory=StageTimeouts)
    memory_limit_gb: float = Field(default=16.0, description="worker resident memory cap")
    cache_dir: str | None = None
    prespawn_worker: bool = Field(default=True, description="start the next worker (torch imported) "
                                  "after each evaluation, hiding ~2 s of start-up from the next one")
    keep_task_warm: bool = Field(default=True, description="the judge keeps the task (reference, inputs, baseline "
                                 "client) for its next evaluation (an RL group, an agent's turns). False where none "
                                 "follows (a benchmark's one evaluation per task): the judge forgets it once it has "
                                 "answered, in the gap before the next request, so the next task neither waits for "
                                 "that nor meets its memory")

    @field_validator("tolerance")
    @classmethod
    def _known_profile(cls, v: str) -> str:
        if v not in TOLERANCE_PROFILES:
            raise ValueError(f"unknown tolerance profile {v!r}; choose one of {', '.join(TOLERANCE_PROFILES)}")
        return v

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, v: str) -> str:
        if v not in RULES_PROFILES:
            raise ValueError(f"unknown rules profile {v!r}; choose one of {', '.join(RULES_PROFILES)}")
        return v

    @classmethod
    def from_options(cls, backend: str | None = None, *, measure: bool = True, trials: int | None = None,
                     compile_baseline: bool = True, guards: bool = True, atol: float | None = None,
                     rtol: float | None = None, tolerance: str | None = None, timeout_s: float | None = None,
                     memory_limit_gb: float | None = None, timing_budget_s: float | None = None,
                     min_rounds: int | None = None, warmup_ms: float | None = None,
                     rules: str | None = None) -> "EvalConfig":
        """The one place command-line options become a config: an option left as None keeps
        the default, so every command means the same by the same flag."""
        timing: dict[str, Any] = {}
        if timing_budget_s is not None:
            timing["budget_s"] = timing_budget_s
        if min_rounds is not None:  # also lowers the floor that slow models get
            timing.update(min_trials=min_rounds, floor_trials=min(min_rounds, TimingConfig().floor_trials))
        if warmup_ms is not None:
            timing["warmup_ms"] = warmup_ms
        given = {"trials": trials, "atol": atol, "rtol": rtol, "tolerance": tolerance, "worker_timeout_s": timeout_s,
                 "memory_limit_gb": memory_limit_gb, "rules": rules}
        fields: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        fields.update(backend=backend, measure=measure, timing=TimingConfig(**timing))
        if not compile_baseline:
            fields["compile_mode"] = None
        if not guards:
            fields["guards"] = GuardConfig.off()
        return cls(**fields)

    def trial_seeds(self) -> list[int]:
        """Distinct, reproducible seeds for the correctness trials."""
        return [self.seed * 1000 + 7919 * i + 1 for i in range(self.trials)]
