"""One episode code for both engines (issue 26, item 4): TRL's environment and verl's agent loop
run the same tool calls through the agent's `Environment` and score the final workspace with the
same `cuda_agent.evaluate`; their per-episode records come from the same `verdict`. Checked by
identity (no second copy to drift) and by behaviour (the same calls earn the same verdict)."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import RELU_TASK

pytest.importorskip("transformers")
pytest.importorskip("trl")


def test_both_engines_import_one_environment_one_evaluator_one_verdict():
    from cuda_agent.agent import environment
    from cuda_agent.evaluation import evaluate
    from cuda_agent.train import episode, evaluator, metrics
    from cuda_agent.train.trl import env as trl_env

    assert trl_env.Environment is episode.Environment is environment.Environment
    assert environment.evaluate is evaluator.evaluate is evaluate  # TRL's default evaluator = verl's local/pool one
    assert trl_env.verdict is episode.verdict is metrics.verdict
    # the TRL tool methods are generated from the agent's tool specs, as verl's schemas are
    from cuda_agent.agent.tools import TOOL_NAMES, tool_schemas
    from cuda_agent.evaluation import EvalConfig

    env_cls = trl_env.make_env_class([], backend="cpu", eval_config=EvalConfig())
    assert {n for n in TOOL_NAMES if callable(getattr(env_cls, n, None))} == set(TOOL_NAMES)
    assert [s["function"]["name"] for s in tool_schemas("openai")] == list(TOOL_NAMES)


def test_same_tool_calls_earn_the_same_verdict_in_trl_and_verl_episodes(fast_config, tmp_path):
    import json

    from cuda_agent.agent.shell import ShellConfig
    from cuda_agent.agent.tools import ToolConfig
    from cuda_agent.tasks import Task
    from cuda_agent.train.episode import EpisodeConfig, TokenEpisode
    from cuda_agent.train.evaluator import LocalEvaluator
    from cuda_agent.train.tiny import build_tiny_tokenizer
    from cuda_agent.train.trl.env import EpisodeLog, make_env_class
    from tests.train.test_episode import ScriptedServer

    task = Task.from_source(RELU_TASK, name="relu")
    # a candidate the judge refuses before any build (no kernel: PyTorch's own relu), so the test is fast
    # and the verdict, reason included, is deterministic
    files = {"kernels/relu.cpp": "// nothing here yet\n",
             "model_new.py": "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                             "    def forward(self, x):\n        return torch.relu(x)\n"}
    tools = ToolConfig(shell=ShellConfig(seal=False))

    # TRL: the trainer calls the environment's tool methods, then get_reward()
    log = EpisodeLog()
    env = make_env_class([task], backend="cpu", eval_config=fast_config, tool_config=tools,
                         workdir=str(tmp_path / "trl"), log=log)()
    env.reset(task_name=task.name)
    for path, content in files.items():
        assert path in env.write_file(path=path, content=content)  # created or overwrote (model_new.py)
    trl_reward = env.get_reward()
    (trl_record,) = log.drain()

    # verl: the agent loop's episode parses the same calls from generated tokens
    calls = "".join(f'<tool_call>{json.dumps({"name": "write_file", "arguments": {"path": p, "content": c}})}'
                    "</tool_call>" for p, c in files.items())
    tok = build_tiny_tokenizer()
    cfg = EpisodeConfig(backend="cpu", max_turns=4, response_length=20_000, workdir=str(tmp_path / "verl"),
                        tool_config=tools)
    out = asyncio.run(TokenEpisode(ScriptedServer(tok, [calls, "Done."]), tok, LocalEvaluator(fast_config), cfg)
                      .run(task, {"temperature": 1.0}))
    verl_record = out.stats()

    assert trl_reward == out.reward == verl_record["reward"]
    assert trl_record["reason"] == out.result.reason.splitlines()[0]  # the same judgement, word for word
    for key in ("reward", "compiled", "correct", "tool_calls", "tool_errors"):
        assert trl_record[key] == verl_record[key], key
    assert trl_record["tool_calls"] == 2 and trl_record["tool_errors"] == 0
    assert set(trl_record) - {"task", "reason"} <= set(verl_record)  # one record shape (metrics.verdict)
