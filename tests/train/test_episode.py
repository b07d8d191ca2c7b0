"""The engine-neutral episode (verl's agent loop runs it), driven by a fake rollout server that
follows verl's contract (`await server.generate(request_id=, prompt_ids=, sampling_params=)` ->
token ids + log-probs):
tool calls really run in the episode's workspace, tool-result tokens are masked out, and the
reward is the environment's verdict on the final workspace (CPU backend)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest

from cuda_agent.evaluation import evaluate_files
from cuda_agent.tasks import Task
from cuda_agent.train.episode import EpisodeConfig, TokenEpisode
from cuda_agent.train.evaluator import LocalEvaluator, candidate_files
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK

pytest.importorskip("transformers")
pytest.importorskip("trl")


@dataclass
class TokenOutput:
    token_ids: list[int]
    log_probs: list[float]


class ScriptedServer:
    """Answers each generate() with the next scripted assistant turn, tokenised, ending in EOS;
    records every prompt it was sent."""

    def __init__(self, tokenizer, turns: list[str]):
        self.tok = tokenizer
        self.turns = list(turns)
        self.prompts: list[list[int]] = []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kw):
        self.prompts.append(list(prompt_ids))
        text = self.turns.pop(0)
        ids = self.tok.encode(text, add_special_tokens=False) + [self.tok.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def _call(name: str, **args) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>'


@pytest.fixture(scope="module")
def tokenizer():
    from cuda_agent.train.tiny import build_tiny_tokenizer

    return build_tiny_tokenizer()


def test_episode_runs_tools_masks_their_output_and_takes_the_environment_reward(tokenizer, fast_config, tmp_path):
    turns = [
        "I will write the kernel.\n" + _call("write_file", path="kernels/relu.cpp", content=RELU_KERNEL)
        + _call("write_file", path="kernels/relu_binding.cpp", content=RELU_BINDING),
        _call("write_file", path="model_new.py", content=RELU_MODEL_NEW),
        _call("read_file", path="does_not_exist.py") + _call("glob", pattern="kernels/*"),
        "Done: ModelNew calls the relu kernel.",
    ]
    server = ScriptedServer(tokenizer, turns)
    task = Task.from_source(RELU_TASK, name="relu")
    cfg = EpisodeConfig(backend="cpu", max_turns=10, response_length=20_000, workdir=str(tmp_path))
    episode = TokenEpisode(server, tokenizer, LocalEvaluator(fast_config), cfg)
    out = asyncio.run(episode.run(task, {"temperature": 1.0}))

    assert out.stop_reason == "done" and out.num_turns == 4 and out.tool_calls == 5 and out.tool_errors == 1
    assert out.result is not None and out.result.correct and out.reward >= 1  # the written kernel is right
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    # every generated token is trained (mask 1, its log-prob kept); every tool-result token is not
    model_text = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if m])
    tool_text = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if not m])
    assert "write_file" in model_text and "Done: ModelNew" in model_text
    assert "<tool_response>" in tool_text and "created kernels/relu.cpp" in tool_text
    assert "no such file" in tool_text and "kernels/relu_binding.cpp" in tool_text
    assert "<tool_response>" not in model_text and "created" not in model_text
    assert all(lp == -0.5 for lp, m in zip(out.response_logprobs, out.response_mask) if m)
    assert all(lp == 0.0 for lp, m in zip(out.response_logprobs, out.response_mask) if not m)
    # each turn's prompt is the previous prompt plus everything since: one growing token sequence
    for earlier, later in zip(server.prompts, server.prompts[1:]):
        assert later[: len(earlier)] == earlier
    assert server.prompts[-1] == out.prompt_ids + out.response_ids[: len(server.prompts[-1]) - len(out.prompt_ids)]
    assert not any(tmp_path.iterdir())  # the episode's workspace is removed


def test_episode_without_a_kernel_gets_minus_one_and_stops_at_max_turns(tokenizer, fast_config, tmp_path):
    server = ScriptedServer(tokenizer, [_call("bash", command="ls")] * 3)
    cfg = EpisodeConfig(backend="cpu", max_turns=3, response_length=20_000, workdir=str(tmp_path))
    out = asyncio.run(TokenEpisode(server, tokenizer, LocalEvaluator(fast_config), cfg)
                      .run(Task.from_source(RELU_TASK, name="relu"), {}))
    assert out.stop_reason == "max_turns" and out.num_turns == 3
    assert out.reward == -1.0 and out.result is not None and not out.result.correct


def test_malformed_tool_call_is_answered_with_an_error(tokenizer, fast_config, tmp_path):
    server = ScriptedServer(tokenizer, ['<tool_call>{"name": "bash", "arguments": {oops}</tool_call>', "giving up"])
    cfg = EpisodeConfig(backend="cpu", max_turns=5, response_length=20_000, workdir=str(tmp_path))
    out = asyncio.run(TokenEpisode(server, tokenizer, LocalEvaluator(fast_config), cfg)
                      .run(Task.from_source(RELU_TASK, name="relu"), {}))
    tool_text = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if not m])
    assert out.tool_errors == 1 and "not valid JSON" in tool_text and out.num_turns == 2


def test_response_budget_ends_the_episode(tokenizer, fast_config, tmp_path):
    server = ScriptedServer(tokenizer, [_call("bash", command="echo " + "x" * 400)] * 5)
    cfg = EpisodeConfig(backend="cpu", max_turns=5, response_length=300, workdir=str(tmp_path))
    out = asyncio.run(TokenEpisode(server, tokenizer, LocalEvaluator(fast_config), cfg)
                      .run(Task.from_source(RELU_TASK, name="relu"), {}))
    assert out.stop_reason == "context_exhausted" and len(out.response_ids) <= 300


def test_pool_evaluation_rebuilds_the_candidate_from_its_files(make_workspace, fast_config):
    ws = make_workspace()
    files = candidate_files(ws)
    assert set(files) == {"model_new.py", "kernels/relu.cpp", "kernels/relu_binding.cpp"}
    files["../escape.py"] = "print('never written')"
    result = evaluate_files(ws.task, "cpu", files, fast_config)
    assert result.correct and result.reward >= 1
