"""Warm re-evaluation latency and timing spread of one bundled example, in one process.

    python bench/judge_latency.py --example swish --backend cuda --repeats 6 --out lat.json

The first evaluation pays the judge's start, the reference phase and the build; the rest are
what an RL loop pays per candidate of the same task (the judge and a spare candidate process
are warm). The spread is max/min of the candidate's median over the warm evaluations.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from cuda_agent.evaluation import EvalConfig, evaluate
from cuda_agent.examples import list_examples
from cuda_agent.workspace import create_workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="swish")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    ex = next(e for e in list_examples() if e.name == args.example)
    root = Path(tempfile.mkdtemp(prefix="judge-latency-"))
    ws = create_workspace(ex.task, root / "ws", args.backend)
    ex.install_solution(ws.root, args.backend)
    cfg = EvalConfig(backend=args.backend)
    runs = []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        res = evaluate(ws, cfg)
        wall = time.perf_counter() - t0
        runs.append({"i": i, "wall_s": wall, "reward": res.reward, "reason": res.reason[:300],
                     "candidate_ms": res.time_ms.candidate, "eager_ms": res.time_ms.eager,
                     "compile_ms": res.time_ms.compile, "phases": res.phases, "flags": res.flags})
        print(json.dumps(runs[-1]), flush=True)
    warm = [r for r in runs[1:] if r["candidate_ms"]]
    meds = [r["candidate_ms"] for r in warm]
    summary = {"example": args.example, "backend": args.backend, "device": res.device, "runs": runs,
               "cold_s": runs[0]["wall_s"], "warm_s": [r["wall_s"] for r in warm],
               "spread": max(meds) / min(meds) if meds else None}
    args.out.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))


if __name__ == "__main__":
    main()
