"""The agent: tools, policies, the ReAct loop, trajectories and batch runs (SPEC §2).

    from cuda_agent.agent import run_episode, AgentConfig, PolicyConfig, make_policy
    traj = run_episode(task, make_policy(PolicyConfig(kind="openai", model="m", base_url=url)),
                       AgentConfig(backend="cuda"), "runs/ep0")
    traj.final.reward, traj.best.path

Every name here loads on first use (the CLI starts without importing torch), and an optional
SDK (openai, anthropic, transformers) only when its policy is used.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "BatchSummary": "batch", "episode_id": "batch", "run_batch": "batch",
    "ContextExhausted": "context", "ContextWindow": "context",
    "AgentConfig": "loop", "run_episode": "loop",
    "ContextOverflow": "policies", "Policy": "policies", "PolicyConfig": "policies", "PolicyError": "policies",
    "PolicyReply": "policies", "ScriptedPolicy": "policies", "make_policy": "policies",
    "register_policy": "policies",
    "initial_messages": "prompts", "system_prompt": "prompts",
    "policy_config": "in_workspace", "run_in_workspace": "in_workspace",
    "BestState": "snapshots", "eval_trigger": "snapshots", "restore_snapshot": "snapshots",
    "TOOL_NAMES": "tools", "TOOLS": "tools", "ToolConfig": "tools", "ToolExecutor": "tools", "ToolResult": "tools",
    "ToolSpec": "tools", "tool_schemas": "tools",
    "SCHEMA_VERSION": "trajectory", "Evaluation": "trajectory", "Message": "trajectory", "Snapshot": "trajectory",
    "ToolCall": "trajectory", "Trajectory": "trajectory", "TrajectoryError": "trajectory",
    "TrajectoryWriter": "trajectory", "iter_trajectories": "trajectory", "load_trajectories": "trajectory",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
