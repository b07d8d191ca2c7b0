"""How fast is the AST similarity screen? 6,000 synthetic candidates against an evaluation set
(KernelBench levels 1-3: 250 tasks), and the near-duplicate screen inside the 6,000.

Candidates are real composed tasks (plans from the operator catalogue, realized at tiny sizes
and rendered), so their length and structure are what `cuda-agent data synth` screens.

    python bench/data_similarity.py --eval-set /path/to/KernelBench --candidates 6000 \
        --out bench/results/data_similarity_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval-set", required=True, help="KernelBench checkout (or any task source)")
    ap.add_argument("--candidates", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch

    from cuda_agent.data.catalogue import build_catalogue
    from cuda_agent.data.compose import ComposeError, realize, render
    from cuda_agent.data.config import ComposeConfig
    from cuda_agent.data.plan import Planner
    from cuda_agent.data.similarity import SimilarityIndex, fingerprint
    from cuda_agent.tasks import load_tasks

    res: dict = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                 "torch_threads": torch.get_num_threads(), "torch": torch.__version__}
    t = time.perf_counter()
    cat = build_catalogue(include_transformers=False)
    res["catalogue_s"] = round(time.perf_counter() - t, 2)
    planner = Planner(cat, ComposeConfig(), (1.0, 100.0))
    t = time.perf_counter()
    sources: list[str] = []
    i = 0
    while len(sources) < args.candidates:
        plan = planner.plan(args.seed, i)
        i += 1
        # small sizes render the same code faster (the measure ignores every number)
        plan = plan.model_copy(update={"feature_dims": [max(4, d // 8) for d in plan.feature_dims]})
        try:
            sources.append(render(realize(plan, 1 if plan.rank > 1 else 16, max_bytes=16 << 20)))
        except ComposeError:
            continue
    res["render_candidates_s"] = round(time.perf_counter() - t, 2)
    log(f"rendered {len(sources)} candidates in {res['render_candidates_s']} s")
    evals = [task.source for task in load_tasks(args.eval_set, on_error="skip")
             if "level4" not in task.name]
    res.update(candidates=len(sources), eval_tasks=len(evals),
               mean_candidate_chars=round(sum(map(len, sources)) / len(sources)))

    # 1. fingerprints (the parse + normalise + k-gram cost per file)
    t = time.perf_counter()
    fps = [fingerprint(s) for s in sources]
    eval_fps = [fingerprint(s) for s in evals]
    res["fingerprint_s"] = round(time.perf_counter() - t, 2)
    log(f"fingerprints {res['fingerprint_s']} s")

    # 2. contamination: every candidate against every evaluation task, in one batch
    t = time.perf_counter()
    index = SimilarityIndex()
    index.extend(eval_fps)
    matches = index.best_many(fps)
    res["eval_screen_s"] = round(time.perf_counter() - t, 2)
    res["eval_pairs"] = len(fps) * len(eval_fps)
    res["similar_to_eval"] = sum(m.score >= args.threshold for m in matches)
    log(f"eval screen {res['eval_screen_s']} s")

    # 3. near-duplicates inside the set, online as synthesis does it: query, then add if kept
    t = time.perf_counter()
    kept = SimilarityIndex()
    dups = 0
    for n, fp in enumerate(fps):
        if n % 500 == 0:
            log(f"dedup {n} {time.perf_counter() - t:.1f} s")
        if kept.best(fp).score >= args.threshold:
            dups += 1
        else:
            kept.add(fp)
    res["online_dedup_s"] = round(time.perf_counter() - t, 2)
    res["near_duplicates"] = dups
    res["total_screen_s"] = round(res["fingerprint_s"] + res["eval_screen_s"] + res["online_dedup_s"], 2)
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
