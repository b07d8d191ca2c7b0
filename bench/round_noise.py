"""Where the round-to-round noise of a timed comparison comes from (issue 23: the reference as its
own solution, identical code, gave per-round time ratios from 0.90 to 1.07 on level1/73 and 0.73 to
1.12 on level1/83, so their timing ran to its 1 s budget instead of settling at 12 or 24 rounds).

For each task file: one cold evaluation, then warm ones under variants made here by patching the
judge in this process (never the product's defaults):
  - `as_is`: the judge as it is;
  - `no_flush`: no L2 flush before a timed batch;
  - `no_hold`: the clients hold no earlier batch's outputs (`hold_cap` 0);
  - `hold_grown`: the warm-up first holds `hold_cap` batches at once, so a client's allocator has
    every block the rounds' random holding asks for before the first timed round;
  - `gc_off`: the judge's garbage collector off through the evaluation.
`--reserve-core`: this process, and so every process it starts, kept off the core the timed clients
share; only they are pinned there (`Judge.share_a_core`).
Every timed batch (warm-up included) is logged in order with its model, so outliers can be placed.

    python bench/round_noise.py TASK.py [TASK.py ...] --out round_noise.jsonl
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--variants", default="as_is,no_flush,no_hold,hold_grown")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reserve-core", action="store_true")
    args = ap.parse_args()
    import gc
    import os

    from cuda_agent.evaluation.judge import _shared_core

    shared = _shared_core()
    if args.reserve_core and shared is not None:
        os.sched_setaffinity(0, set(os.sched_getaffinity(0)) - {shared})
    from judge_profile import reference_request

    from cuda_agent.evaluation import judge as judge_mod
    from cuda_agent.evaluation.judge import Judge, _CandidateSession
    from cuda_agent.evaluation.timing import round_ratios

    log: list[tuple[str, str, float, float]] = []
    t_start = [time.perf_counter()]
    real_timed, real_hold, real_warm = _CandidateSession.timed_batch, Judge.hold_cap, _CandidateSession.warm_up
    variant = {"name": "as_is"}

    def timed(self, m, model="candidate"):
        ms = real_timed(self, m, model)
        log.append((self.role, model, round(ms, 4), round(time.perf_counter() - t_start[0], 4)))
        return ms

    def hold(self, state, m, cfg):
        return 0 if variant["name"] == "no_hold" else real_hold(self, state, m, cfg)

    real_next = _CandidateSession.next_batch

    def next_batch(self, model):
        if getattr(self, "growing", False):  # nothing let go: the allocator grows to the most the rounds hold
            self.held.setdefault(model, [])
            self.batches += 1
            return self.batches, []
        return real_next(self, model)

    def warm(self, model, ms, batches):
        if variant["name"] == "hold_grown" and self.hold_cap:
            self.growing = True
            try:
                for _ in range(self.hold_cap + 1):
                    real_timed(self, self.m, model)
            finally:
                self.growing = False
        return real_warm(self, model, ms, batches)

    _CandidateSession.timed_batch, Judge.hold_cap, _CandidateSession.warm_up = timed, hold, warm
    _CandidateSession.next_batch = next_batch
    judge = Judge(args.backend)
    judge.shared_core = shared if judge.shared_core is not None else None
    real_flush = judge.backend.flush_cache
    with args.out.open("a") as fh:
        for task in args.tasks:
            req = reference_request(task, args.backend)
            for name in ["cold", *args.variants.split(",")]:
                variant["name"] = name
                judge.backend.flush_cache = (lambda cushion=True: None) if name == "no_flush" else real_flush
                del log[:]
                t0 = t_start[0] = time.perf_counter()
                if name == "gc_off":
                    gc.disable()
                try:
                    answer = judge.evaluate(req)
                finally:
                    gc.enable()
                wall = time.perf_counter() - t0
                s = answer.samples or {}
                ratios = round_ratios(s.get("candidate") or [], s.get("eager") or [])
                row = {"task": task.stem, "variant": name, "reserve_core": args.reserve_core, "wall_s": round(wall, 3), "correct": answer.correct,
                       "reason": answer.reason, "batch": answer.batch, "rounds": len(ratios),
                       "phases": {k: round(v, 3) for k, v in answer.phases.items()},
                       "ratio_min_max": [round(min(ratios), 4), round(max(ratios), 4)] if ratios else None,
                       "ratio_sd": round(statistics.pstdev(ratios), 4) if len(ratios) > 1 else None,
                       "samples": {k: [round(x, 4) for x in v] for k, v in s.items()}, "batches": list(log)}
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                print(json.dumps({k: row[k] for k in ("task", "variant", "reserve_core", "wall_s", "correct", "batch", "rounds",
                                                      "ratio_min_max", "ratio_sd")}), flush=True)
                time.sleep(1.0)  # the spares up, as between evaluations of an RL loop
    judge.close()
    del judge_mod


if __name__ == "__main__":
    main()
