"""Datasets in verl's formats. RL (stages 1, 3, 4): one parquet row per task with RLHFDataset's
columns, `extra_info` carrying the whole task as JSON so any node can lay out its workspace.
SFT (stage 2): the RFT rows with `messages` and `tools` as JSON strings, because Arrow would
unify every tool schema and call's arguments into one null-filled struct and change what the
chat template renders (`sft_dataset.py` decodes them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...backends import PRIMARY_BACKEND
from ...tasks import Task
from ..chat import task_prompt
from ..rft import load_sft_rows

AGENT_LOOP_NAME = "cuda_agent"


def task_row(task: Task, backend: str, *, single_turn: bool = False, index: int = 0) -> dict[str, Any]:
    messages = task_prompt(task, backend)
    if single_turn:
        messages = [*messages[:-1], {"role": "user", "content": messages[-1]["content"] + _SINGLE_TURN_NOTE}]
    return {
        "data_source": task.data_source or "cuda_agent",
        "prompt": messages,
        "agent_name": "single_turn_agent" if single_turn else AGENT_LOOP_NAME,
        "ability": "cuda",
        "reward_model": {"style": "rule", "ground_truth": task.content_hash},
        "extra_info": {"index": index, "task_json": task.model_dump_json(), "backend": backend},
    }


_SINGLE_TURN_NOTE = ("\n\nAnswer in one message, without tools: give the complete model_new.py in a ```python block "
                     "and each kernels/ file in a block whose first line is a comment with its file name.")


def tasks_to_verl_parquet(tasks: list[Task], out: str | Path, *, backend: str = PRIMARY_BACKEND,
                          single_turn: bool = False) -> int:
    return _write_parquet([task_row(t, backend, single_turn=single_turn, index=i) for i, t in enumerate(tasks)], out)


def rft_rows_to_verl_parquet(rft_jsonl: str | Path, out: str | Path) -> int:
    return _write_parquet([{"messages": json.dumps(r["messages"], ensure_ascii=False),
                            "tools": json.dumps(r.get("tools") or []), "task": r.get("meta", {}).get("task", ""),
                            "reward": r.get("meta", {}).get("reward")} for r in load_sft_rows(rft_jsonl)], out)


def _write_parquet(rows: list[dict[str, Any]], out: str | Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return len(rows)


def task_from_extra_info(extra_info: dict[str, Any]) -> tuple[Task, str]:
    """The task (and backend) a verl row carries; a clear error when the row is not ours."""
    raw = (extra_info or {}).get("task_json")
    if not raw:
        raise ValueError("verl row has no extra_info.task_json: build the parquet with `cuda-agent train verl-data`")
    return Task.model_validate_json(raw), (extra_info.get("backend") or PRIMARY_BACKEND)


__all__ = ["AGENT_LOOP_NAME", "task_row", "tasks_to_verl_parquet", "rft_rows_to_verl_parquet",
           "task_from_extra_info"]
