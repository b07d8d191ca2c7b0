"""Round 19, s2: where the input check's structure exemption is in force on real dataset rows. For each row of
Ops-6K and the synthetic set whose get_inputs() builds a tensor without a random draw, draw 5 seeds as the judge
does and list each non-floating tensor input (floating ones are scaled in every timed round, so a kernel cannot
bank on them) whose elements keep their bits: its share kept and which exemption covers it (small <= 4096,
sorted rows, <= 2 values). Those are the inputs a candidate may precompute on.

    cd /work/main && .venv/bin/python bench/redteam/issue24_round19/s2_structure_inventory.py
"""
from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pandas as pd  # noqa: E402

from s1_scan_sample import flagged  # noqa: E402

OUT = Path(__file__).resolve().parent / "s2_inventory.jsonl"


def inventory(source: str) -> list[dict]:
    from types import SimpleNamespace

    import torch

    from cuda_agent.evaluation.judge import Judge, _ElementDraws, module_from_source

    module = module_from_source("inv_task", source)
    with torch.device("meta"):
        try:
            meta = list(module.get_inputs())
            if sum(x.numel() * x.element_size() for x in meta if isinstance(x, torch.Tensor)) > (1 << 28):
                return [{"skipped": "large"}]
        except Exception:  # noqa: BLE001
            pass
    judge = SimpleNamespace(torch=torch, device=torch.device("cpu"))
    seeds = [1000 + 7919 * i + 1 for i in range(5)]
    first = Judge._trial_inputs(judge, module, seeds[0], None)
    el = _ElementDraws(torch, first)
    for s in seeds[1:]:
        el.add(Judge._trial_inputs(judge, module, s, None))
    out = []
    for p, x in enumerate(first):
        if not isinstance(x, torch.Tensor) or x.is_floating_point() or p not in el.kept:
            continue
        share = float(el.kept[p].float().mean())
        if share <= 0.10:
            continue
        why = ("small" if p in el.small else "sorted" if p in el.ordered and bool(el.ordered[p][el.kept[p]].any())
               else "2-values" if el.structure(p) else "NOT exempt")
        out.append({"pos": p, "dtype": str(x.dtype), "shape": list(x.shape), "kept": round(share, 3), "why": why,
                    "values": int(torch.unique(x).numel())})
    return out


def main() -> None:
    import torch
    torch.set_num_threads(1)
    for name, path in [("ops6k", ".carry-data/ops6k.parquet"), ("synth", "release/cuda-agent-synth-2013/tasks.parquet")]:
        for i, code in enumerate(pd.read_parquet(path).code):
            if not flagged(code):
                continue
            signal.alarm(60)
            try:
                inv = inventory(code)
            except BaseException as exc:  # noqa: BLE001
                inv = [{"error": f"{type(exc).__name__}: {exc}"[:200]}]
            signal.alarm(0)
            if inv:
                row = {"task": f"{name}:{i}", "inputs": inv}
                print(json.dumps(row), flush=True)
                with OUT.open("a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
