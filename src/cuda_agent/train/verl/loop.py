"""The verl agent loop (stages 3 and 4); import it only where verl is installed. verl's
`AgentLoopWorker` builds `CudaAgentLoop` from its registry (`agent_name: cuda_agent`) once per
trajectory. The episode is `episode.TokenEpisode`; this class supplies verl's server and routes
tokenisation through verl's continuous-token builder (`ct_build_initial_tokens`,
`ct_merge_context_msg`), so tokens match the trainer's exactly. `reward_score` comes from the
job's evaluation pool, so verl skips its own reward step.
"""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from ...agent.limits import TRAIN_MAX_TURNS
from ...agent.tools import ToolConfig
from ..episode import EpisodeConfig, TokenEpisode
from ..evaluator import Evaluator
from .data import AGENT_LOOP_NAME, task_from_extra_info
from .eval_pool import shared_evaluator


class _VerlEpisode(TokenEpisode):
    """TokenEpisode whose tokenisation goes through verl's continuous-token builder."""

    def __init__(self, loop: "CudaAgentLoop", config: EpisodeConfig, evaluator: Evaluator):
        super().__init__(loop.server_manager, loop.tokenizer, evaluator, config)
        self.loop = loop

    async def _initial_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        return list(await self.loop.ct_build_initial_tokens(messages, tools=self.tools))

    async def _append_tool_results(self, previous_messages, messages, prompt_ids, response, mask, logprobs):
        merged, new_mask, new_logprobs = await self.loop.ct_merge_context_msg(
            previous_messages, messages, list(prompt_ids) + list(response), list(mask), list(logprobs),
            tools=self.tools)
        ids = list(merged.token_ids)
        if ids[: len(prompt_ids)] != list(prompt_ids):
            raise RuntimeError("verl's continuous-token merge changed the prompt tokens")
        return ids[len(prompt_ids):], list(new_mask), list(new_logprobs or [0.0] * len(new_mask))


@register(AGENT_LOOP_NAME)
class CudaAgentLoop(AgentLoopBase):
    """verl AgentLoop for cuda-agent episodes. Settings come from the trainer config under
    `actor_rollout_ref.rollout.multi_turn` (max_assistant_turns) and the `cuda_agent` section."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("tools", None)  # our tools come from cuda_agent.agent, not verl's tool registry
        super().__init__(*args, **kwargs)
        ours = _plain(self.config.get("cuda_agent", {}) or {})
        multi = self.rollout_config.multi_turn
        self.episode_config = EpisodeConfig(
            max_turns=int(multi.get("max_assistant_turns") or ours.get("max_turns", TRAIN_MAX_TURNS)),
            response_length=int(self.rollout_config.response_length),
            tool_config=ToolConfig(max_output_chars=int(ours.get("max_tool_output_chars",
                                                                 ToolConfig.max_output_chars))),
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


def _plain(section: Any) -> dict[str, Any]:
    if isinstance(section, DictConfig):  # verl's configs are OmegaConf
        return OmegaConf.to_container(section, resolve=True)
    return dict(section)


__all__ = ["CudaAgentLoop", "shared_evaluator"]
