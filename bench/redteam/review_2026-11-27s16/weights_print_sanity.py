"""_weights_print on unusual tensors (0-d, empty, odd byte counts, bool, int8, fp16, complex,
non-contiguous, many small ones) with PRINT_CHUNK at its value and tiny (every flush path): no
exception, deterministic, every single-word change and every permutation within/between tensors seen.
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/weights_print_sanity.py"""
import os
import random
import struct

import torch

import cuda_agent.evaluation.judge as J

rng = random.Random(2)
g = torch.Generator().manual_seed(2)


def key():
    return struct.unpack("<ii", os.urandom(8))


def params():
    return {"a0": torch.tensor(1.5), "b_empty": torch.empty(0, 3), "c_half": torch.randn(7, generator=g).half(),
            "d_bool": torch.rand(5, generator=g) > 0.5, "e_i8": torch.randint(-5, 5, (9,), generator=g, dtype=torch.int8),
            "f_cplx": torch.randn(3, generator=g, dtype=torch.complex64),
            "g_nc": torch.randn(6, 5, generator=g).t(), "h_big": torch.randn(50, generator=g),
            **{f"s{i:02d}": torch.randn(rng.randint(1, 4), generator=g) for i in range(20)}}


missed = total = 0
for chunk in (1 << 22, 8, 3, 1):
    J.PRINT_CHUNK = chunk
    for _ in range(60):
        p = params()
        k = key()
        first = J._weights_print(p, k)
        assert first == J._weights_print({n: t.clone() for n, t in p.items()}, k), "not deterministic"
        name = rng.choice([n for n, t in p.items() if t.numel()])
        q = dict(p)
        t = p[name].clone()
        flat = t.reshape(-1)
        i = rng.randrange(flat.numel())
        if t.dtype == torch.bool:
            flat[i] = ~flat[i]
        elif t.dtype.is_complex:
            flat[i] = flat[i] + 1
        else:
            flat[i] = flat[i] + 1 if not t.dtype.is_floating_point else -flat[i] + 0.5
        q[name] = flat.reshape(t.shape) if t.is_contiguous() else flat.reshape(t.shape)
        total += 1
        missed += J._weights_print(q, k) == first
        # a swap of two small tensors of the same shape and dtype (names keep their shapes)
        r = dict(p)
        r["s00"], r["s01"] = p["s01"], p["s00"]
        if p["s00"].shape == p["s01"].shape and not torch.equal(p["s00"], p["s01"]):
            total += 1
            missed += J._weights_print(r, k) == first
print(f"{total} changes, {missed} unseen")
