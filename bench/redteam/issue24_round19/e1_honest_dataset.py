"""Round 19, e1: honest references-as-solutions on dataset rows that go through the newest input paths (the
source run again per draw, structure exemptions, the early start), end to end, every guard on but the two that
forbid torch code in a candidate (`reference_config`, as the benchmark's harness check uses). Deserved: 1.

    cd /work/main && .venv/bin/python bench/redteam/issue24_round19/e1_honest_dataset.py [ops6k:30 ops6k:4398 ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pandas as pd  # noqa: E402

import common  # noqa: E402
from cuda_agent.benchmark.jobs import reference_model_new  # noqa: E402
from cuda_agent.benchmark.solutions import SINGLE_FILE_BINDING, SINGLE_FILE_BINDING_TEXT, reference_config  # noqa: E402

DEFAULT = ["ops6k:30", "ops6k:4398", "ops6k:3383", "ops6k:387", "ops6k:32"]
PATHS = {"ops6k": ".carry-data/ops6k.parquet", "synth": "release/cuda-agent-synth-2013/tasks.parquet"}


def main() -> None:
    names = sys.argv[1:] or DEFAULT
    frames = {k: pd.read_parquet(v) for k, v in PATHS.items()}
    try:
        for name in names:
            kind, i = name.split(":")
            source = frames[kind].code[int(i)]
            ws = common.workspace(name.replace(":", "_"), model_new=reference_model_new(source), kernels={},
                                  task_source=source)
            (ws.root / SINGLE_FILE_BINDING).write_text(SINGLE_FILE_BINDING_TEXT)
            common.run("e1_honest_dataset.py", f"reference:{name}", ws, reference_config(common.config()),
                       deserved="1 (the reference as its own solution)")
    finally:
        common.shutdown()


if __name__ == "__main__":
    main()
