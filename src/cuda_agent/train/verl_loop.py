"""The verl agent loop (cluster scale, stages 3 and 4). Import this module only where verl is
installed: verl instantiates `CudaAgentLoop` through its registry (`agent_name: cuda_agent` in the
dataset, `rollout.agent.agent_loop_config_path` pointing at `cuda_agent/train/verl_agent_loop.yaml`).

Per trajectory it owns one workspace, lets the policy call the agent's tools there, masks tool
output tokens (response_mask 0) and returns `reward_score` from `cuda_agent.evaluate` — computed
on the evaluation pool when one is configured — so verl skips its own reward step. The episode
logic is `episode.TokenEpisode`; this class only supplies verl's server and verl's own
continuous-token builder (so tokenisation matches verl's trainer exactly).
"""

from __future__ import annotations

import os
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from ..evaluation import EvalConfig
from .episode import EpisodeConfig, TokenEpisode
from .evaluator import Evaluator, LocalEvaluator, RayEvaluatorPool
from .verl_data import AGENT_LOOP_NAME, task_from_extra_info

_EVALUATOR: Evaluator | None = None


def shared_evaluator(cfg: dict[str, Any]) -> Evaluator:
    """One evaluator per agent-loop worker process: the Ray pool when `pool_workers` > 0."""
    global _EVALUATOR
    if _EVALUATOR is None:
        eval_cfg = EvalConfig.model_validate(cfg.get("eval", {}))
        workers = int(cfg.get("pool_workers", 0))
        if workers > 0:
            _EVALUATOR = RayEvaluatorPool(workers, eval_cfg, num_gpus=float(cfg.get("pool_gpus_per_worker", 1.0)))
        else:
            _EVALUATOR = LocalEvaluator(eval_cfg, max_concurrent=int(cfg.get("local_concurrency", 1)))
    return _EVALUATOR


class _VerlEpisode(TokenEpisode):
    """TokenEpisode whose tokenisation goes through verl's continuous-token builder."""

    def __init__(self, loop: "CudaAgentLoop", config: EpisodeConfig, evaluator: Evaluator):
        super().__init__(loop.server_manager, loop.tokenizer, evaluator, config)
        self.loop = loop
        self._messages: list[dict[str, Any]] = []
        self._ids: list[int] = []

    async def _initial_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        self._messages = [dict(m) for m in messages]
        ids = await self.loop.ct_build_initial_tokens(messages, tools=self.tools)
        self._ids = list(ids)
        return list(ids)

    async def _tool_result_tokens(self, tool_messages: list[dict[str, Any]]) -> list[int]:
        return await super()._tool_result_tokens(tool_messages)


@register(AGENT_LOOP_NAME)
class CudaAgentLoop(AgentLoopBase):
    """verl AgentLoop for cuda-agent episodes. Settings come from the trainer config under
    `actor_rollout_ref.rollout.multi_turn` (max_assistant_turns) and the `cuda_agent` section."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("tools", None)  # our tools come from cuda_agent.agent, not verl's tool registry
        super().__init__(*args, **kwargs)
        ours = dict(self.config.get("cuda_agent", {}) or {})
        multi = self.rollout_config.multi_turn
        self.episode_config = EpisodeConfig(
            max_turns=int(multi.get("max_assistant_turns") or ours.get("max_turns", 150)),
            response_length=int(self.rollout_config.response_length),
            max_tool_output_chars=int(ours.get("max_tool_output_chars", 30_000)),
            workdir=ours.get("workdir") or os.environ.get("CUDA_AGENT_EPISODES"),
        )
        self.evaluator = shared_evaluator(ours)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task, backend = task_from_extra_info(kwargs.get("extra_info") or {})
        cfg = EpisodeConfig(**{**self.episode_config.__dict__, "backend": backend})
        episode = _VerlEpisode(self, cfg, self.evaluator)
        out = await episode.run(task, sampling_params)
        s = out.seconds
        return AgentLoopOutput(
            prompt_ids=out.prompt_ids, response_ids=out.response_ids, response_mask=out.response_mask,
            response_logprobs=out.response_logprobs, reward_score=out.reward, num_turns=out.num_turns * 2 + 1,
            metrics=AgentLoopMetrics(generate_sequences=s.get("generate", 0.0), tool_calls=s.get("tools", 0.0),
                                     compute_score=s.get("evaluate", 0.0)),
            extra_fields={"cuda_agent": out.stats(), "turn_scores": [], "tool_rewards": []},
        )


__all__ = ["CudaAgentLoop", "shared_evaluator"]
