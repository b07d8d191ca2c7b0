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



# -- buckets, and the state a failure leaves (issue 26: an H100 run died of both) ---------------------
def test_buckets_fit_the_shortest_and_the_least_recently_used_goes_first():
    fast = FastGenerator(tiny_llama(), graphs=False, batch_step=4, len_step=16, max_graphs=2)
    a = fast._decoder(4, 20)  # (4, 32)
    assert fast.buckets == [(4, 32)] and a.k[0].shape[2] == 32
    assert fast._decoder(4, 9) is a  # a shorter turn reuses the longer bucket
    b = fast._decoder(8, 5)  # (8, 16)
    assert fast._decoder(4, 32) is a  # now the most recently used
    assert fast.buckets == [(8, 16), (4, 32)]
    c = fast._decoder(4, 40)  # a third bucket: (8, 16) goes, (4, 32) stays
    assert fast.buckets == [(4, 32), (4, 48)] and c is not b
    assert fast._decoder(8, 5) is not b  # a dropped bucket is built afresh
    assert fast.buckets == [(4, 48), (8, 16)] and fast.n_graphs == 2


def test_many_buckets_through_generate_stay_within_max_graphs_and_equal_generate():
    """More (rows, length) buckets than `max_graphs` over a run, as turns grow: each call is still `generate`'s."""
    model = tiny_llama()
    fast = FastGenerator(model, graphs=False, batch_step=2, len_step=8, max_graphs=2)
    seen = set()
    for seed, lengths in enumerate([[3], [3, 9], [14], [3, 2, 20], [5], [3, 9]]):
        prompts = prompts_of(lengths, seed=10 + seed)
        assert fast.generate(prompts, max_new_tokens=6, eos_token_ids=[96], pad_token_id=PAD,
                             do_sample=False) == hf_greedy(model, prompts, 6, [96])
        assert fast.n_graphs <= 2
        seen |= set(fast.buckets)
    assert seen == {(2, 16), (2, 24), (4, 32)}  # three buckets over the run: one was dropped


def sampled_generate_works(model):
    """Plain `generate`, sampling (the trainer's fallback path)."""
    ids = torch.tensor([prompts_of([6], seed=9)[0]])
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=True,
                         pad_token_id=PAD)
    return out.shape == (1, 11)


def test_a_failed_capture_drops_every_graph_and_generate_still_works(monkeypatch):
    """A capture that raises (on the H100: the allocator's `use_count > 0` assert) leaves no bucket
    behind, and both plain `generate` and the sampler itself run afterwards."""
    from cuda_agent.train import fastgen

    model = tiny_llama()
    fast = FastGenerator(model, graphs=False, batch_step=4, len_step=16)
    first = prompts_of([4, 7], seed=5)
    fast.generate(first, max_new_tokens=4, eos_token_ids=[96], pad_token_id=PAD, do_sample=False)
    assert fast.n_graphs == 1

    def failing_capture(self, gen):
        raise RuntimeError("it->second->use_count > 0 INTERNAL ASSERT FAILED (simulated)")

    monkeypatch.setattr(fastgen._Decoder, "capture", failing_capture)
    fast.graphs = True  # the next new bucket is captured, and that fails
    with pytest.raises(RuntimeError, match="use_count"):
        fast.generate(prompts_of([40], seed=6), max_new_tokens=4, eos_token_ids=[96], pad_token_id=PAD)
    assert fast.n_graphs == 0  # the live bucket went too: nothing half-made is kept
    assert sampled_generate_works(model)
    fast.graphs = False
    assert fast.generate(first, max_new_tokens=4, eos_token_ids=[96], pad_token_id=PAD,
                         do_sample=False) == hf_greedy(model, first, 4, [96])


def test_a_failure_mid_decoding_resets_and_the_next_call_is_right(monkeypatch):
    model = tiny_llama()
    fast = FastGenerator(model, graphs=False, batch_step=4, len_step=16)
    prompts = prompts_of([5, 3, 8], seed=7)
    step, calls = fast._step, []

    def flaky(dec):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("replay failed")
        step(dec)

    monkeypatch.setattr(fast, "_step", flaky)
    with pytest.raises(RuntimeError, match="replay failed"):
        fast.generate(prompts, max_new_tokens=8, eos_token_ids=[96], pad_token_id=PAD, do_sample=False)
    assert fast.n_graphs == 0
    assert sampled_generate_works(model)
    assert fast.generate(prompts, max_new_tokens=8, eos_token_ids=[96], pad_token_id=PAD,
                         do_sample=False) == hf_greedy(model, prompts, 8, [96])


def test_reset_on_cuda_restores_the_stream_then_the_generator_even_when_cuda_calls_fail(monkeypatch):
    """The order of `reset` on a GPU, with torch.cuda replaced by recorders (no GPU here): the caller's
    stream back first, a synchronize before the graphs are destroyed, memory released, the default
    generator's state replaced; each step runs even when the one before raised (a sticky CUDA error)."""
    from cuda_agent.train import fastgen

    fast = FastGenerator(tiny_llama(), graphs=False, len_step=16)
    fast._decoder(8, 4)
    fast.device = torch.device("cuda", 0)
    seen = []

    def record(name, fail=False):
        def call(*args, **kwargs):
            seen.append((name, fast.n_graphs))
            if fail:
                raise RuntimeError(f"{name}: an illegal memory access was encountered")
        return call

    monkeypatch.setattr(torch.cuda, "set_stream", record("set_stream"))
    monkeypatch.setattr(torch.cuda, "synchronize", record("synchronize", fail=True))
    monkeypatch.setattr(torch.cuda, "empty_cache", record("empty_cache", fail=True))
    monkeypatch.setattr(fastgen, "_release_default_generator", record("release_generator"))
    fast.reset(stream="the caller's stream")
    assert seen == [("set_stream", 1), ("synchronize", 1), ("empty_cache", 0), ("release_generator", 0)]
    seen.clear()
    fast.reset()  # no stream to restore
    assert [name for name, _ in seen] == ["synchronize", "empty_cache", "release_generator"]


def test_the_default_generator_gets_a_fresh_state_with_its_seed_and_offset(monkeypatch):
    """`_release_default_generator` against a stand-in for the CUDA generator (the real one needs a
    GPU), and the torch.Generator methods it calls exist."""
    from cuda_agent.train import fastgen

    for name in ("get_state", "set_state", "graphsafe_get_state", "graphsafe_set_state"):
        assert hasattr(torch.Generator, name)

    class State:
        def __init__(self, seed_offset, capturing):
            self.seed_offset, self.capturing = seed_offset, capturing

    class FakeGenerator:
        def __init__(self, device=None):
            self.device, self.state = device, State((0, 0), capturing=False)

        def get_state(self):
            return self.state.seed_offset

        def set_state(self, seed_offset):
            self.state.seed_offset = seed_offset

        def graphsafe_get_state(self):
            shared = FakeGenerator(self.device)
            shared.state = self.state
            return shared

        def graphsafe_set_state(self, other):
            self.state = other.state

    stuck = FakeGenerator(torch.device("cuda", 1))
    stuck.state = State((1234, 40), capturing=True)  # a capture_begin that never reached its epilogue
    monkeypatch.setattr(torch.cuda, "default_generators", (FakeGenerator(), stuck), raising=False)
    monkeypatch.setattr(torch, "Generator", FakeGenerator)
    fastgen._release_default_generator(torch.device("cuda", 1))
    assert stuck.state.capturing is False and stuck.state.seed_offset == (1234, 40)
