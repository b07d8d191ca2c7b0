"""The evaluation environment: build, verify, time and reward a workspace, in isolation."""

from .build import BuildError, build_workspace, default_cache_dir
from .config import EvalConfig, GuardConfig, TimingConfig
from .evaluate import evaluate
from .records import BuildResult, EvalResult, TimeMs, TimingStats, TrialCheck
from .reward import milestone_reward

__all__ = ["evaluate", "EvalConfig", "GuardConfig", "TimingConfig", "EvalResult", "BuildResult", "TimeMs",
           "TimingStats", "TrialCheck", "build_workspace", "BuildError", "default_cache_dir",
           "milestone_reward"]
