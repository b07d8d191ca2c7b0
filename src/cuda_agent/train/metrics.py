"""Training metrics that say whether the recipe is healthy: rewards, pass rate, speedups, turns,
tokens, and the importance-ratio statistics whose explosion caused the paper's collapse (SPEC §4:
CUDA tokens with ~1e-9 probability in BF16). Pure functions, shared by both engines.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Iterable

from ..storage import JsonlWriter, read_jsonl

REWARDS = (-1, 1, 2, 3)


def verdict(result: Any, tool_calls: int, tool_errors: int) -> dict[str, Any]:
    """One episode's record as `episode_metrics` reads it: the one shape both engines log."""
    return {"reward": result.reward, "compiled": result.compiled, "correct": result.correct,
            "speedup_vs_eager": result.speedup_vs_eager, "speedup_vs_compile": result.speedup_vs_compile,
            "tool_calls": tool_calls, "tool_errors": tool_errors}


def episode_metrics(episodes: Iterable[dict[str, Any]], prefix: str = "env/") -> dict[str, float]:
    """Aggregate per-episode verdicts (reward, compiled, correct, speedups, tool calls)."""
    eps = list(episodes)
    if not eps:
        return {}
    n = len(eps)
    rewards = [float(e["reward"]) for e in eps]
    out: dict[str, float] = {
        "episodes": float(n),
        "reward_mean": sum(rewards) / n,
        "reward_max": max(rewards),
        "reward_min": min(rewards),
        "compile_rate": sum(bool(e.get("compiled")) for e in eps) / n,
        "pass_rate": sum(bool(e.get("correct")) for e in eps) / n,
        "faster_than_eager_rate": sum(r >= 2 for r in rewards) / n,
        "faster_than_compile_rate": sum(r >= 3 for r in rewards) / n,
    }
    for r in REWARDS:
        out[f"reward_frac/{r:+d}"] = sum(x == r for x in rewards) / n
    for key in ("speedup_vs_eager", "speedup_vs_compile"):
        vals = [e[key] for e in eps if e.get("correct") and e.get(key)]
        if vals:
            out[f"{key}_geomean"] = math.exp(sum(math.log(v) for v in vals) / len(vals))
    calls = sum(int(e.get("tool_calls") or 0) for e in eps)
    errors = sum(int(e.get("tool_errors") or 0) for e in eps)
    # validity: a malformed call is not parsed as a call at all (counted in neither), so report both
    # the share of episodes that made any call and the share of parsed calls that ran cleanly
    out["episodes_with_tool_call"] = sum(int(e.get("tool_calls") or 0) > 0 for e in eps) / n
    if calls:
        out["tool_call_ok_rate"] = (calls - errors) / calls
    by_task: dict[str, list[float]] = {}
    for e, r in zip(eps, rewards):
        if e.get("task"):
            by_task.setdefault(str(e["task"]).rsplit("/", 1)[-1], []).append(r)
    for task, rs in sorted(by_task.items()):
        out[f"task_reward/{task}"] = sum(rs) / len(rs)
    for key in ("tool_calls", "tool_errors", "turns", "response_tokens", "model_tokens"):
        vals = [float(e[key]) for e in eps if e.get(key) is not None]
        if vals:
            out[f"{key}_mean"] = sum(vals) / len(vals)
    return {prefix + k: v for k, v in out.items()}


def ratio_metrics(log_ratio: Any, logps: Any, mask: Any, *, clip_high: float, prefix: str = "ratio/"
                  ) -> dict[str, float]:
    """Importance ratio r = pi_new / pi_old over the trained tokens (mask 1), and how improbable the
    sampled tokens are under the policy. Tensors of one shape; returns plain floats."""
    import torch

    m = mask.bool()
    if not bool(m.any()):
        return {}
    lr = log_ratio.detach().float()[m]
    lp = logps.detach().float()[m]
    r = lr.exp()
    return {
        prefix + "mean": r.mean().item(),
        prefix + "max": r.max().item(),
        prefix + "min": r.min().item(),
        prefix + "abs_log_mean": lr.abs().mean().item(),
        prefix + "frac_above_clip": (r > 1 + clip_high).float().mean().item(),
        prefix + "frac_above_2": (r > 2).float().mean().item(),
        prefix + "frac_above_10": (r > 10).float().mean().item(),
        "token_prob/logp_mean": lp.mean().item(),
        "token_prob/min": lp.min().exp().item(),
        "token_prob/frac_below_1e-4": (lp < math.log(1e-4)).float().mean().item(),
        "token_prob/frac_below_1e-8": (lp < math.log(1e-8)).float().mean().item(),
        "tokens/trained": float(m.sum().item()),
        "tokens/not_trained": float((~m).sum().item()) if torch.is_tensor(mask) else 0.0,
    }


def merge_means(rows: list[dict[str, float]]) -> dict[str, float]:
    """Combine per-micro-batch stats: max of maxima, min of minima, mean of the rest."""
    out: dict[str, float] = {}
    keys = {k for r in rows for k in r}
    for k in keys:
        vals = [r[k] for r in rows if k in r]
        if k.endswith("max"):
            out[k] = max(vals)
        elif k.endswith("min"):
            out[k] = min(vals)
        elif k.startswith("tokens/"):
            out[k] = sum(vals)
        else:
            out[k] = sum(vals) / len(vals)
    return out


class JsonlLog:
    """Append-only metrics file: one JSON object per logging step, fsynced at once, so a run
    killed at any point leaves every step it finished on disk (`cuda_agent.storage`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._writer = JsonlWriter(self.path)
        self.t0 = time.time()

    def write(self, step: int, values: dict[str, Any]) -> None:
        row = {"step": step, "wall_s": round(time.time() - self.t0, 3), **{k: _plain(v) for k, v in values.items()}}
        self._writer.append(row)

    def close(self) -> None:
        self._writer.close()


def _plain(v: Any) -> Any:
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


__all__ = ["REWARDS", "verdict", "episode_metrics", "ratio_metrics", "merge_means", "JsonlLog", "read_jsonl"]
