"""The evaluation environment: build, verify, time and reward a workspace, in isolation.

Config and record types import without torch; `evaluate` and the build load on first use."""

from __future__ import annotations

import importlib
from typing import Any

from .config import EvalConfig, GuardConfig, TimingConfig
from .records import BuildResult, EvalResult, TimeMs, TimingStats, TrialCheck

_LAZY = {"evaluate": "evaluator", "build_workspace": "build", "BuildError": "build", "default_cache_dir": "build",
         "milestone_reward": "reward"}

__all__ = ["evaluate", "EvalConfig", "GuardConfig", "TimingConfig", "EvalResult", "BuildResult", "TimeMs",
           "TimingStats", "TrialCheck", "build_workspace", "BuildError", "default_cache_dir",
           "milestone_reward"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
