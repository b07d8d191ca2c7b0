"""What one warm judge holds on the device between tasks: KernelBench tasks (each its reference as
the solution) evaluated in turn by one Judge in this process, and after each the judge's torch
allocations, its allocator's reserve and the device's per-process use (nvidia-smi).
Variants switch one of the judge's cost cuts off, to tell which one a change in memory comes from.

    python bench/judge_memory.py KernelBench/level1/10_3D_tensor_matrix_multiplication.py ... \
        --variant plain|no_freeze|no_candidate_warm_call --out mem.jsonl
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import time
from pathlib import Path


def device_use() -> dict[str, float]:
    """GiB per process on the device, by PID (nvidia-smi)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False).stdout
    use = {}
    for line in out.splitlines():
        pid, mib = (x.strip() for x in line.split(","))
        use[pid] = round(int(mib) / 1024, 2)
    return use


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--variant", default="plain", choices=["plain", "no_freeze", "no_candidate_warm_call"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.variant == "no_freeze":
        gc.freeze = lambda: None  # the judge's own call (this process only)
    from cuda_agent.evaluation import judge as judge_module
    from judge_profile import reference_request  # bench/, beside this script

    if args.variant == "no_candidate_warm_call":
        layout = judge_module._CandidateSession.layout

        def without(self, m):  # type: ignore[no-untyped-def]
            layout(self, m)
            if self.role == "candidate":
                self.start_request["warm_call"] = None

        judge_module._CandidateSession.layout = without  # type: ignore[method-assign]
    judge = judge_module.Judge("cuda")
    torch = judge.torch
    me = str(os.getpid())
    with args.out.open("a") as out:
        for path in args.tasks:
            req = reference_request(path, "cuda")
            t0 = time.perf_counter()
            answer = judge.evaluate(req)
            wall = time.perf_counter() - t0
            after = device_use()
            time.sleep(1.0)
            later = device_use()
            row = {"variant": args.variant, "task": path.stem, "wall_s": round(wall, 2), "correct": answer.correct,
                   "allocated_gib": round(torch.cuda.memory_allocated() / 2**30, 2),
                   "reserved_gib": round(torch.cuda.memory_reserved() / 2**30, 2),
                   "judge_device_gib": after.get(me), "judge_device_gib_1s_later": later.get(me),
                   "others_gib": {k: v for k, v in later.items() if k != me}, "retired": len(judge.retired),
                   "phases": {k: round(v, 2) for k, v in answer.phases.items()}}
            print(json.dumps(row), flush=True)
            out.write(json.dumps(row) + "\n")
    judge.close()


if __name__ == "__main__":
    main()
