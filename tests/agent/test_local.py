"""The local transformers policy on a tiny random Llama saved as a Hugging Face folder (no
download): it loads, applies the chat template with tools as text, counts tokens, reports its
context window, and its replies drive the loop. (The GGUF path is exercised by the recorded
smoke runs in docs/agent.md.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from cuda_agent.agent import AgentConfig, PolicyConfig, make_policy, run_episode  # noqa: E402
from cuda_agent.agent.tools import TOOLS  # noqa: E402
from cuda_agent.agent.trajectory import Message  # noqa: E402
from cuda_agent.evaluation import EvalConfig  # noqa: E402
from cuda_agent.tasks import Task  # noqa: E402
from tests.conftest import RELU_TASK  # noqa: E402

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path_factory.mktemp("tiny-llama")
    words = ["[UNK]", "[PAD]", "</s>"] + [f"w{i}" for i in range(200)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                                eos_token="</s>")
    fast.chat_template = TEMPLATE
    fast.save_pretrained(folder)
    cfg = transformers.LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8192,
                                   eos_token_id=2, pad_token_id=1, bos_token_id=0)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    return folder


def test_local_policy_loads_a_folder_and_replies(tiny_model: Path):
    pol = make_policy(PolicyConfig(kind="local", model=str(tiny_model), device="cpu", max_tokens=8, tool_format="text"))
    assert pol.context_limit == 8192 and pol.count_tokens("w1 w2 w3") == 3
    reply = pol.complete([Message(role="system", content="w1 w2"), Message(role="user", content="w3")], TOOLS)
    assert 1 <= reply.usage.completion_tokens <= 8 and reply.usage.prompt_tokens > 0
    assert reply.tool_calls == []  # random weights: prose, no tool call
    assert json.dumps(pol.describe())  # serialisable for the trajectory


def test_local_policy_drives_an_episode(tiny_model: Path, tmp_path: Path, fast_config: EvalConfig):
    pol = make_policy(PolicyConfig(kind="local", model=str(tiny_model), device="cpu", max_tokens=8, tool_format="text"))
    traj = run_episode(Task.from_source(RELU_TASK, name="relu"), pol,
                       AgentConfig(backend="cpu", max_turns=3, nudges=1, eval=fast_config), tmp_path / "ep")
    assert traj.stop_reason == "done" and len(traj.turns) == 2  # one nudge, then it stops
    assert traj.usage.prompt_tokens > 0 and traj.turns[0].context_tokens > 0
    assert traj.final is not None and traj.final.reward == -1


def test_generation_stops_after_a_tool_call(tiny_model: Path):
    import torch

    pol = make_policy(PolicyConfig(kind="local", model=str(tiny_model), device="cpu", max_tokens=8))
    stop = pol._stop_after_call(0)[0]
    pol.tokenizer.decode = lambda ids, **kw: " ".join(f"w{int(i)}" for i in ids).replace("w7 w8", "</tool_call>")
    ids = torch.tensor([[3, 4, 7, 8], [3, 4, 5, 6]])
    assert stop(ids, None).tolist() == [True, False]
