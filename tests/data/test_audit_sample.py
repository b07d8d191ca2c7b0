"""`data audit --sample N`: the same N rows for the same file and seed, drawn alike from two sets,
and pass rates per filter counted over the rows chosen only (no worker is started here)."""

from __future__ import annotations

from collections import Counter

import pytest

from cuda_agent.data.audit import AuditSummary, audit, sample_rows


def test_a_sample_is_seeded_ordered_and_without_repeats() -> None:
    rows = list(range(1000))
    a, b = sample_rows(rows, 200, seed=0), sample_rows(rows, 200, seed=0)
    assert a == b and len(set(a)) == 200 and a == sorted(a)
    assert sample_rows(rows, 200, seed=1) != a
    assert max(a) > 900 and min(a) < 100  # spread over the file, not its head
    assert sample_rows(rows[:50], 200) == rows[:50]


def test_pass_rate_by_filter_counts_rows_once() -> None:
    s = AuditSummary(rows=4, passed=1, rows_failing_filter=Counter({"runtime": 2, "compile": 1}))
    d = s.as_dict()
    assert d["pass_rate"] == 0.25 and d["pass_rate_by_filter"] == {"runtime": 0.5, "compile": 0.75}


def test_limit_and_sample_together_are_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="not both"):
        audit(tmp_path, tmp_path / "a.jsonl", limit=2, sample=2, backend="cpu")


def test_two_audits_side_by_side_count_each_row_once_per_filter_and_reason(tmp_path) -> None:
    from cuda_agent.data.report import audit_comparison
    import json

    def row(name: str, *failures: tuple[str, str]) -> dict:
        return {"name": name, "ok": not failures,
                "failures": [{"filter": f, "reason": r, "detail": ""} for f, r in failures]}

    ours, theirs = tmp_path / "ours.jsonl", tmp_path / "ops6k.jsonl"
    ours.write_text("".join(json.dumps(r) + "\n" for r in (
        row("a"), row("b"), row("c", ("runtime", "too_slow"), ("runtime", "too_slow")), row("d"))))
    theirs.write_text("".join(json.dumps(r) + "\n" for r in (  # a resumed audit can repeat a row
        row("x", ("compile", "compile_mismatch")), row("y"), row("x", ("compile", "compile_mismatch")))))
    text = audit_comparison({"ours": ours, "Ops-6K": theirs}, tmp_path / "cmp.md").read_text()
    assert "| rows audited | 4 | 2 |" in text
    assert "| **pass every filter** | 3 (75.0%) | 1 (50.0%) |" in text
    assert "| runtime | 1 (25.0%) | 0 (0.0%) |" in text
    assert "| compile_mismatch | 0 (0.0%) | 1 (50.0%) |" in text


CROWDED_TASK = '''
import os
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        if torch.get_num_threads() < (os.cpu_count() or 1):  # a worker among others: its share of the cores
            raise RuntimeError("CUDA out of memory. Tried to allocate 512.00 MiB (stand-in: crowded)")
        return torch.tanh(x) * 2

def get_inputs():
    return [torch.randn(64, 256)]

def get_init_inputs():
    return []
'''


def test_a_row_that_ran_out_of_device_memory_beside_others_is_audited_again_alone(tmp_path) -> None:
    """Issue 30: twelve audit workers a GPU running whole rows at once filled the device, and 65% of
    a 200-row sample failed `runs` with CUDA out of memory. Such a row is checked again with its
    device to itself (here: a task that fails while it has a share of the cores, as a worker among
    others does, and runs when it has them all), and only that verdict is recorded."""
    import json
    import os

    from cuda_agent.data.audit import out_of_device_memory
    from cuda_agent.data.filters import FilterResult, TaskCheck

    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores to tell a crowded worker from one alone")
    assert out_of_device_memory(TaskCheck(ok=False, detail="RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED"))
    assert not out_of_device_memory(TaskCheck(ok=False, filters=[FilterResult(name="runs", ok=False, detail="shape")]))
    table = tmp_path / "tasks.jsonl"
    table.write_text(json.dumps({"name": "crowded_tanh", "code": CROWDED_TASK}) + "\n")
    out = tmp_path / "audit.jsonl"
    summary = audit(table, out, backend="cpu", workers=2, timeout_s=120)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 1 and summary.rows == 1
    assert not any("out of memory" in f.get("detail", "") for f in rows[0]["failures"]), rows[0]["failures"]
