"""Differential: new _CandidateSession.check_round (call by call over STACKED_ELEMENTS, stacked only
after a failing call) vs the old one (stacked first, then call by call), for both sides of the
threshold: same pass/raise and same message, on random batches with wrong calls, calls off only by
the per-call norm, mixed shapes/dtypes, tuples, NaN, 0-d, single-call batches.
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/check_round_diff.py"""
import random
from types import SimpleNamespace

import torch

from _load import old
import cuda_agent.evaluation.judge as new_j
from cuda_agent.evaluation.judge import Verdict
from cuda_agent.evaluation.verify import Tolerance

old_j = old("judge", "cuda_agent.evaluation")
rng = random.Random(3)
g = torch.Generator().manual_seed(3)


def run(mod, refs, got):
    s = SimpleNamespace(torch=torch, pending=list(got), tol=Tolerance())
    try:
        mod._CandidateSession.check_round(s, refs, 2)
        return ("pass", s.pending == [])
    except Exception as e:  # noqa: BLE001 - the old module has its own Verdict class
        if type(e).__name__ == "Verdict":
            return ("raise", e.reason)
        return ("error", type(e).__name__)


n = diffs = 0
from collections import Counter
tally = Counter()
for threshold in (10 ** 9, 1, 16, 300):
    new_j.STACKED_ELEMENTS = threshold
    for _ in range(400):
        m = rng.choice([1, 2, 3, 6])
        shape = rng.choice([(), (4,), (16, 16), (3, 7)])
        dtype = rng.choice([torch.float32, torch.float16, torch.int64, torch.float64])
        refs = [(torch.randn(shape, generator=g) * rng.choice([1, 1e-6])).to(dtype) for _ in range(m)]
        got = [r.clone() for r in refs]
        for i in range(m):
            k = rng.random()
            if k < 0.15:
                got[i] = refs[(i + 1) % m].clone()
            elif k < 0.3 and dtype.is_floating_point:
                got[i] = (refs[i].double() + 2e-7 * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
            elif k < 0.35 and dtype.is_floating_point and refs[i].numel():
                got[i] = refs[i].clone().reshape(-1)
                got[i][0] = float("nan")
                got[i] = got[i].reshape(shape)
            elif k < 0.4:
                got[i] = refs[i].to(torch.float32) if dtype != torch.float32 else refs[i].double()
            elif k < 0.45:
                got[i] = (refs[i], refs[i])
        if rng.random() < 0.1 and m > 1:
            refs[0] = torch.randn(5, generator=g)
        a, b = run(new_j, refs, got), run(old_j, refs, got)
        n += 1
        tally[(a[0], 'stack-saved' if a[0] == 'pass' and any(not __import__('cuda_agent.evaluation.verify', fromlist=['x']).compare_outputs(r, x, Tolerance()).ok for r, x in zip(refs, got)) else '')] += 1
        if a != b:
            diffs += 1
            print("DIFF", threshold, m, shape, dtype, "\n new", a, "\n old", b)
print(dict(tally))
print(f"{n} batches, {diffs} differences")
