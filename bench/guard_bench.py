"""Cost of the anti-hacking guards: the same honest solutions evaluated with all guards on
and all off, alternating in one run, so drift hits both sides alike.

    python bench/guard_bench.py --backend cpu --out bench/results/cpu_guard_bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from cuda_agent.backends import default_backend_name
from cuda_agent.evaluation import EvalConfig, GuardConfig, evaluate
from cuda_agent.examples import list_examples
from cuda_agent.workspace import create_workspace


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    backend = args.backend or default_backend_name()
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-guard-bench-"))
    base = EvalConfig(backend=backend, compile_mode=None, cache_dir=str(root / "cache"))
    configs = {"on": base, "off": base.model_copy(update={"guards": GuardConfig.off()})}
    rows = []
    for ex in list_examples():
        if args.only and ex.name not in args.only:
            continue
        ws = create_workspace(ex.task, root / ex.name, backend, cache_dir=root / "cache")
        ex.install_solution(ws.root, backend)
        evaluate(ws, configs["off"])  # build and warm caches outside the comparison
        runs: dict[str, list] = {"on": [], "off": []}
        for i in range(args.repeats):
            for mode in (("on", "off") if i % 2 == 0 else ("off", "on")):
                runs[mode].append(evaluate(ws, configs[mode]))
        row = {"example": ex.name}
        for mode, results in runs.items():
            row[f"eval_s_{mode}"] = statistics.median(r.seconds for r in results)
            row[f"candidate_ms_{mode}"] = statistics.median(r.time_ms.candidate or float("nan") for r in results)
            row[f"rewards_{mode}"] = [r.reward for r in results]
        row["eval_time_ratio_on_over_off"] = row["eval_s_on"] / row["eval_s_off"]
        row["candidate_time_ratio_on_over_off"] = row["candidate_ms_on"] / row["candidate_ms_off"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"backend": backend, "rows": rows}, indent=1))
    ratios = [r["eval_time_ratio_on_over_off"] for r in rows]
    summary = {"median_eval_time_ratio": statistics.median(ratios),
               "median_candidate_time_ratio": statistics.median(r["candidate_time_ratio_on_over_off"] for r in rows)}
    args.out.write_text(json.dumps({"backend": backend, "rows": rows, "summary": summary}, indent=1))
    print("summary", json.dumps(summary))


if __name__ == "__main__":
    main()
