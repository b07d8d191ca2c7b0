"""The rollouts' fast generation path (issue 26) against Hugging Face `generate`: on a tiny random
Llama (grouped-query attention, left-padded prompts of different lengths, an EOS hit mid-turn,
idle rows, a second call with longer prompts, weights changed between calls), its greedy tokens
must be `generate`'s. The same step runs eagerly here; on CUDA it is replayed from a graph
(bench/generation_speed.py checks that on the GPU, against `generate`, before a run uses it)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from cuda_agent.train.fastgen import FastGenerator, unsupported  # noqa: E402

PAD = 0


def tiny_llama(kv_heads: int = 2, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=kv_heads, max_position_embeddings=512, tie_word_embeddings=True,
                      pad_token_id=PAD, eos_token_id=None, bos_token_id=None, rope_theta=20.0,
                      initializer_range=0.2)  # sharp attention, fast rotation: positions and masks matter
    return LlamaForCausalLM(cfg).eval()


def hf_greedy(model, prompts, max_new, eos, pad=PAD):
    """`generate`'s greedy completions of left-padded prompts, cut after the first EOS as TRL cuts them."""
    p = max(len(x) for x in prompts)
    ids = torch.tensor([[pad] * (p - len(x)) + x for x in prompts])
    mask = torch.tensor([[0] * (p - len(x)) + [1] * len(x) for x in prompts])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                             eos_token_id=eos, pad_token_id=pad)[:, p:]
    return [row[: next((i + 1 for i, t in enumerate(row) if t in eos), len(row))] for row in out.tolist()]


def prompts_of(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 97, (n,), generator=g).tolist() for n in lengths]


@pytest.mark.parametrize("kv_heads", [2, 4])
def test_greedy_tokens_equal_generate(kv_heads):
    model = tiny_llama(kv_heads)
    prompts = prompts_of([5, 17, 9], seed=1)
    plain = hf_greedy(model, prompts, 24, eos=[96])
    fast = FastGenerator(model, graphs=False, batch_step=8, len_step=16)
    assert fast.generate(prompts, max_new_tokens=24, eos_token_ids=[96], pad_token_id=PAD, do_sample=False) == plain
    # an EOS that greedy decoding reaches mid-turn: rows end there (EOS included), others run on
    eos = plain[1][5]
    cut = hf_greedy(model, prompts, 24, eos=[eos])
    assert any(len(r) < 24 for r in cut)
    assert fast.generate(prompts, max_new_tokens=24, eos_token_ids=[eos], pad_token_id=PAD, do_sample=False) == cut


def test_later_calls_reuse_buckets_and_see_new_weights():
    model = tiny_llama()
    fast = FastGenerator(model, graphs=False, batch_step=4, len_step=64)
    first = prompts_of([3, 11], seed=2)
    assert fast.generate(first, max_new_tokens=10, eos_token_ids=[96], pad_token_id=PAD,
                         do_sample=False) == hf_greedy(model, first, 10, [96])
    with torch.no_grad():  # an optimizer step, in place, as the trainer makes it
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    second = prompts_of([30, 2, 7, 19, 4], seed=3)  # a longer turn and a bigger batch
    assert fast.generate(second, max_new_tokens=12, eos_token_ids=[96], pad_token_id=PAD,
                         do_sample=False) == hf_greedy(model, second, 12, [96])
    assert fast.generate(first, max_new_tokens=10, eos_token_ids=[96], pad_token_id=PAD,
                         do_sample=False) == hf_greedy(model, first, 10, [96])
    assert fast.n_graphs == 2  # (4, 64) and (8, 64): the batch of 5 rounds up to 8


def test_sampling_limits_and_budget():
    model = tiny_llama()
    fast = FastGenerator(model, graphs=False, len_step=32)
    prompts = prompts_of([6, 6, 8, 4], seed=4)
    greedy = fast.generate(prompts, max_new_tokens=16, eos_token_ids=[96], pad_token_id=PAD, do_sample=False)
    g = torch.Generator().manual_seed(0)
    # top_k=1 and a near-zero temperature leave only the greedy token
    assert fast.generate(prompts, max_new_tokens=16, eos_token_ids=[96], pad_token_id=PAD, top_k=1, generator=g) == greedy
    assert fast.generate(prompts, max_new_tokens=16, eos_token_ids=[96], pad_token_id=PAD, temperature=1e-6,
                         generator=g) == greedy
    sampled = fast.generate(prompts * 4, max_new_tokens=16, eos_token_ids=[96], pad_token_id=PAD, temperature=1.5,
                            top_p=0.95, generator=g)
    assert all(0 < len(r) <= 16 for r in sampled) and len({tuple(r) for r in sampled}) > 1
    assert all(0 <= t < 97 for r in sampled for t in r)


def test_refuses_models_it_cannot_run():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    assert "model type" in unsupported(gpt2)
    with pytest.raises(ValueError, match="cannot run"):
        FastGenerator(gpt2)
    assert unsupported(tiny_llama()) is None


def test_the_tiny_training_model_is_supported():
    from cuda_agent.train.tiny import build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok).eval()
    prompts = [tok("__global__ void k(float* x)")["input_ids"], tok("import torch")["input_ids"]]
    fast = FastGenerator(model, graphs=False)
    eos = [tok.eos_token_id]
    assert fast.generate(prompts, max_new_tokens=8, eos_token_ids=eos, pad_token_id=tok.pad_token_id,
                         do_sample=False) == hf_greedy(model, prompts, 8, eos, tok.pad_token_id)

