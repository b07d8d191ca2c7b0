"""How well a synthesis run's recorded eager runtimes agree with its audit's re-measurement.

    python bench/data_timing_consistency.py RUN_DIR [RUN_DIR ...] [--json OUT]

RUN_DIR is a `cuda-agent data synth` output directory with an `audit.jsonl` written by
`cuda-agent data audit` (bench/data_gpu.sh does both). Prints, per run, the ratio audit / synth of
each task's runtime (median, 5th and 95th percentile, share beyond ±20%) next to the run's
throughput, so the timing modes can be compared side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def consistency(run: Path) -> dict:
    tasks = {r["name"]: r["runtime_ms"] for r in map(json.loads, (run / "tasks.jsonl").open())}
    audited = {r["name"]: r["runtime_ms"] for r in map(json.loads, (run / "audit.jsonl").open())}
    ratios = sorted(audited[k] / tasks[k] for k in audited if audited[k] and tasks.get(k))
    summary = json.loads((run / "summary.json").read_text())
    n = len(ratios)
    at = lambda q: round(ratios[min(n - 1, int(q * n))], 3)  # noqa: E731
    return {
        "run": run.name, "accepted": summary["accepted"], "candidates": summary["candidates"],
        "accepted_per_hour": summary["accepted_per_hour"], "rejects_by_reason": summary["rejects_by_reason"],
        "audited": n, "ratio_median": round(statistics.median(ratios), 3) if n else None,
        "ratio_p5": at(0.05) if n else None, "ratio_p95": at(0.95) if n else None,
        "beyond_20pct": round(sum(r > 1.2 or r < 1 / 1.2 for r in ratios) / n, 3) if n else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [consistency(r) for r in args.runs]
    for r in rows:
        print(f"{r['run']}: {r['accepted']} accepted / {r['candidates']} candidates, {r['accepted_per_hour']:.0f}/h; "
              f"audit/synth runtime median {r['ratio_median']}, p5-p95 {r['ratio_p5']}-{r['ratio_p95']}, "
              f"beyond ±20% {r['beyond_20pct']:.1%}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
