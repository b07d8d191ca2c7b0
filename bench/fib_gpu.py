"""FlashInfer-Bench end to end on one GPU (issue 14): a definition with several workloads becomes a
task (one workload held out), our CUDA solution is evaluated by our judge on every workload, the
solution is exported as Solution JSON and loaded by FlashInfer-Bench's own TraceSet loader, then
FlashInfer-Bench's own Benchmark runs it beside the definition's reference (as a named python
solution), and its Traces give the baseline for the FlashInfer-style score beside our reward.

Every step writes its JSON into --out as it finishes; a step that fails records why and the
next one still runs.

    python bench/fib_gpu.py --out /tmp/fib   (bench/fib_gpu.sh runs it on the device)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.evaluation import EvalConfig, evaluate  # noqa: E402
from cuda_agent.suites.flashinfer import (  # noqa: E402
    export_solution,
    fib_score,
    flashinfer_tasks,
    load_trace_set,
    trace_baseline,
    write_solution,
)
from cuda_agent.workspace import create_workspace  # noqa: E402

SOLUTIONS = ROOT / "src" / "cuda_agent" / "suites" / "solutions"
REFERENCE_NAME = "torch_reference"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", default=str(ROOT / "tests" / "fixtures" / "flashinfer_trace"))
    ap.add_argument("--definition", default="fused_add_rmsnorm_h4096")
    ap.add_argument("--max-workloads", type=int, default=5, help="shown workloads (one more is held out)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-fib-run", action="store_true", help="skip FlashInfer-Bench's own Benchmark run")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fib_gpu_"))
    state: dict = {}

    def step(name, fn):
        t0 = time.monotonic()
        try:
            value = fn()
            record = {"ok": True, "seconds": round(time.monotonic() - t0, 2), "value": value}
        except Exception as exc:  # recorded, and the next step still runs
            record = {"ok": False, "seconds": round(time.monotonic() - t0, 2),
                      "error": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]}
        (out / f"{name}.json").write_text(json.dumps(record, indent=1, default=str))
        print(f"== {name}: {'ok' if record['ok'] else 'FAILED'} in {record['seconds']} s", flush=True)
        if not record["ok"]:
            print(record["error"], flush=True)
        return record

    def make_task():
        loaded = flashinfer_tasks(args.trace, definitions=[args.definition], max_workloads=args.max_workloads)
        if loaded.rejected:
            raise RuntimeError(str(loaded.rejected[0]))
        state["task"] = task = loaded[0]
        return {"name": task.name, "shown": [w.name for w in task.workloads], "held_out": len(task.held_out)}

    def evaluate_solution():
        task = state["task"]
        ws = create_workspace(task.for_agent(), work / "ws", "cuda")
        sol = SOLUTIONS / args.definition / "cuda"
        shutil.copy(sol / "model_new.py", ws.root / "model_new.py")
        for f in (sol / "kernels").iterdir():
            shutil.copy(f, ws.root / "kernels" / f.name)
        state["ws"] = ws
        result = evaluate(ws, EvalConfig(), task=task)
        state["result"] = result
        print(f"   reward {result.reward}: {result.reason}", flush=True)
        for w in result.workloads:
            print(f"   {w.name}: correct={w.correct} cand={w.time_ms.candidate} eager={w.time_ms.eager} "
                  f"compile={w.time_ms.compile} x_eager={w.speedup_vs_eager} x_compile={w.speedup_vs_compile}", flush=True)
        return result.model_dump(mode="json", exclude={"build": {"log"}})

    def export():
        solution = export_solution(state["ws"].root, args.definition, name=f"cuda_agent_{args.definition}",
                                   author="cuda-agent")
        (out / "solution.json").write_text(json.dumps(solution, indent=1))
        root = work / "trace"
        shutil.copytree(args.trace, root)
        definition = load_trace_set(root).definitions[args.definition]
        write_solution(root, solution, definition.op_type)
        reference = {"name": REFERENCE_NAME, "definition": args.definition, "author": "flashinfer-bench definition",
                     "spec": {"language": "python", "target_hardware": ["cuda"], "entry_point": "main.py::run",
                              "destination_passing_style": False},
                     "sources": [{"path": "main.py", "content": definition.reference}],
                     "description": "the definition's reference, as the named baseline"}
        write_solution(root, reference, definition.op_type)
        loaded = load_trace_set(root)  # FlashInfer-Bench's own loader
        names = sorted(s.name for s in loaded.solutions.get(args.definition, []))
        if solution["name"] not in names:
            raise RuntimeError(f"its loader did not find the exported solution (found {names})")
        state["trace_root"] = root
        return {"loaded_solutions": names, "sources": [s["path"] for s in solution["sources"]]}

    def fib_run():
        from flashinfer_bench import Benchmark, BenchmarkConfig

        trace_set = load_trace_set(state["trace_root"])
        bench = Benchmark(trace_set, BenchmarkConfig(definitions=[args.definition], timeout_seconds=240))
        try:
            bench.run_all(dump_traces=True)
        finally:
            bench.close()
        loaded = load_trace_set(state["trace_root"])
        rows = []
        for t in loaded.traces.get(args.definition, []):
            ev = t.evaluation
            rows.append({"solution": t.solution, "workload": t.workload.uuid, "axes": t.workload.axes,
                         "status": ev.status.value if ev else None,
                         "latency_ms": ev.performance.latency_ms if ev and ev.performance else None,
                         "reference_latency_ms": ev.performance.reference_latency_ms if ev and ev.performance else None,
                         "speedup_factor": ev.performance.speedup_factor if ev and ev.performance else None,
                         "max_abs_error": ev.correctness.max_absolute_error if ev and ev.correctness else None,
                         "log": (ev.log or "")[-800:] if ev and ev.status.value != "PASSED" else ""})
        ours = [r for r in rows if r["solution"] == f"cuda_agent_{args.definition}"]
        passed = [r for r in ours if r["status"] == "PASSED"]
        state["traces"] = loaded
        return {"traces": rows, "ours_passed": f"{len(passed)}/{len(ours)}",
                "ours_mean_speedup_factor": (sum(r["speedup_factor"] for r in passed) / len(passed)) if passed else None}

    def score():
        result, task = state["result"], state["task"]
        baseline = trace_baseline(state["traces"], args.definition, REFERENCE_NAME) if "traces" in state else None
        s = fib_score(result, task, baseline)
        return {"ours": {"reward": result.reward, "speedups": {k: v.model_dump() for k, v in result.speedups.items()}},
                "flashinfer_style": s.model_dump(mode="json")}

    step("task", make_task)
    if "task" in state:
        step("evaluate", evaluate_solution)
    if "ws" in state:
        step("export", export)
    if "trace_root" in state and not args.skip_fib_run:
        step("fib_run", fib_run)
    if "result" in state and state["result"].correct:
        step("score", score)
    return 0 if "result" in state and state["result"].correct else 1


if __name__ == "__main__":
    sys.exit(main())
