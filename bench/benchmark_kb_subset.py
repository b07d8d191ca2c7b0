"""Choose the KernelBench subset for the GPU harness check and write it as a task list.

    python bench/benchmark_kb_subset.py .carry-benchmark/KernelBench --per-level 5 \
        --out bench/benchmark_kb_subset.txt

Why a subset: one device call has ~8 minutes. Why a size cap: the environment ships every
correctness trial's output from the worker to the parent process (5 trials, reference and
candidate), so a level-1 task with a 7 GiB output moves ~70 GiB through a pipe; half of
level 1 is that large in the current KernelBench. Shapes come from running `get_inputs()`
and the reference on torch's meta device (no memory, no compute); tasks whose output
exceeds --max-out-mib or whose inputs exceed --max-in-mib are left out, then the rest are
spread evenly per level (first and last included) and ordered round-robin over levels.
"""

from __future__ import annotations

import argparse
import os
import types
from pathlib import Path

import torch

from cuda_agent.benchmark.suite import interleave_levels, load_suite, spread_per_level


def tensor_mib(xs) -> float:
    xs = xs if isinstance(xs, (list, tuple)) else [xs]
    return sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor)) / 2**20


def shapes(source: str, name: str) -> tuple[float, float] | None:
    module = types.ModuleType("task")
    try:
        exec(compile(source, name, "exec"), module.__dict__)  # KernelBench's own task code
        with torch.device("meta"):
            inputs = module.get_inputs()
            out = module.Model(*module.get_init_inputs())(*inputs)
        return tensor_mib(inputs), tensor_mib(out)
    except Exception:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernelbench", help="KernelBench checkout or its KernelBench/ folder")
    ap.add_argument("--per-level", type=int, default=5)
    ap.add_argument("--max-out-mib", type=float, default=1100)
    ap.add_argument("--max-in-mib", type=float, default=8192)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    tasks = load_suite(args.kernelbench).tasks
    eligible = []
    for t in tasks:
        s = shapes(t.source, t.name)
        if s and s[0] <= args.max_in_mib and s[1] <= args.max_out_mib:
            eligible.append(t)
    chosen = interleave_levels(spread_per_level(eligible, args.per_level))
    base = args.out.resolve().parent
    lines = [f"# KernelBench subset: {args.per_level} per level, output <= {args.max_out_mib:g} MiB, "
             f"input <= {args.max_in_mib:g} MiB ({len(eligible)} of {len(tasks)} eligible)"]
    lines += [os.path.relpath(Path(t.origin).resolve(), base) for t in chosen]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(chosen)} task(s) -> {args.out}")


if __name__ == "__main__":
    main()
