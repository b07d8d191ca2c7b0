"""Batched sampling for the RL policy's rollouts: a static KV cache, one forward for the prompts, and
each decoding step one CUDA-graph replay (issue 26).

Why our own: a 135M Llama decoding a batch is bound by per-token launch overhead, not arithmetic
(plain `generate`: 36 ms a step on an H200, ~450 kernel launches from Python each). What
transformers offers for it failed on the lent image (its compiled static-cache step crashed inside
inductor; continuous batching never finished a turn), and capturing its forward depends on cache
internals that change between releases. A Llama decoder layer is a few matrix products, RMSNorm and
RoPE: here it is written over the model's own weights (a copy in the generation dtype, refreshed
before each call), so the decoding step has fixed shapes and addresses and is captured once per
(batch, cache length) bucket. `tests/train/test_fastgen.py` checks that its greedy tokens are
`generate`'s. Models it cannot run (not Llama-shaped) are refused by `unsupported`; the trainer then
keeps plain `generate`.

Graph rules (an H100 run died of breaking them, docs/training.md "The sampler's crash"):
- each graph has a private memory pool of its own. A pool id shared by several graphs is dead for
  good once all of them are gone while any block in it is still held (the cuBLAS workspace of the
  capture stream is one), and capturing into it again trips the caching allocator's
  `use_count > 0` assert; with one pool per graph, dropping a graph drops its pool and no id is
  reused;
- warm-up and capture run on one side stream of the generator, so the cuBLAS workspace of that
  stream is allocated eagerly, outside any graph's pool;
- at most `max_graphs` buckets live; the least recently used is dropped (after a synchronize)
  when a new one is needed;
- the graph holds the forward only; sampling is eager (nothing random is captured);
- any exception inside `generate` drops every graph and restores what a failed capture leaves
  behind: the caller's current stream, and the default CUDA generator, which `capture_begin`
  marks as capturing before it can fail (a later eager random op in plain `generate` then
  raises "Offset increment outside graph capture encountered unexpectedly").
"""

from __future__ import annotations

from typing import Any


