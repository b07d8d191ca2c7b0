"""The agent: tools, policies, the ReAct loop, trajectories and batch runs (SPEC §2).

    from cuda_agent.agent import run_episode, AgentConfig, PolicyConfig, make_policy
    traj = run_episode(task, make_policy(PolicyConfig(kind="openai", model="m", base_url=url)),
                       AgentConfig(backend="cuda"), "runs/ep0")
    traj.final.reward, traj.best.path

Tools (`tools.py`) and trajectories (`trajectory.py`) are shared with the RL adapters.
Optional SDKs (openai, anthropic, transformers) load only when their policy is used.
"""

from .batch import BatchSummary, episode_id, run_batch
from .context import ContextExhausted, ContextWindow
from .loop import AgentConfig, run_episode
from .policies import (ContextOverflow, Policy, PolicyConfig, PolicyError, PolicyReply, ScriptedPolicy, make_policy,
                       register_policy)
from .prompts import initial_messages, system_prompt
from .protocol import policy_config, run_in_workspace
from .snapshots import BestState, eval_trigger, restore_snapshot
from .tools import TOOL_NAMES, TOOLS, ToolConfig, ToolExecutor, ToolResult, ToolSpec, tool_schemas
from .trajectory import (SCHEMA_VERSION, Evaluation, Message, Snapshot, ToolCall, Trajectory, TrajectoryError,
                         TrajectoryWriter, iter_trajectories, load_trajectories)

__all__ = [
    "run_episode", "run_in_workspace", "policy_config", "initial_messages", "system_prompt", "AgentConfig", "run_batch", "BatchSummary", "episode_id",
    "Policy", "PolicyConfig", "PolicyReply", "PolicyError", "ContextOverflow", "make_policy", "register_policy",
    "ScriptedPolicy", "TOOLS", "TOOL_NAMES", "ToolSpec", "ToolConfig", "ToolExecutor", "ToolResult", "tool_schemas",
    "Trajectory", "Message", "ToolCall", "Evaluation", "Snapshot", "SCHEMA_VERSION", "TrajectoryWriter",
    "TrajectoryError", "load_trajectories", "iter_trajectories", "ContextWindow", "ContextExhausted", "BestState",
    "eval_trigger", "restore_snapshot",
]
