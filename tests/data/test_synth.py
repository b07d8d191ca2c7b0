"""End to end on the CPU: synthesise a few tasks, resume, load them as Tasks, screen a copy of
them as an evaluation set, audit them, and report."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cuda_agent.data.audit import audit
from cuda_agent.data.catalogue import Catalogue, build_catalogue
from cuda_agent.data.config import FilterConfig, SynthConfig
from cuda_agent.data.filters import Reason
from cuda_agent.data.report import audit_report, synth_report
from cuda_agent.data.store import StoreError
from cuda_agent.data.synth import synthesize
from cuda_agent.tasks import load_tasks

# Wide window: the CI box is small and shared; compile check through dynamo's cheap 'eager' backend.
FILTERS = FilterConfig(window_ms=(0.01, 200.0), compile_backend="eager")


@pytest.fixture(scope="module")
def catalogue(cache_dir) -> Catalogue:
    return build_catalogue(include_transformers=False)  # cached by test_data_catalogue's session run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, catalogue: Catalogue) -> tuple[Path, SynthConfig]:
    out = tmp_path_factory.mktemp("synth") / "run"
    config = SynthConfig(count=2, seed=5, backend="cpu", filters=FILTERS, max_candidates=40, parquet_every=1)
    stats = synthesize(out, config, catalogue=catalogue)
    assert stats.accepted == 2, stats.as_dict()
    return out, config


def test_output_is_ops6k_schema_and_loads_as_tasks(run: tuple[Path, SynthConfig]) -> None:
    out, _ = run
    for source in (out / "tasks.parquet", out / "tasks.jsonl"):
        tasks = load_tasks(source)
        assert len(tasks) == 2
        for task in tasks:
            assert task.ops and task.data_source == f"torch#{len(task.ops)}"
            assert task.name.startswith("synth-5-")
            assert task.metadata["runtime_ms"] > 0 and json.loads(task.metadata["input_shapes"])
    table = pq.read_table(out / "tasks.parquet")
    assert {"ops", "data_source", "code"} <= set(table.column_names)
    assert table.column("ops").type == "string"  # list text, as in the published data set
    candidates = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
    assert sum(c["status"] == "accepted" for c in candidates) == 2
    assert all(c["reason"] for c in candidates if c["status"] == "rejected")  # every reject explained


def test_resume_continues_without_redoing_candidates(run: tuple[Path, SynthConfig], catalogue: Catalogue) -> None:
    out, config = run
    before = [json.loads(line)["index"] for line in (out / "candidates.jsonl").read_text().splitlines()]
    stats = synthesize(out, config.model_copy(update={"count": 3}), catalogue=catalogue)
    after = [json.loads(line)["index"] for line in (out / "candidates.jsonl").read_text().splitlines()]
    assert after[:len(before)] == before and len(set(after)) == len(after)
    assert stats.accepted == 3 and stats.resumed == len(before)
    with pytest.raises(StoreError, match="other settings"):
        synthesize(out, config.model_copy(update={"seed": 6}), catalogue=catalogue)


def test_same_seed_same_plans(run: tuple[Path, SynthConfig], catalogue: Catalogue, tmp_path: Path) -> None:
    """The first candidates of a second run with the same seed compose the same operators."""
    out, config = run
    first = [json.loads(line)["ops"] for line in (out / "candidates.jsonl").read_text().splitlines()][:3]
    again = synthesize(tmp_path / "again", config.model_copy(update={"count": 1, "max_candidates": 3,
                                                                     "filters": FilterConfig(compile=False)}),
                       catalogue=catalogue)
    del again
    second = [json.loads(line)["ops"] for line in (tmp_path / "again" / "candidates.jsonl").read_text().splitlines()]
    assert second == first[:len(second)]


def test_eval_set_screen_rejects_copies(run: tuple[Path, SynthConfig], catalogue: Catalogue, tmp_path: Path) -> None:
    """Re-running the same seed against the first run's tasks as the evaluation set: every task
    accepted before is now a near-copy of an evaluation task, rejected before it executes."""
    out, config = run
    accepted = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()
                if json.loads(line)["status"] == "accepted"][:2]
    last = max(c["index"] for c in accepted)
    second = tmp_path / "screened"
    synthesize(second, config.model_copy(update={"eval_sets": [str(out / "tasks.jsonl")], "max_candidates": last + 1}),
               catalogue=catalogue)
    by_index = {json.loads(line)["index"]: json.loads(line) for line in (second / "candidates.jsonl").read_text().splitlines()}
    for c in accepted:
        assert by_index[c["index"]]["reason"] == Reason.SIMILAR_TO_EVAL
        assert by_index[c["index"]]["filters"] == []  # rejected before any execution


def test_audit_reports_per_row_and_total(run: tuple[Path, SynthConfig], tmp_path: Path) -> None:
    out, _ = run
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()][:2]
    good = rows[0]
    bad = dict(good, name="bad-fixed", code=good["code"].replace("torch.randn(", "torch.ones(")
               .replace("torch.rand(", "torch.ones("))
    dup = dict(good, name="dup")
    broken = dict(good, name="broken", code=good["code"].replace("def get_inputs", "def get_inputs_"))
    table = tmp_path / "mixed.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in (good, bad, dup, broken)))
    result = tmp_path / "audit.jsonl"
    summary = audit(table, result, backend="cpu", filters=FILTERS)
    per_row = {json.loads(line)["name"]: json.loads(line) for line in result.read_text().splitlines()}
    assert per_row[good["name"]]["ok"], per_row[good["name"]]
    assert {f["reason"] for f in per_row["bad-fixed"]["failures"]} >= {Reason.FIXED_INPUTS}
    assert {f["reason"] for f in per_row["dup"]["failures"]} == {Reason.NEAR_DUPLICATE}
    assert any(f["reason"] == Reason.LOAD_ERROR for r in per_row.values() for f in r["failures"])
    assert summary.rows == 4 and summary.passed == 1
    assert summary.failed_by_reason[Reason.NEAR_DUPLICATE] >= 1
    again = audit(table, result, backend="cpu", filters=FILTERS)  # resumes: nothing left to run
    assert again.rows == 4 and again.seconds < summary.seconds
    assert "| near_duplicate |" in audit_report(result).read_text()


def test_report_and_cli(run: tuple[Path, SynthConfig]) -> None:
    from cuda_agent.cli import app

    out, _ = run
    report = synth_report(out)
    text = report.read_text()
    assert "accepted tasks" in text and "## Reject reasons" in text and "## Composition sizes" in text
    pytest.importorskip("matplotlib")
    assert (out / "plots" / "operators.png").is_file() and "![runtime](plots/runtime.png)" in text
    runner = CliRunner()
    res = runner.invoke(app, ["data", "report", str(out)])
    assert res.exit_code == 0, res.output
    task_file = out / "one.py"
    task_file.write_text(json.loads((out / "tasks.jsonl").read_text().splitlines()[0])["code"])
    res = runner.invoke(app, ["data", "similarity", str(task_file), str(out / "tasks.jsonl"), "--top", "1"])
    assert res.exit_code == 1 and res.output.startswith("1.000"), res.output  # flagged: a copy of a row
    assert "FLAGGED one.py: ast_similarity" in res.output
    res = runner.invoke(app, ["data", "synth", str(out), "--window", "5", "1"])
    assert res.exit_code == 2 and "window_ms" in res.output


def test_llm_generator_runs_model_code_through_the_filters(catalogue: Catalogue, tmp_path: Path) -> None:
    """generator='llm' with a scripted policy: the first reply is not code, the second is a good task."""
    pytest.importorskip("cuda_agent.agent.policies")
    from cuda_agent.agent.policies import ScriptedPolicy, reply

    good = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, n):\n"
            "        super().__init__()\n        self.linear = nn.Linear(n, n)\n\n    def forward(self, x):\n"
            "        return torch.tanh(self.linear(x))\n\ndef get_inputs():\n    return [torch.randn(16, 64)]\n\n"
            "def get_init_inputs():\n    return [64]\n")
    policy = ScriptedPolicy(steps=[reply("I cannot do that."), reply(f"Here:\n```python\n{good}```")])
    config = SynthConfig(count=1, seed=2, backend="cpu", generator="llm", max_candidates=2,
                         filters=FilterConfig(window_ms=(0.0, 500.0), compile=False))
    stats = synthesize(tmp_path / "llm", config, catalogue=catalogue, policy=policy)
    assert stats.accepted == 1 and stats.reasons == {Reason.LOAD_ERROR: 1}
    task = load_tasks(tmp_path / "llm" / "tasks.jsonl")[0]
    assert "torch.tanh" in task.source and task.metadata["generator"] == "llm"
