"""The quick path counts nothing where max|c - r| <= atol (a float64 compare against the fp32 max):
checked at the fp32 neighbours of atol, with r = 0 and r small, for several atol/rtol, fp32/fp16/bf16/fp64.
Run: /work/main/.venv/bin/python bench/redteam/review_2026-11-27s16/verify_atol_edge.py"""
import torch

from _load import old
import cuda_agent.evaluation.verify as new

o = old("verify", "cuda_agent.evaluation")
diffs = 0
n = 0
for atol in (1e-2, 1e-4, 3e-3, 0.1, 1e-5, 0.3333333, 2.0 ** -7):
    for rtol in (0.0, 1e-2, 1e-6):
        tol = new.Tolerance(atol=atol, rtol=rtol, rel_norm=None)
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            a = torch.tensor(atol, dtype=torch.float32)
            near = [torch.nextafter(a, torch.tensor(-1.0)), a, torch.nextafter(a, torch.tensor(1.0))]
            for base in (0.0, 1e-3, -0.5, 1.0):
                for v in near:
                    r = torch.full((5,), base, dtype=torch.float64).to(dtype)
                    c = (r.double() + v.double()).to(dtype)
                    for x, y in ((r, c), (c, r)):
                        a_ = new.compare_outputs(x, y, tol)
                        b_ = o.compare_outputs(x, y, tol)
                        n += 1
                        if (a_.ok, a_.message, a_.max_abs_diff) != (b_.ok, b_.message, b_.max_abs_diff):
                            diffs += 1
                            print("DIFF", atol, rtol, dtype, base, float(v), a_, b_)
# negative rtol (a task's own tolerance, not checked anywhere): the "no element fails below atol" premise breaks
tol = new.Tolerance(atol=1e-2, rtol=-0.5, rel_norm=None)
r = torch.full((4,), 1.0)
c = r + 0.005
print("rtol<0:", "new", new.compare_outputs(r, c, tol), "old", o.compare_outputs(r, c, tol))
print(f"{n} boundary cases, {diffs} differences")
