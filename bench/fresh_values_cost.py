"""What the judge's new input values cost per round (issue 24, round 3): the scaling by element
and by region (`evaluation/scaling.py`) against the elementwise scaling it replaced, on the
judge's own device, for a few stack sizes (calls x elements per call); and the build log's
filter per line. Prints one JSON line per case.

    python bench/fresh_values_cost.py [--device cpu|cuda] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

from cuda_agent.evaluation.scaling import scaled
from cuda_agent.languages.cpp.build import trim_compiler_output


def elementwise(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """The scaling before round 3: one factor per element in [0.8, 1.2]."""
    return torch.rand(x.shape, generator=gen, device=x.device).mul_(0.4).add_(0.8).mul_(x).to(x.dtype)


def regional(x: torch.Tensor, gen: torch.Generator, rng: random.Random) -> torch.Tensor:
    return scaled(x, gen, rng, False, x[0].numel())


def per_round_us(fn, x: torch.Tensor, repeats: int) -> float:
    gen, rng = torch.Generator(device=x.device), random.Random(0)
    gen.manual_seed(0)
    fn(x, gen, rng)
    times = []
    for _ in range(repeats):
        if x.is_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(x, gen, rng)
        if x.is_cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    for calls, per_call in [(256, 64 * 1024), (16, 1 << 16), (4, 1 << 20), (1, 1 << 24)]:
        x = torch.randn(calls, per_call, device=args.device)
        old = per_round_us(lambda x, g, r: elementwise(x, g), x, args.repeats)
        new = per_round_us(regional, x, args.repeats)
        print(json.dumps({"case": "fresh_values", "device": args.device, "calls": calls, "per_call": per_call,
                          "elementwise_us": round(old), "regional_us": round(new), "ratio": round(new / old, 2)}))
    log = "\n".join(f"/venv/x.h:{i}:1: error: 'tok{i}' does not name a type\n    {i} | tok{i} = 1\n      | ^~~"
                    for i in range(20000))
    t0 = time.perf_counter()
    trim_compiler_output(log, __import__("pathlib").Path("/work/ws"))
    lines = log.count("\n") + 1
    print(json.dumps({"case": "log_filter", "lines": lines, "us_per_line": round((time.perf_counter() - t0) * 1e6 / lines, 2)}))


if __name__ == "__main__":
    main()
