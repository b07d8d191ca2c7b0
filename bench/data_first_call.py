"""First-call times of a synthesis run and/or an audit: how much a worker's cold start costs, and
how many tasks the old rule (first call > cut x window's upper bound -> too_slow) would have
rejected that the new one (re-time warm, reject only if the warm call is past the cut too) keeps.

  python bench/data_first_call.py RUN/candidates.jsonl [RUN/audit.jsonl ...] [--hi-ms 100 --cut 10] > first_call.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from cuda_agent.storage import read_jsonl


def summarise(path: Path, hi_ms: float, cut: float) -> dict[str, object]:
    rows = read_jsonl(path)  # a torn last line (a run cut by its time limit) is dropped
    timed = [r for r in rows if r.get("first_call_ms") is not None]
    limit = cut * hi_ms

    def q(values: list[float]) -> dict[str, float]:
        if not values:
            return {}
        v = sorted(values)
        return {"n": len(v), "p50": v[len(v) // 2], "p95": v[min(len(v) - 1, int(0.95 * len(v)))], "max": v[-1],
                "mean": round(statistics.mean(v), 3)}

    first_of_worker = [r["first_call_ms"] for r in timed if r.get("worker_task") == 0]
    later = [r["first_call_ms"] for r in timed if r.get("worker_task", 0) > 0]
    over = [r for r in timed if r["first_call_ms"] > limit]
    kept = [r for r in over if r.get("warm_call_ms") is not None and r["warm_call_ms"] <= limit]
    return {"file": str(path), "rows": len(rows), "timed": len(timed), "cut_ms": limit,
            "first_call_ms_worker_first_task": q(first_of_worker), "first_call_ms_later_tasks": q(later),
            "warm_call_ms_when_retimed": q([r["warm_call_ms"] for r in over if r.get("warm_call_ms") is not None]),
            "old_rule_rejects": len(over), "kept_by_warm_retime": len(kept),
            "still_rejected_warm": len(over) - len(kept),
            "examples": [{k: r.get(k) for k in ("name", "index", "first_call_ms", "warm_call_ms", "worker_task",
                                                 "runtime_ms")} for r in over[:20]]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--hi-ms", type=float, default=100.0, help="the runtime window's upper bound")
    ap.add_argument("--cut", type=float, default=10.0, help="FilterConfig.first_call_cut")
    args = ap.parse_args()
    print(json.dumps([summarise(f, args.hi_ms, args.cut) for f in args.files if f.is_file()], indent=1))


if __name__ == "__main__":
    main()