def unsupported(model: Any) -> str | None:
    """Why `FastGenerator` cannot run `model` (None: it can)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) not in ("llama", "mistral"):
        return f"model type {getattr(cfg, 'model_type', None)!r} (Llama-shaped models only)"
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "attention or MLP biases"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act}"
    if getattr(cfg, "sliding_window", None):
        return "sliding-window attention"
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    if rotary is None or not hasattr(rotary, "inv_freq"):
        return "no rotary embedding with a fixed inv_freq"
    if "dynamic" in str(getattr(rotary, "rope_type", "default")):
        return f"RoPE type {rotary.rope_type} (its frequencies change with the length)"
    return None


def _bucket(n: int, step: int) -> int:
    return -(-n // step) * step


class FastGenerator:
    """Samples completions of token-id prompts with `model`'s current weights.

    `generate(prompts, ...)` left-pads the prompts into one batch (rounded up to a multiple of
    `batch_step` with idle rows), runs them through the model in one forward per chunk of rows,
    then decodes: each step a replay of the captured step (CUDA) or the same step run eagerly
    (elsewhere), sampling outside it. Every `check_every` steps it stops if every row has
    ended. Each row's completion ends with its first EOS token (included), as TRL expects.
    If `generate` raises, every graph is dropped and torch is left usable (`reset`): the caller
    can go on with plain `generate`, or call this one again."""

    def __init__(self, model: Any, *, dtype: Any = None, graphs: bool | None = None, batch_step: int = 8,
                 len_step: int = 1024, check_every: int = 8, max_graphs: int = 4) -> None:
        import torch

        why = unsupported(model)
        if why:
            raise ValueError(f"FastGenerator cannot run this model: {why}")
        self.model = model
        cfg = model.config
        self.device = next(model.parameters()).device
        self.dtype = dtype or next(model.parameters()).dtype
        self.graphs = (self.device.type == "cuda") if graphs is None else graphs
        self.batch_step, self.len_step, self.check_every, self.max_graphs = batch_step, len_step, check_every, max_graphs
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.eps = cfg.rms_norm_eps
        rotary = model.model.rotary_emb
        self.inv_freq = rotary.inv_freq.detach().float().to(self.device)
        self.rope_scale = float(getattr(rotary, "attention_scaling", 1.0))
        # the weights in the generation dtype, q/k/v and gate/up fused: fewer launches per layer
        inner = model.model
        self._pairs: list[tuple[Any, Any]] = []  # (destination, sources) refreshed by sync()

        def own(*params: Any) -> Any:
            t = torch.cat([p.detach() for p in params]).to(self.device, self.dtype) if len(params) > 1 \
                else params[0].detach().to(self.device, self.dtype).clone()
            self._pairs.append((t, params))
            return t

        self.layers = []
        for layer in inner.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append((own(layer.input_layernorm.weight), own(a.q_proj.weight, a.k_proj.weight, a.v_proj.weight),
                                own(a.o_proj.weight), own(layer.post_attention_layernorm.weight),
                                own(m.gate_proj.weight, m.up_proj.weight), own(m.down_proj.weight)))
        self.embed = own(inner.embed_tokens.weight)
        self.norm = own(inner.norm.weight)
        head = model.lm_head.weight
        self.lm_head = self.embed if head.data_ptr() == inner.embed_tokens.weight.data_ptr() else own(head)
        # (rows, cache length) -> its buffers and graph; least recently used first
        self._graphs: dict[tuple[int, int], _Decoder] = {}
        self._stream: Any = None  # the side stream of every warm-up and capture (CUDA)

    @property
    def n_graphs(self) -> int:
        """How many (rows, cache length) buckets are alive (captured graphs when `graphs`)."""
        return len(self._graphs)

    @property
    def buckets(self) -> list[tuple[int, int]]:
        """The live buckets, least recently used first."""
        return list(self._graphs)

    def reset(self, stream: Any = None) -> None:
        """Drops every bucket (its graph, pool and cache) and leaves torch as plain `generate` needs
        it after a failure: `stream` (the caller's) current again, the default CUDA generator out of
        any capture that never ended, the cached memory released. Each step is tried on its own: a
        CUDA error that sticks to the context makes them fail, and must not hide the first one."""
        if self.device.type != "cuda":
            self._graphs.clear()
            return
        import contextlib

        import torch

        with contextlib.suppress(Exception):
            if stream is not None:
                torch.cuda.set_stream(stream)
        with contextlib.suppress(Exception):
            torch.cuda.synchronize(self.device)  # no replay in flight while its graph is destroyed
        self._graphs.clear()
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()
        with contextlib.suppress(Exception):
            _release_default_generator(self.device)

    def sync(self) -> None:
        """Copy the model's current weights in (after an optimizer step)."""
        import torch

        with torch.no_grad():
            for dst, srcs in self._pairs:
                at = 0
                for s in srcs:
                    dst[at:at + s.shape[0]].copy_(s.detach())
                    at += s.shape[0]

    # -- the model, written out ------------------------------------------------------------------
    def _rms(self, x: Any, w: Any) -> Any:
        import torch.nn.functional as F

        # HF's LlamaRMSNorm in one kernel: normalised in fp32, cast back, scaled by the weight
        return w * F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)

    def _rope(self, positions: Any) -> tuple[Any, Any]:
        import torch

        freqs = positions[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.rope_scale).to(self.dtype), (emb.sin() * self.rope_scale).to(self.dtype)

    @staticmethod
    def _rotate(x: Any, cos: Any, sin: Any) -> Any:
        import torch

        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def _split_qkv(self, qkv: Any) -> tuple[Any, Any, Any]:
        nq, nk = self.n_heads * self.head_dim, self.n_kv * self.head_dim
        return qkv[..., :nq], qkv[..., nq:nq + nk], qkv[..., nq + nk:]

    def _mlp(self, h: Any, w_post: Any, w_gu: Any, w_down: Any) -> Any:
        import torch.nn.functional as F

        gu = self._rms(h, w_post) @ w_gu.T
        g, u = gu.chunk(2, dim=-1)
        return h + (F.silu(g) * u) @ w_down.T

    def _prefill(self, dec: "_Decoder", ids: Any, real: Any, r0: int) -> Any:
        """Rows r0.. of the batch: their prompts' keys and values into the cache; the last logits."""
        import torch
        import torch.nn.functional as F

        b, p = ids.shape
        d, g = self.head_dim, self.n_heads // self.n_kv
        pos = (real.long().cumsum(-1) - 1).clamp(min=0)
        cos, sin = self._rope(pos)
        cos, sin = cos[:, None], sin[:, None]
        allowed = torch.ones(p, p, dtype=torch.bool, device=self.device).tril()[None] & real[:, None, :]
        allowed |= torch.eye(p, dtype=torch.bool, device=self.device)[None]  # a pad query sees itself: no empty row
        mask = allowed[:, None]
        h = F.embedding(ids, self.embed)
        for i, (w_in, w_qkv, w_o, w_post, w_gu, w_down) in enumerate(self.layers):
            q, k, v = self._split_qkv(self._rms(h, w_in) @ w_qkv.T)
            q = self._rotate(q.view(b, p, self.n_heads, d).transpose(1, 2), cos, sin)
            k = self._rotate(k.view(b, p, self.n_kv, d).transpose(1, 2), cos, sin)
            v = v.view(b, p, self.n_kv, d).transpose(1, 2)
            dec.k[i][r0:r0 + b, :, :p] = k
            dec.v[i][r0:r0 + b, :, :p] = v
            o = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), attn_mask=mask)
            h = h + o.transpose(1, 2).reshape(b, p, -1) @ w_o.T
            h = self._mlp(h, w_post, w_gu, w_down)
        return (self._rms(h[:, -1], self.norm) @ self.lm_head.T).float()

    def _step(self, dec: "_Decoder") -> None:
        """One decoding step on the decoder's static buffers: the token at `slot` joins the cache;
        logits of the next token into `dec.logits`; position and slot move on. Fixed shapes and
        addresses throughout: this is what a CUDA graph captures."""
        import torch
        import torch.nn.functional as F

        b, d, g, kv = dec.batch, self.head_dim, self.n_heads // self.n_kv, self.n_kv
        dec.mask.index_fill_(-1, dec.slot, 0.0)
        cos, sin = self._rope(dec.pos)
        cos, sin = cos[:, None], sin[:, None]
        h = F.embedding(dec.tok, self.embed)
        scale = d ** -0.5
        nqk = (self.n_heads + kv) * d
        for i, (w_in, w_qkv, w_o, w_post, w_gu, w_down) in enumerate(self.layers):
            qkv = self._rms(h, w_in) @ w_qkv.T
            qk = self._rotate(qkv[:, :nqk].view(b, self.n_heads + kv, d), cos, sin)  # q and k rotated together
            q, k, v = qk[:, :self.n_heads], qk[:, self.n_heads:], qkv[:, nqk:]
            dec.k[i].index_copy_(2, dec.slot, k[:, :, None])
            dec.v[i].index_copy_(2, dec.slot, v.view(b, kv, 1, d))
            s = (q.reshape(b, kv, g, d) * scale) @ dec.k[i].transpose(-1, -2) + dec.mask  # [b, kv, g, L]
            o = torch.softmax(s, dim=-1, dtype=torch.float32).to(self.dtype) @ dec.v[i]
            h = h + o.reshape(b, -1) @ w_o.T
            h = self._mlp(h, w_post, w_gu, w_down)
        dec.logits.copy_(self._rms(h, self.norm) @ self.lm_head.T)
        dec.pos.add_(1)
        dec.slot.add_(1)

    # -- buckets and graphs ----------------------------------------------------------------------
    def _decoder(self, batch: int, length: int) -> "_Decoder":
        """The bucket for `batch` rows and a cache of at least `length`: the shortest live one that
        fits (now the most recently used), else a new one, captured when `graphs`, after dropping
        the least recently used bucket if `max_graphs` are alive. A failed capture keeps nothing."""
        fits = [key for key in self._graphs if key[0] == batch and key[1] >= length]
        if fits:
            key = min(fits, key=lambda key: key[1])
            self._graphs[key] = self._graphs.pop(key)
            return self._graphs[key]
        while len(self._graphs) >= max(1, self.max_graphs):
            self._drop(next(iter(self._graphs)))
        key = (batch, _bucket(length, self.len_step))
        dec = _Decoder(self, *key)
        if self.graphs:
            dec.capture(self)
        self._graphs[key] = dec
        return dec

    def _drop(self, key: tuple[int, int]) -> None:
        """One bucket goes: its graph (and so its own pool) and its cache, once no replay is in flight."""
        import torch

        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
        del self._graphs[key]
        if cuda:
            torch.cuda.empty_cache()

    def _side_stream(self) -> Any:
        import torch

        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        return self._stream

    # -- sampling --------------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, eos_token_ids: list[int] | int,
                 pad_token_id: int, do_sample: bool = True, temperature: float = 1.0, top_k: int | None = 0,
                 top_p: float | None = 1.0, generator: Any = None) -> list[list[int]]:
        """Completions of `prompts` (lists of token ids), each at most `max_new_tokens`, ending at
        its first EOS (included). Greedy when `do_sample` is false. On any exception every graph
        is dropped and torch restored (`reset`) before it propagates."""
        import torch

        if not prompts:
            return []
        home = torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None
        try:
            return self._generate(prompts, max_new_tokens, eos_token_ids, pad_token_id, do_sample, temperature,
                                  top_k, top_p, generator)
        except BaseException:
            self.reset(home)
            raise

    def _generate(self, prompts: list[list[int]], max_new_tokens: int, eos_token_ids: list[int] | int,
                  pad_token_id: int, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
                  generator: Any) -> list[list[int]]:
        import torch
        eos = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids)
        n = len(prompts)
        batch = _bucket(n, self.batch_step)
        p = max(len(x) for x in prompts)
        dec = self._decoder(batch, p + max_new_tokens)
        self.sync()
        dev = self.device
        ids = torch.full((batch, p), pad_token_id, dtype=torch.long)
        real = torch.zeros((batch, p), dtype=torch.bool)
        for r, x in enumerate(prompts):
            ids[r, p - len(x):] = torch.tensor(x, dtype=torch.long)
            real[r, p - len(x):] = True
        real[n:, -1] = True  # idle rows: one visible token, finished from the start
        ids, real = ids.to(dev), real.to(dev)
        eos_t = torch.tensor(eos, device=dev)
        out = torch.full((batch, max_new_tokens), pad_token_id, dtype=torch.long, device=dev)
        done = torch.zeros(batch, dtype=torch.bool, device=dev)
        done[n:] = True
        with torch.no_grad():
            neg = torch.finfo(self.dtype).min
            dec.mask.fill_(neg)
            dec.mask[:, 0, 0, :p] = torch.where(real, 0.0, neg).to(self.dtype)
            rows = max(1, 32768 // p)
            logits = torch.cat([self._prefill(dec, ids[r:r + rows], real[r:r + rows], r) for r in range(0, batch, rows)])
            dec.slot.fill_(p)
            dec.pos.copy_(real.long().sum(-1))
            for t in range(max_new_tokens):
                nxt = _sample(logits, do_sample, temperature, top_k, top_p, generator)
                nxt = torch.where(done, pad_token_id, nxt)
                out[:, t] = nxt
                done |= torch.isin(nxt, eos_t)
                if t + 1 == max_new_tokens or ((t + 1) % self.check_every == 0 and bool(done.all())):
                    break
                dec.tok.copy_(nxt)
                dec.run(self)
                logits = dec.logits
        out = out[:n].cpu()
        ended = torch.isin(out, eos_t.cpu())
        completions = []
        for r in range(n):
            row = out[r].tolist()
            hits = ended[r].nonzero()
            completions.append(row[: int(hits[0]) + 1] if len(hits) else row[: t + 1])
        return completions


class _Decoder:
    """The static buffers of one (batch, cache length) bucket, and its captured step."""

    def __init__(self, gen: FastGenerator, batch: int, length: int) -> None:
        import torch

        dev, dt = gen.device, gen.dtype
        self.batch, self.length = batch, length
        shape = (batch, gen.n_kv, length, gen.head_dim)
        self.k = [torch.zeros(shape, dtype=dt, device=dev) for _ in gen.layers]
        self.v = [torch.zeros(shape, dtype=dt, device=dev) for _ in gen.layers]
        self.mask = torch.zeros((batch, 1, 1, length), dtype=dt, device=dev)
        self.tok = torch.zeros(batch, dtype=torch.long, device=dev)
        self.pos = torch.zeros(batch, dtype=torch.long, device=dev)
        self.slot = torch.zeros(1, dtype=torch.long, device=dev)
        self.logits = torch.zeros((batch, gen.lm_head.shape[0]), dtype=torch.float32, device=dev)
        self.graph = None

    def capture(self, gen: FastGenerator) -> None:
        """The step, captured into a graph with a private pool of its own, on the generator's side
        stream after two eager warm-up steps on that same stream (so the allocator's blocks and the
        cuBLAS workspace of that stream exist before, outside the pool). Sets `graph` only when the
        capture ended; a capture that failed half way is ended here before the error propagates."""
        import torch

        self.slot.fill_(0)
        stream = gen._side_stream()
        home = torch.cuda.current_stream(gen.device)
        stream.wait_stream(home)
        graph = torch.cuda.CUDAGraph()
        # the outer stream context puts the caller's stream back even when the graph's own
        # context fails in its __enter__ (it entered the capture stream and never leaves it then)
        with torch.no_grad(), torch.cuda.stream(stream):
            for _ in range(2):  # warm-up outside the graph (allocator, library handles, workspaces)
                gen._step(self)
                self.slot.fill_(0)
            try:
                with torch.cuda.graph(graph, stream=stream):  # pool None: a private pool of its own
                    gen._step(self)
            except BaseException:
                _end_capture(graph)
                raise
        home.wait_stream(stream)
        self.graph = graph

    def run(self, gen: FastGenerator) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            gen._step(self)


def _end_capture(graph: Any) -> None:
    """Ends a capture left open on the current stream by a failure inside it (best effort; the
    generator's state and the stream are restored by `FastGenerator.reset`)."""
    import contextlib

    import torch

    with contextlib.suppress(Exception):
        if torch.cuda.is_current_stream_capturing():
            graph.capture_end()


def _release_default_generator(device: Any) -> None:
    """Gives the default CUDA generator of `device` a fresh state with the same seed and offset.

    `CUDAGraph::capture_begin` registers the default generator with every graph and runs its
    capture prologue (state marked capturing) before it asks the allocator for the pool; if that,
    or anything before `capture_end`'s epilogue, fails, the state stays marked and every later
    eager random op (plain `generate`'s sampling) raises "Offset increment outside graph capture
    encountered unexpectedly". `graphsafe_set_state` swaps the state without checking it."""
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    default = torch.cuda.default_generators[index]
    fresh = torch.Generator(device=torch.device("cuda", index))
    fresh.set_state(default.get_state())
    default.graphsafe_set_state(fresh.graphsafe_get_state())


def _sample(logits: Any, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
            generator: Any) -> Any:
    import torch

    if not do_sample:
        return logits.argmax(-1)
    logits = logits / max(temperature, 1e-5)
    if top_k and 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) > top_p  # keep the smallest prefix reaching top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)


__all__ = ["FastGenerator", "unsupported"]
