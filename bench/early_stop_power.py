"""What stopping the timed rounds early costs and saves: the judge's early-stop rule replayed on
simulated rounds (no device), against the rounds-until-budget it replaces.

Each simulated evaluation draws per-round candidate/baseline time ratios around a true ratio `r`
(log-normal noise of spread `sigma`, with Student-t tails: GPU rounds have outliers, level3/16's
spread 0.47-3.54 on an H100), runs until its budget allows `n_max` rounds, looks at
`judge.EARLY_LOOKS` once a quarter of the budget is spent, and ends with the reward's own test
(`timing.clearly_faster`). Per policy and cell: P(faster) and the mean rounds run. The rule a
policy adds may only stop for "not faster" (`judge.futile`), so the false "faster" rate cannot
rise; what it may cost is honest speed not credited, which this measures. Policies: "now" (the
strict looks alone, the rule before), "futile_L" (the laxer stop at the looks only) and
"futile_L_every_N_from_F_share_S" (also every N rounds from round F, once share S of the budget is spent:
the judge's rule is F = 8 for a task with two or more calls a round and F = 12 with one, `judge.FUTILE_CALLS`;
both are printed).

    python bench/early_stop_power.py --out bench/results/early_stop_power_<date>
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

from cuda_agent.evaluation.judge import (EARLY_LOOKS, EARLY_SHARE, FUTILE_EVERY, FUTILE_FROM, FUTILE_LEVEL, FUTILE_SHARE,
                                        may_stop)
from cuda_agent.evaluation.timing import clearly_faster

MARGIN, CONFIDENCE = 0.05, 0.99
LEVEL = 1 - (1 - CONFIDENCE) / (len(EARLY_LOOKS) + 1)


def draw_ratios(rng: random.Random, r: float, sigma: float, n: int) -> list[float]:
    """Per-round ratios: log r plus sigma times a Student-t(4) draw scaled to unit variance."""
    out = []
    for _ in range(n):
        z = rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(4)) / 4) / math.sqrt(2)
        out.append(r * math.exp(sigma * z))
    return out


def run_one(ratios: list[float], n_max: int, futile_level: float | None, every: int | None = None,
            first: int = FUTILE_FROM, share: float = FUTILE_SHARE) -> tuple[bool, int]:
    """(faster, rounds run) for one simulated evaluation under the judge's rule; `every`: the laxer
    stop looked for every this many rounds from round `first` on, not only at the looks, once
    `share` of the budget is spent (the strict looks once EARLY_SHARE is: budget ~ n_max rounds)."""
    end = max(n_max, 10)
    for n in range(1, end):
        part = {"eager": [1.0] * n, "candidate": ratios[:n]}
        if may_stop(part, n, EARLY_LOOKS, MARGIN, LEVEL, futile_level, every or None, first if every else EARLY_LOOKS[0],
                    spent=n / n_max, futile_share=share):
            return clearly_faster(ratios[:n], MARGIN, CONFIDENCE), n
    return clearly_faster(ratios[:end], MARGIN, CONFIDENCE), end


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--levels", type=float, nargs="*", default=[FUTILE_LEVEL], help="laxer levels to try")
    ap.add_argument("--every", type=int, default=FUTILE_EVERY,
                    help="also: the laxer stop looked for every N rounds after the first look (the judge's rule); 0: not")
    ap.add_argument("--first", type=int, default=FUTILE_FROM, help="the laxer stop's first round (the judge's rule); "
                    "compared with the first look at EARLY_SHARE (the rule before)")
    ap.add_argument("--share", type=float, default=FUTILE_SHARE, help="... once this share of the budget is spent")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    policies: list[float | None] = [None, *args.levels]
    rows = []
    for sigma in (0.02, 0.05, 0.1, 0.2):
        for n_max in (12, 24, 33, 48, 96):
            for r in (0.7, 0.8, 0.85, 0.88, 0.9, 0.92, 0.95, 1.0, 1.05, 1.2):
                rng = random.Random(hash((sigma, n_max, r)) & 0xFFFFFFFF)
                draws = [draw_ratios(rng, r, sigma, max(n_max, 10)) for _ in range(args.reps)]
                row = {"sigma": sigma, "n_max": n_max, "r": r}
                for pol in policies:
                    res = [run_one(d, n_max, pol, None, EARLY_LOOKS[0], EARLY_SHARE) for d in draws]
                    key = "now" if pol is None else f"futile_{pol}"
                    row[key] = {"p_faster": sum(f for f, _ in res) / len(res),
                                "rounds": sum(n for _, n in res) / len(res)}
                    if pol is None or not args.every:
                        continue
                    for first, share in sorted({(args.first, args.share), (EARLY_LOOKS[0], EARLY_SHARE)}):
                        res = [run_one(d, n_max, pol, args.every, first, share) for d in draws]
                        key = f"futile_{pol}_every_{args.every}_from_{first}_share_{share}"
                        row[key] = {"p_faster": sum(f for f, _ in res) / len(res),
                                    "rounds": sum(n for _, n in res) / len(res)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    (args.out / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {}
    for key in [k for k in rows[0] if k.startswith("futile_")]:
        loss = max(r["now"]["p_faster"] - r[key]["p_faster"] for r in rows)
        gain = max(r[key]["p_faster"] - r["now"]["p_faster"] for r in rows)
        at_parity = [r for r in rows if r["r"] == 1.0]
        saved = sum(1 - r[key]["rounds"] / r["now"]["rounds"] for r in at_parity) / len(at_parity)
        summary[key] = {"max_p_faster_lost": round(loss, 4), "max_p_faster_gained": round(gain, 4),
                        "rounds_saved_at_parity_mean": round(saved, 3)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
