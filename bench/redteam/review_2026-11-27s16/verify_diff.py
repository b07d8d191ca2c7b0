"""Differential fuzz: new verify._compare_tensors (with _finite_slab) vs the old full walk (5102a97).
Compares (ok, message, max_abs_diff) on random and adversarial inputs, several slabs, every float dtype,
0-d, empty, non-contiguous, complex, int/bool, tuples, NaN/Inf patterns, overflow, tolerance edges.
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/verify_diff.py"""
import math
import random
import sys

import torch

from _load import old
import cuda_agent.evaluation.verify as new

old_v = old("verify", "cuda_agent.evaluation")
torch.set_num_threads(1)


def both(ref, cand, tol):
    res = []
    for mod in (new, old_v):
        try:
            c = mod.compare_outputs(ref, cand, tol)
            res.append((c.ok, c.message, c.max_abs_diff))
        except Exception as e:  # noqa: BLE001
            res.append(("raised", type(e).__name__, str(e)[:80]))
    return res


def same(a, b):
    if a[0] != b[0] or a[1] != b[1]:
        return False
    x, y = a[2], b[2]
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y


rng = random.Random(1)
g = torch.Generator().manual_seed(1)
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
tols = [new.Tolerance(), new.Tolerance(atol=1e-4, rtol=1e-4, rel_norm=None),
        new.tolerance_for("kernelbench", None, None, None, 1e-2, 1e-2),
        new.Tolerance(atol=0.0, rtol=0.0, rel_norm=0.0), new.Tolerance(atol=1e-2, rtol=0.0),
        new.Tolerance(atol=0.0, rtol=1e-2), new.Tolerance(atol=0.1, rtol=1e-3, rel_norm=1e-3),
        new.Tolerance(atol=3e-3, rtol=3e-3)]

special = [float("nan"), float("inf"), -float("inf"), 3e38, -3e38, 1e-45, 0.0, -0.0, 65504.0, 1e308, -1e308, 1e200]


def mutate(ref, kind):
    c = ref.clone()
    n = c.numel()
    flat = c.view(-1) if c.is_contiguous() else None
    if kind == "same":
        return c
    if kind == "noise":
        return (ref.double() + rng.choice([1e-7, 1e-4, 1e-3, 1e-2, 5e-2]) * torch.randn(ref.shape, generator=g, dtype=torch.float64)).to(ref.dtype)
    if kind == "shift":
        return (ref.double() + rng.choice([0.0099, 0.01, 0.0100001, 0.02, -0.01, 1e-4, 1.0000001e-4])).to(ref.dtype)
    if kind == "scale":
        return (ref.double() * rng.choice([1.0001, 1.01, 0.99, 1.02, -1.0, 0.0, 1e-7])).to(ref.dtype)
    if kind == "special" and flat is not None and n:
        for _ in range(rng.randint(1, 3)):
            flat[rng.randrange(n)] = torch.tensor(rng.choice(special), dtype=torch.float64).to(c.dtype)
        return c
    if kind == "few" and flat is not None and n:
        for _ in range(rng.randint(1, 3)):
            flat[rng.randrange(n)] += rng.choice([0.0101, 0.5, 9.0, -3.0, 1e30])
        return c
    return c


def make_ref(dtype, shape, how):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if how == "tiny":
        x = x * 1e-7
    elif how == "huge":
        x = x * 1e38 if dtype != torch.float64 else x * 1e200
    elif how == "special" and x.numel():
        f = x.view(-1)
        for _ in range(rng.randint(1, 3)):
            f[rng.randrange(f.numel())] = rng.choice(special)
    elif how == "zeros":
        x = x * 0
    return x.to(dtype)


bad = 0
cases = 0
for chunk in (1 << 25, 97, 1000):
    new.CHUNK_ELEMENTS = chunk
    old_v.CHUNK_ELEMENTS = chunk
    for _ in range(1500 if chunk != 1 << 25 else 800):
        dtype = rng.choice(FLOATS)
        shape = rng.choice([(), (1,), (7,), (50, 70), (3, 5, 41), (0,), (0, 4), (300,), (1, 1)])
        how = rng.choice(["plain", "plain", "tiny", "huge", "special", "zeros"])
        ref = make_ref(dtype, shape, how)
        kind = rng.choice(["same", "noise", "shift", "scale", "special", "few"])
        cand = mutate(ref, kind)
        if rng.random() < 0.2 and ref.dim() >= 2:  # non-contiguous views of both
            ref, cand = ref.transpose(0, 1), cand.transpose(0, 1)
        if rng.random() < 0.15:  # both carry the same non-finite value somewhere
            if ref.numel() and ref.is_contiguous() and cand.is_contiguous():
                i = rng.randrange(ref.numel())
                v = rng.choice([float("nan"), float("inf"), -float("inf")])
                ref.view(-1)[i] = torch.tensor(v).to(ref.dtype)
                cand.view(-1)[i] = torch.tensor(v).to(ref.dtype)
        tol = rng.choice(tols)
        a, b = both(ref, cand, tol)
        cases += 1
        if not same(a, b):
            bad += 1
            if bad <= 10:
                print("DIFF", chunk, dtype, shape, how, kind, tol, "\n  new:", a, "\n  old:", b)

# structured / other dtypes: these never reach _finite_slab but must still behave as before
extra = []
r = torch.randn(8, 8, generator=g, dtype=torch.complex64)
extra += [(r, r.clone()), (r, r.conj().resolve_conj()), (r, r + 1e-3)]
i = torch.randint(0, 9, (5, 5), generator=g)
extra += [(i, i.clone()), (i, i + (i == 3)), (i.bool(), i.bool()), (i.bool(), ~i.bool())]
t = torch.randn(4, 4, generator=g)
extra += [((t, t * 2), (t.clone(), t * 2 + 1e-3)), ([t], [t + 1.0]), ({"a": t}, {"a": t.clone()}), (1.5, 1.5000001)]
extra += [(torch.tensor(1.0), torch.tensor(1.0 + 1e-3)), (torch.tensor(1.0), torch.tensor(float("nan"))),
          (torch.tensor(float("nan")), torch.tensor(float("nan"))), (torch.empty(0), torch.empty(0))]
big = torch.full((40,), 3e38)
extra += [(big, -big), (big.double() * 1e270, big.double() * 1e270), (big.double() * 1e100, -big.double() * 1e100)]
for ref, cand in extra:
    for tol in tols:
        a, b = both(ref, cand, tol)
        cases += 1
        if not same(a, b):
            bad += 1
            print("DIFF extra", type(ref), "\n  new:", a, "\n  old:", b)
print(f"{cases} cases, {bad} differences")
sys.exit(1 if bad else 0)
