"""Round 19, s1: the judge's input-move check (bench/inputs_move_scan.check_one) over a targeted sample of
Ops-6K and the synthetic set: every row whose get_inputs() builds a tensor without a random draw (arange,
linspace, ones, zeros, full, tensor, triu, empty) or whose module makes tensors at import, plus a seeded
random sample. An honest task refused is a guard firing on honest work.

    cd /work/main && .venv/bin/python bench/redteam/issue24_round19/s1_scan_sample.py [random_n]
"""
from __future__ import annotations

import ast
import json
import random
import re
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import pandas as pd  # noqa: E402

from inputs_move_scan import check_one  # noqa: E402

OUT = Path(__file__).resolve().parent / "s1_scan.jsonl"
PAT = re.compile(r'torch\.(arange|linspace|ones|zeros|tril|triu|eye|full|tensor|empty|logspace)\b')


def flagged(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    gi = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"]
    if gi and PAT.search(ast.get_source_segment(code, gi[0]) or ""):
        return True
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and re.search(r"torch\.(randn|rand|randint|tensor|arange|linspace|ones|zeros)", ast.get_source_segment(code, n) or "")
               for n in tree.body)


def main() -> None:
    import torch
    torch.set_num_threads(1)
    n_random = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    rows = []
    for name, path in [("ops6k", ".carry-data/ops6k.parquet"), ("synth", "release/cuda-agent-synth-2013/tasks.parquet")]:
        df = pd.read_parquet(path)
        codes = list(df.code)
        pick = {i for i, c in enumerate(codes) if flagged(c)}
        rng = random.Random(19)
        pick |= set(rng.sample(range(len(codes)), n_random))
        rows += [(f"{name}:{i}", codes[i]) for i in sorted(pick)]
    done = {json.loads(l)["task"] for l in OUT.read_text().splitlines()} if OUT.exists() else set()
    print(len(rows), "tasks;", len(done), "done", flush=True)
    for task, code in rows:
        if task in done:
            continue
        signal.alarm(120)
        try:
            row = check_one(task, code, "cpu", int(0.25 * 2**30))
        except BaseException as exc:  # noqa: BLE001
            row = {"task": task, "verdict": "error", "why": f"{type(exc).__name__}: {exc}"[:300]}
        signal.alarm(0)
        with OUT.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if row["verdict"] not in ("ok", "skipped"):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
