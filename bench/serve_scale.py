"""Throughput of `cuda-agent serve` on 1 and on 2 devices of one host: the same batch, the ratio.

    python bench/serve_scale.py --backend cuda --runs 0 0,1 --out $OUT      # GPUs (bench/serve_scale_gpu.sh)
    python bench/serve_scale.py --backend cpu --runs 1 2 --copies 1 --out /tmp/s   # CPU slots: a dry run of the logic

The batch: each of `--examples`' own solutions for the backend, `--copies` times, each copy made
distinct by a comment in model_new.py (so none is answered from the store, while the kernels, and
so the builds, are shared). First a warm pass on the largest run's devices (its own store) builds
every kernel and measures the task baselines, so the timed runs compare judging, not compiling.
Each timed run: a fresh service (its own store), its judges warmed by one evaluation per slot,
then the whole batch in one POST and the wall time to the last verdict. Every verdict must be
correct (reward >= 1). Writes serve_scale.json and the service logs under --out; prints the ratio
of the last run's throughput to the first's."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.examples import get_example  # noqa: E402
from tests.serve.test_serve import Server  # noqa: E402


def example_files(name: str, backend: str) -> dict[str, str]:
    root = get_example(name).solution_dir(backend)
    files = {"model_new.py": (root / "model_new.py").read_text()}
    for f in sorted((root / "kernels").iterdir()):
        files[f"kernels/{f.name}"] = f.read_text()
    return files


def copies(examples: list[str], backend: str, n: int, tag: str) -> list[tuple[str, dict[str, str]]]:
    out = []
    for name in examples:
        base = example_files(name, backend)
        out += [(name, {**base, "model_new.py": base["model_new.py"] + f"\n# copy {i} {tag}\n"}) for i in range(n)]
    return out


def server_args(backend: str, run: str, queue: int) -> list[str]:
    where = ["--devices", run, "--memory-limit-gb", "16"] if backend != "cpu" else ["--slots", run]  # the last wins
    return ["--backend", backend, *where, "--max-queue", str(queue)]


def n_slots(backend: str, run: str) -> int:
    return len(run.split(",")) if backend != "cpu" else int(run)


def judge_all(srv: Server, batch: list[tuple[str, dict[str, str]]], options: dict[str, Any], timeout_s: float
              ) -> tuple[float, list[Any]]:
    """Submit the batch in one POST; wall seconds to the last verdict, and the final rows."""
    t0 = time.monotonic()
    rows = srv.client.submit_batch([({"name": name}, files, options) for name, files in batch])
    assert not any(r.cached for r in rows), "a timed request was answered from the store"
    with ThreadPoolExecutor(16) as pool:
        done = list(pool.map(lambda r: srv.client.wait(r.id, timeout_s), rows))
    return time.monotonic() - t0, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--runs", nargs="+", default=["0", "0,1"], help="device lists (GPU) or slot counts (cpu)")
    ap.add_argument("--examples", default="swish,softmax,layernorm,sum_reduction")
    ap.add_argument("--copies", type=int, default=8, help="distinct requests per example in the timed batch")
    ap.add_argument("--no-measure", action="store_true", help="correctness only (no timing): a quicker dry run")
    ap.add_argument("--run-timeout-s", type=float, default=240)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.setdefault("CUDA_AGENT_CACHE", str(args.out / "cache")))
    examples = args.examples.split(",")
    options = {"measure": not args.no_measure, "compile_baseline": False}
    tag = str(time.time())
    batch = copies(examples, args.backend, args.copies, tag)
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "backend": args.backend,
                              "batch": len(batch), "examples": examples, "options": options, "runs": {}}
    problems: list[str] = []
    work = args.out / "stores"
    work.mkdir(parents=True, exist_ok=True)

    def serve(name: str, run: str) -> Server:
        return Server(work / f"{name}.sqlite", cache, *server_args(args.backend, run, len(batch) + 8))

    # warm pass: builds and baselines on the largest run's devices (two copies of each example)
    largest = max(args.runs, key=lambda r: n_slots(args.backend, r))
    t0 = time.monotonic()
    srv = serve("warm", largest)
    try:
        _, rows = judge_all(srv, copies(examples, args.backend, 2, "warm" + tag), options, args.run_timeout_s)
        problems += [f"warm {r.id[:12]}: {r.status} {r.error or (r.result and r.result.reason)}"[:300]
                     for r in rows if not (r.result and r.result.reward >= 1)]
    finally:
        srv.stop()
    report["warm_s"] = round(time.monotonic() - t0, 1)

    for run in args.runs:
        k = n_slots(args.backend, run)
        srv = serve(f"run_{run.replace(',', '_')}", run)
        try:
            # one evaluation per slot, at once, so every judge is started before the clock
            judge_all(srv, copies(examples[:1], args.backend, k, f"judges {run} {tag}"), options, args.run_timeout_s)
            before = {d["label"]: d["completed"] for d in srv.client.request("GET", "/v1/devices")}
            wall, rows = judge_all(srv, batch, options, args.run_timeout_s)
            bad = [r for r in rows if not (r.status == "done" and r.result and r.result.reward >= 1 and r.runs == 1)]
            problems += [f"run {run} {r.id[:12]}: {r.status} runs={r.runs} "
                         f"{r.error or (r.result and r.result.reason)}"[:300] for r in bad]
            devices = srv.client.request("GET", "/v1/devices")
            report["runs"][run] = {"slots": k, "wall_s": round(wall, 2), "per_s": round(len(batch) / wall, 4),
                                   "correct": len(rows) - len(bad),
                                   "per_slot": {d["label"]: d["completed"] - before.get(d["label"], 0)
                                                for d in devices},
                                   "speedups": sorted(round(r.result.speedup_vs_eager, 2) for r in rows
                                                      if r.result and r.result.speedup_vs_eager)}
            print(json.dumps({run: report["runs"][run]}), flush=True)
        finally:
            srv.stop()
    first, last = report["runs"].get(args.runs[0]), report["runs"].get(args.runs[-1])
    if first and last:
        report["throughput_ratio"] = round(last["per_s"] / first["per_s"], 3)
        report["target"] = 1.8
    report["problems"] = problems
    for log in work.glob("*.log"):
        log.rename(args.out / log.name)
    (args.out / "serve_scale.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    if "throughput_ratio" in report:
        verdict = "meets" if report["throughput_ratio"] >= 1.8 else "MISSES"
        print(f"throughput {args.runs[-1]} / {args.runs[0]}: {report['throughput_ratio']}x ({verdict} the 1.8x target)")
    sys.exit(1 if problems or "throughput_ratio" not in report else 0)


if __name__ == "__main__":
    main()
