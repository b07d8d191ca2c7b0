"""A naive one-process KernelBench-style harness: the baseline our judge is measured against.

    python bench/naive_harness.py TASK_LIST --out naive.jsonl

What KernelBench's own evaluation does for a candidate (here the reference itself, as the
solution), with none of our guards: in one process, for each task, build `Model` twice
(reference and "candidate"), 5 correctness trials on `get_inputs()` made on the host and
moved to the GPU, then 100 timed trials with CUDA events and an L2 flush before each. One
line of JSON per task with its wall seconds; torch and CUDA start-up are paid once, before
the first task, as in a long-lived harness.
"""

from __future__ import annotations

import argparse
import json
import time
import types
from pathlib import Path

import torch


def load(path: Path) -> types.ModuleType:
    module = types.ModuleType(path.stem)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def flush_l2(buf: torch.Tensor) -> None:
    buf.zero_()


def run_task(path: Path, trials: int, timed: int, buf: torch.Tensor) -> dict:
    t0 = time.perf_counter()
    torch.cuda.reset_peak_memory_stats()
    m = load(path)
    torch.manual_seed(42)
    init = m.get_init_inputs()
    ref = m.Model(*init).cuda().eval()
    torch.manual_seed(42)
    cand = m.Model(*init).cuda().eval()
    correct = True
    with torch.no_grad():
        for i in range(trials):
            torch.manual_seed(1000 + i)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in m.get_inputs()]
            a, b = ref(*inputs), cand(*inputs)
            if isinstance(a, torch.Tensor):
                correct &= bool(torch.allclose(a, b, atol=1e-2, rtol=1e-2))
        torch.cuda.synchronize()
        times = []
        for _ in range(timed):
            flush_l2(buf)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            cand(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    del ref, cand, inputs
    torch.cuda.empty_cache()
    times.sort()
    return {"task": str(path), "correct": correct, "median_ms": times[len(times) // 2],
            "seconds": time.perf_counter() - t0, "peak_gib": torch.cuda.max_memory_allocated() / 2**30}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path, help="a file with one task path per line")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--timed", type=int, default=100)
    args = ap.parse_args()
    torch.empty(1, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    base = args.tasks.parent
    with args.out.open("a") as fh:
        for line in args.tasks.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            path = (base / line.strip()).resolve()
            try:
                rec = run_task(path, args.trials, args.timed, buf)
            except Exception as exc:  # a task that does not fit: say so, go on
                rec = {"task": str(path), "error": f"{type(exc).__name__}: {exc}"[:300]}
                torch.cuda.empty_cache()
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
