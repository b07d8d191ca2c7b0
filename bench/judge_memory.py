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
import tempfile
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
    from cuda_agent.backends import get_backend
    from cuda_agent.benchmark.jobs import reference_model_new
    from cuda_agent.benchmark.solutions import SINGLE_FILE_BINDING, SINGLE_FILE_BINDING_TEXT, reference_config
    from cuda_agent.evaluation import EvalConfig
    from cuda_agent.evaluation import judge as judge_module
    from cuda_agent.evaluation.evaluator import _baseline_key, _judge_request
    from cuda_agent.isolation.paths import default_cache_dir
    from cuda_agent.languages import get_language
    from cuda_agent.tasks.loaders import load_task_file
    from cuda_agent.workspace import create_workspace

    if args.variant == "no_candidate_warm_call":
        layout = judge_module._CandidateSession.layout

        def without(self, m):  # type: ignore[no-untyped-def]
            layout(self, m)
            if self.role == "candidate":
                self.start_request["warm_call"] = None

        judge_module._CandidateSession.layout = without  # type: ignore[method-assign]
    backend = get_backend("cuda")
    cache = default_cache_dir()
    cfg = reference_config(EvalConfig(backend="cuda")).model_copy(update={"compile_mode": None})
    judge = judge_module.Judge("cuda")
    torch = judge.torch
    me = str(os.getpid())
    with args.out.open("a") as out:
        for path in args.tasks:
            task = load_task_file(path)
            ws = create_workspace(task, Path(tempfile.mkdtemp(prefix="judge-mem-")) / "ws", "cuda")
            (ws.root / "model_new.py").write_text(reference_model_new(task.source))
            (ws.root / SINGLE_FILE_BINDING).write_text(SINGLE_FILE_BINDING_TEXT)
            lang = get_language(ws.language)
            build = lang.build(ws.root, backend, cache_dir=cache, timeout_s=300)
            lang.publish(ws.root, backend, build.library)
            req = _judge_request(ws, ws.task, backend, cfg, cache, _baseline_key(ws.task.content_hash, backend, cfg, None),
                                 build.library)
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
