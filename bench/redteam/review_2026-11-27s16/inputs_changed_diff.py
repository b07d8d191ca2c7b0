"""Differential: guards.inputs_changed (torch.equal first) vs the old one (allclose for floats) over
dtypes, NaN/Inf/-0.0, aliases, non-contiguous views, 0-d, empty, small writes, several slabs.
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/inputs_changed_diff.py"""
import random

import torch

from _load import old
import cuda_agent.evaluation.guards as new
import cuda_agent.evaluation.verify as verify

old_g = old("guards", "cuda_agent.evaluation")
rng = random.Random(5)
g = torch.Generator().manual_seed(5)
n = diffs = 0
for chunk in (1 << 25, 7):
    verify.CHUNK_ELEMENTS = chunk  # both import _slabs from the live verify module at call time
    for _ in range(1500):
        dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.bool,
                            torch.complex64, torch.uint8])
        shape = rng.choice([(), (0,), (9,), (4, 6)])
        b = (torch.randn(shape, generator=g) * 3).to(dtype)
        if dtype.is_floating_point and b.numel() and rng.random() < 0.4:
            b.view(-1)[rng.randrange(b.numel())] = rng.choice([float("nan"), float("inf"), -0.0])
        k = rng.random()
        if k < 0.2:
            a = b  # the same tensor
        elif k < 0.4:
            a = b.clone()
        elif k < 0.6 and b.numel():
            a = b.clone()
            idx = rng.randrange(b.numel())
            delta = rng.choice([1e-7, 1e-5, 1e-3, 1.0])
            if dtype == torch.bool:
                a.view(-1)[idx] = ~a.view(-1)[idx]
            else:
                a.view(-1)[idx] = (a.view(-1)[idx].to(torch.complex128 if dtype.is_complex else torch.float64) + delta).to(dtype)
        elif k < 0.7 and b.dim() == 2:
            b = b.t()
            a = b.clone()
        elif k < 0.8 and dtype.is_floating_point and b.numel():
            a = b.clone()
            a.view(-1)[rng.randrange(b.numel())] = rng.choice([float("nan"), float("inf"), -float("inf"), 0.0, -0.0])
        else:
            a = b.clone()
        x, y = new.inputs_changed([b, 3], [a, 3]), old_g.inputs_changed([b, 3], [a, 3])
        n += 1
        if x != y:
            diffs += 1
            print("DIFF", dtype, shape, x, y)
print(f"{n} cases, {diffs} differences")
