"""`run_in_workspace`: one episode under the benchmark's episode-function convention,

    fn(task=..., workspace=<existing workspace dir>, backend=..., config=<EvalConfig>, **options)

so a suite runner can name it (`cuda_agent.agent:run_in_workspace`) and evaluate the workspace
itself afterwards. `policy` is a `Policy`, a `PolicyConfig` (or a dict of its fields) or a
`KIND[:MODEL]` string; other options fill `PolicyConfig` or `AgentConfig` fields. Policies are
cached per process, so a local model loads once per worker.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..evaluation import EvalConfig
from ..tasks import Task
from ..workspace import open_workspace
from .loop import AgentConfig, run_episode
from .policies.base import Policy, PolicyConfig, make_policy
from .trajectory import Trajectory

_POLICIES: dict[str, Policy] = {}
_LOCK = threading.Lock()


def policy_config(policy: str | dict[str, Any] | PolicyConfig, **fields: Any) -> PolicyConfig:
    """A PolicyConfig from a `KIND[:MODEL]` string, a dict or a config, with `fields` on top."""
    if isinstance(policy, PolicyConfig):
        return policy.model_copy(update=fields) if fields else policy
    if isinstance(policy, dict):
        return PolicyConfig(**{**policy, **fields})
    return PolicyConfig.parse(policy, **fields)


def run_in_workspace(*, task: Task, workspace: str | Path, backend: str, config: EvalConfig | None = None,
                     policy: str | dict[str, Any] | PolicyConfig | Policy = "local", workdir: str | Path | None = None,
                     **options: Any) -> Trajectory:
    """Run the agent in an existing workspace (edits its model_new.py and kernels/); the best state
    goes to `workdir/best` (default: beside the workspace). Returns the Trajectory."""
    ev = config or EvalConfig(backend=backend)
    ws = open_workspace(workspace, cache_dir=Path(ev.cache_dir) if ev.cache_dir else None)  # the trusted record
    if ws.backend != backend:
        raise ValueError(f"workspace {ws.root} is for the {ws.backend} backend, not {backend}")
    agent_fields = {k: options.pop(k) for k in list(options) if k in AgentConfig.model_fields}
    cfg = AgentConfig(backend=backend, eval=ev, **agent_fields)
    pol = policy if isinstance(policy, Policy) else _cached(policy_config(policy, **options))
    root = Path(workdir) if workdir is not None else ws.root.parent / f"{ws.root.name}.agent"
    return run_episode(task, pol, cfg, root, workspace=ws)


def _cached(cfg: PolicyConfig) -> Policy:
    key = cfg.model_dump_json()
    with _LOCK:
        if key not in _POLICIES:
            _POLICIES[key] = make_policy(cfg)
        return _POLICIES[key]


__all__ = ["run_in_workspace", "policy_config"]
