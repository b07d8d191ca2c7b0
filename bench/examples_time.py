"""Where the quickstart's per-example time goes (issue 18, point 9).

Evaluates bundled examples' solutions the way `cuda-agent examples` does (one process, the
next worker prespawned), first with an empty cache (the first run on a machine: the torch
header PCH, every object and the torch.compile baseline are made) and then again with that
cache warm. Each evaluation's phases (build, worker start, reference outputs, verify, timing
incl. the torch.compile baseline when not cached) are reported in seconds and as ratios to a
baseline measured in the same run -- a fresh `python -c "import torch"` -- so numbers taken on a
busy, shared box can still be compared with each other.

    python bench/examples_time.py --only swish --only layernorm --out bench/results/examples_time.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("workspace", "build", "start", "reference", "verify", "time", "other")


def torch_import_s(repeats: int = 3) -> float:
    """Median wall seconds of a fresh interpreter importing torch: the unit of every ratio."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_one(example, backend: str, cache_dir: Path, tmp: Path, compile_baseline: bool) -> dict:
    from cuda_agent.evaluation import EvalConfig, evaluate
    from cuda_agent.workspace import create_workspace

    t0 = time.perf_counter()
    ws = create_workspace(example.task, tmp / example.name, backend, cache_dir=cache_dir, overwrite=True)
    example.install_solution(ws.root, backend)
    made = time.perf_counter() - t0
    cfg = EvalConfig(backend=backend, cache_dir=str(cache_dir), compile_mode="default" if compile_baseline else None)
    res = evaluate(ws, cfg)
    phases = {"workspace": made, **{k: float(v) for k, v in res.phases.items()}}
    phases["other"] = max(0.0, made + res.seconds - sum(phases.values()))
    return {"example": example.name, "reward": res.reward, "reason": res.reason.splitlines()[0] if res.reason else "",
            "seconds": made + res.seconds, "baseline_cached": res.baseline_cached,
            "compiled_units": res.build.compiled_units if res.build else None, "phases": phases}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="examples to time (repeatable; default: all 8)")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--no-compile-baseline", action="store_true", help="skip torch.compile (as --no-compile-baseline)")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON record here")
    args = ap.parse_args()

    from cuda_agent.examples import list_examples

    chosen = [e for e in list_examples() if not args.only or e.name in args.only]
    if not chosen:
        print(f"error: no bundled example among {args.only}", file=sys.stderr)
        return 2
    unit_before = torch_import_s()
    t_all = time.perf_counter()
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="examples-time-") as tmp_s:
        tmp = Path(tmp_s)
        cache = tmp / "cache"
        for label in ("cold", "warm"):
            for ex in chosen:
                r = run_one(ex, args.backend, cache, tmp / label, not args.no_compile_baseline)
                runs[label].append(r)
                print(f"{label:4s} {r['example']:18s} reward {r['reward']:+d} {r['seconds']:6.1f} s  "
                      + " ".join(f"{k} {v:.1f}" for k, v in r["phases"].items()), flush=True)
    total = time.perf_counter() - t_all
    unit = statistics.median([unit_before, torch_import_s()])

    def summary(rs: list[dict]) -> dict:
        per = {p: statistics.mean(r["phases"].get(p, 0.0) for r in rs) for p in PHASES}
        mean = statistics.mean(r["seconds"] for r in rs)
        return {"mean_s": mean, "mean_units": mean / unit, "phases_s": per,
                "phases_units": {p: v / unit for p, v in per.items()},
                "phase_share": {p: v / mean for p, v in per.items()}}

    record = {
        "what": "per-example evaluation time of `cuda-agent examples`, cold then warm cache",
        "backend": args.backend, "examples": [e.name for e in chosen],
        "compile_baseline": not args.no_compile_baseline,
        "unit": "seconds of a fresh `python -c 'import torch'` (median, before and after)",
        "unit_s": unit, "unit_s_before": unit_before,
        "load_avg_at_end": os.getloadavg(), "cpus": os.cpu_count(), "machine": platform.machine(),
        "python": platform.python_version(), "total_s": total,
        "cold": summary(runs["cold"]), "warm": summary(runs["warm"]), "runs": runs,
        "projected_8_examples_s": {"cold_first": runs["cold"][0]["seconds"] + 7 * summary(runs["cold"][1:] or runs["cold"])["mean_s"],
                                   "warm": 8 * summary(runs["warm"])["mean_s"]},
    }
    print(json.dumps({k: record[k] for k in ("unit_s", "cold", "warm", "projected_8_examples_s")}, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
