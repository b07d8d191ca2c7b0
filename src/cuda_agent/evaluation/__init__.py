"""The evaluation environment: build, verify, time and reward a workspace, in isolation.

Config and record types import without torch; `evaluate` and the build load on first use."""

from __future__ import annotations

from .._lazy import lazy_exports
from .config import EvalConfig, GuardConfig, TimingConfig
from .records import BuildResult, EvalResult, TimeMs, TimingStats, TrialCheck

_LAZY = {"evaluate": "evaluator", "measure_baselines": "evaluator", "milestone_reward": "reward",
         "evaluate_files": "files", "is_candidate_path": "files"}

__all__ = ["evaluate", "evaluate_files", "is_candidate_path", "measure_baselines", "EvalConfig", "GuardConfig", "TimingConfig", "EvalResult", "BuildResult", "TimeMs",
           "TimingStats", "TrialCheck",
           "milestone_reward"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
