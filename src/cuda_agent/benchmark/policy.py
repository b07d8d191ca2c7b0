"""The seam between the benchmark and a policy: one episode per task, in its workspace.

A spec names the episode function so any worker can import it: "agent[:<policy spec>]" (the
agent layer's `run_in_workspace`, e.g. "agent:openai:Qwen/Qwen3-8B") or "<module>:<function>":

    fn(task: Task, workspace: Path, backend: str, config: EvalConfig, **options) -> EpisodeInfo | dict

(or a trajectory carrying token and turn counts, saved beside the workspace). The benchmark then
evaluates the final workspace itself, so a policy's own verdict never enters the metrics.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..evaluation import EvalConfig
from ..tasks import Task
from .records import EpisodeInfo

EpisodeFn = Callable[..., Any]
AGENT_SPEC = "agent"


class PolicySpecError(ValueError):
    """A policy spec that names nothing importable."""


def resolve_episode_fn(spec: str) -> EpisodeFn:
    """The callable a spec names (imported lazily: heavy engines stay optional)."""
    if spec == AGENT_SPEC or spec.startswith(AGENT_SPEC + ":"):
        return _agent_episode
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise PolicySpecError(f"policy {spec!r}: expected 'agent', 'agent:<policy>' or 'module:function'")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise PolicySpecError(f"policy {spec!r}: cannot import {module_name}:{attr} ({exc})") from None
    if not callable(fn):
        raise PolicySpecError(f"policy {spec!r}: {attr} is not callable")
    return fn


def run_policy_episode(spec: str, task: Task, workspace: Path, backend: str, config: EvalConfig,
                       options: dict[str, Any]) -> EpisodeInfo:
    """Run one episode; the returned info is validated into an EpisodeInfo."""
    fn = resolve_episode_fn(spec)
    if spec.startswith(AGENT_SPEC + ":"):
        options = {"policy": spec.split(":", 1)[1], **options}
    out = fn(task=task, workspace=workspace, backend=backend, config=config, **options)
    if isinstance(out, EpisodeInfo):
        return out
    if isinstance(out, dict):
        return EpisodeInfo.model_validate(out)
    info = _info_from_trajectory(out)
    if hasattr(out, "model_dump_json"):
        path = workspace.parent / f"{workspace.name}.trajectory.json"
        path.write_text(out.model_dump_json())
        info.trajectory = str(path)
    return info


def _agent_episode(*, task: Task, workspace: Path, backend: str, config: EvalConfig, **options: Any) -> Any:
    """Adapter to the agent layer's `run_in_workspace`, imported only when a policy run asks."""
    try:
        from ..agent import run_in_workspace
    except ImportError as exc:
        raise PolicySpecError("the agent layer (cuda_agent.agent.run_in_workspace) is not available: "
                              f"{exc}; install cuda-agent[agent]") from None
    return run_in_workspace(task=task, workspace=workspace, backend=backend, config=config, **options)


def _info_from_trajectory(traj: Any) -> EpisodeInfo:
    """Token and turn counts from whatever trajectory object an episode returned."""
    usage = getattr(traj, "usage", None)
    tokens = getattr(usage, "total_tokens", None) if usage is not None else getattr(traj, "total_tokens", None)
    turns = getattr(traj, "turns", None)
    n_turns = len(turns) if isinstance(turns, (list, tuple)) else turns if isinstance(turns, int) else None
    error = getattr(traj, "error", None)
    return EpisodeInfo(tokens=tokens if isinstance(tokens, int) else None, turns=n_turns,
                       stop_reason=str(getattr(traj, "stop_reason", "") or ""),
                       extra={"error": str(error)[:2000]} if error else {})
