"""Differential fuzz, new compare (quick path) vs the old full walk (5102a97, read from git by
bench/redteam/review_2026-11-27s16/_load.py; since 46e3030 the only differences are fp64 overflows
where the old walk raised OverflowError and the new one gives a verdict), on the layouts a candidate may describe: stride-0
(expanded) outputs where the reference's are expanded too, padded strides (up to 2x), transposed,
sliced, many threads (the judge's default), values near fp32 max (r - c overflowing in some
elements only), subnormals, NaN payloads in fp16/bf16, and one-element float64 outputs (OverflowError).
Run: /work/main/.venv/bin/python bench/redteam/issue24_round27/verify_layouts_fuzz.py"""
import math, random, sys
sys.path.insert(0, "/work/main/bench/redteam/review_2026-11-27s16")
import torch
from _load import old
import cuda_agent.evaluation.verify as new
from cuda_agent.evaluation.verify import Tolerance
old_v = old("verify", "cuda_agent.evaluation")

def res(mod, r, c, tol):
    try:
        x = mod.compare_outputs(r, c, tol); return (x.ok, x.message, x.max_abs_diff)
    except Exception as e:
        return ("raised", type(e).__name__, str(e)[:60])

def same(a, b):
    if a[:2] != b[:2]: return False
    x, y = a[2], b[2]
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))

rng = random.Random(7); g = torch.Generator().manual_seed(7)
tols = [Tolerance(), Tolerance(atol=1e-4, rtol=1e-4, rel_norm=None), Tolerance(atol=0.0, rtol=0.0, rel_norm=0.0),
        Tolerance(atol=1e-2, rtol=0.0, rel_norm=1e-2)]
n_cases = n_diff = 0; raised = []
def layout(base, kind):
    if kind == "expand": return base[:, :1].expand(-1, base.shape[1])
    if kind == "pad":
        big = torch.empty(base.shape[0], base.shape[1] * 2, dtype=base.dtype); big[:, :base.shape[1]] = base
        return big[:, :base.shape[1]]
    if kind == "t": return base.t().contiguous().t()
    return base.clone()
for it in range(3000):
    dt = rng.choice([torch.float32, torch.float64, torch.float16, torch.bfloat16])
    shape = (rng.choice([1, 2, 3, 17, 64]), rng.choice([1, 5, 33, 257]))
    r = torch.randn(shape, generator=g).to(dt) * rng.choice([1, 1e-6, 1e3, 3e38 if dt == torch.float32 else 1])
    kind_r = rng.choice(["plain", "expand", "t"])
    r = layout(r, kind_r)
    c = r.clone()
    mode = rng.choice(["eq", "noise", "tiny", "huge", "nan", "inf", "subn", "sign", "flip1", "overflow"])
    c = c.contiguous().clone()
    if mode == "noise": c += torch.randn(c.shape, generator=g).to(dt) * rng.choice([1e-3, 1e-2, 0.02])
    elif mode == "tiny": c.zero_()
    elif mode == "huge": c.view(-1)[rng.randrange(c.numel())] = torch.finfo(dt).max
    elif mode == "nan": c.view(-1)[rng.randrange(c.numel())] = float("nan")
    elif mode == "inf": c.view(-1)[rng.randrange(c.numel())] = float("inf")
    elif mode == "subn": c += torch.finfo(dt).tiny / 4
    elif mode == "sign": c = -c
    elif mode == "flip1": c.view(-1)[0] += 0.0100001
    elif mode == "overflow": c = -c * 1e30 if dt != torch.float64 else -c * 1e300
    c = layout(c, kind_r if kind_r == "expand" else rng.choice(["plain", "pad", "t"]))
    if kind_r == "expand": c = c[:, :1].expand(-1, r.shape[1])
    for tol in tols:
        a, b = res(new, r, c, tol), res(old_v, r, c, tol)
        n_cases += 1
        if a[0] == "raised": raised.append((dt, shape, mode, a))
        if not same(a, b):
            n_diff += 1
            if n_diff < 10: print("DIFF", dt, shape, kind_r, mode, tol, a, b)
# one-element float64 outputs: the norm's square in Python floats
for val in [1e153, 1e155, 1e200, 1e300]:
    r = torch.tensor(1.0, dtype=torch.float64); c = torch.tensor(val, dtype=torch.float64)
    a, b = res(new, r, c, Tolerance()), res(old_v, r, c, Tolerance())
    print("fp64 0-d candidate", val, "new:", a, "old:", b)
    a = res(new, c, c.clone(), Tolerance())
    print("fp64 0-d reference=candidate", val, "new:", a)
print(f"{n_cases} cases, {n_diff} differences, {len(raised)} raised (new)")
for x in raised[:5]: print("raised:", x)
