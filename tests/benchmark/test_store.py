"""The benchmark's store (append-only, torn lines, resume checks), suite selection and
solution lookup: fast, no builds."""

from __future__ import annotations

import json

import pytest

from cuda_agent.benchmark import (
    DirectorySolutions,
    ResultStore,
    RunInfo,
    RunMismatch,
    TaskRecord,
    load_run,
    load_suite,
    solution_source,
)
from cuda_agent.benchmark.jobs import workspace_dirname
from cuda_agent.benchmark.solutions import SINGLE_FILE_BINDING, load_inline_import_lines, single_file_config
from cuda_agent.benchmark.suite import spread_per_level
from cuda_agent.evaluation import EvalConfig, EvalResult
from cuda_agent.tasks import Task, TaskError
from cuda_agent.workspace import create_workspace

TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(8)]
def get_init_inputs():
    return []
'''


def info(**kw) -> RunInfo:
    fields = dict(suite="s", solutions="x", backend="cpu", config=EvalConfig(backend="cpu"), tasks=["a", "b"])
    fields.update(kw)
    return RunInfo(**fields)


def test_store_appends_and_survives_a_torn_line(tmp_path) -> None:
    store = ResultStore(tmp_path)
    store.begin(info())
    store.append(TaskRecord(task="a", result=EvalResult(task="a", task_hash="h", backend="cpu", reward=1,
                                                        compiled=True, correct=True)))
    with store.path.open("a") as fh:  # a kill in the middle of writing the next record
        fh.write('{"task": "b", "status": "evalu')
    assert [r.task for r in store.records()] == ["a"]
    store.close()
    store = ResultStore(tmp_path)  # a resumed run: its first append cuts the torn line
    store.append(TaskRecord(task="b", status="no_solution", reason="none"))
    lines = store.path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["task"] in ("a", "b") for line in lines)
    assert store.latest()[("a", 0)].correct and store.latest()[("b", 0)].reward == -1


def test_resume_must_be_the_same_run(tmp_path) -> None:
    store = ResultStore(tmp_path)
    store.begin(info())
    store.begin(info(config=EvalConfig(backend="cpu", cache_dir="/elsewhere")))  # cache location may move
    with pytest.raises(RunMismatch, match="config"):
        store.begin(info(config=EvalConfig(backend="cpu", trials=3)))
    with pytest.raises(RunMismatch, match="tasks"):
        store.begin(info(tasks=["a"]))
    store.append(TaskRecord(task="a", status="no_solution"))
    store.begin(info(tasks=["a"]), fresh=True)
    assert store.records() == [] and store.info().tasks == ["a"]


def test_load_run_reads_a_directory_or_a_results_file(tmp_path) -> None:
    store = ResultStore(tmp_path)
    store.begin(info())
    store.append(TaskRecord(task="a", status="no_solution"))
    store.append(TaskRecord(task="a", status="harness_error"))  # a retried task: the newest record wins
    run, recs = load_run(tmp_path)
    assert run is not None and [r.status for r in recs] == ["harness_error"]
    assert load_run(store.path)[1][0].task == "a"
    with pytest.raises(FileNotFoundError):
        load_run(tmp_path / "missing")


def test_suite_selection(tmp_path) -> None:
    for level in (1, 2):
        d = tmp_path / "KernelBench" / f"level{level}"
        d.mkdir(parents=True)
        for i in range(1, 8):
            (d / f"{i}_T{i}.py").write_text(TASK)
    suite = load_suite(tmp_path, per_level=3)
    assert [t.name for t in suite.tasks] == ["level1/1_T1", "level1/4_T4", "level1/7_T7",
                                             "level2/1_T1", "level2/4_T4", "level2/7_T7"]
    assert [t.name for t in load_suite(tmp_path, levels=[2], only=["*_T2", "3_T3"]).tasks] == ["level2/2_T2",
                                                                                             "level2/3_T3"]
    listing = tmp_path / "tasks.txt"
    listing.write_text("# two tasks\nKernelBench/level1/2_T2.py\nKernelBench/level2/5_T5.py  # comment\n")
    assert [t.name for t in load_suite(listing).tasks] == ["level1/2_T2", "level2/5_T5"]
    listing.write_text("nope.py\n")
    with pytest.raises(TaskError, match="tasks.txt:1"):
        load_suite(listing)
    with pytest.raises(TaskError, match="no tasks left"):
        load_suite(tmp_path, levels=[3])
    assert [t.name for t in load_suite("examples", levels=[3]).tasks] == ["examples/mlp_block"]
    mixed = load_suite(tmp_path, per_level=2, interleave=True)
    assert [t.name for t in mixed.tasks] == ["level1/1_T1", "level2/1_T1", "level1/7_T7", "level2/7_T7"]
    one = spread_per_level(load_suite(tmp_path).tasks, 1)
    assert [t.name for t in one] == ["level1/1_T1", "level2/1_T1"]


def test_directory_solutions_lookup(tmp_path) -> None:
    task = Task.from_source(TASK, name="level1/19_ReLU", level=1, problem_id=19)
    other = Task.from_source(TASK, name="level1/20_LeakyReLU", level=1, problem_id=20)
    third = Task.from_source(TASK, name="level2/3_X", level=2, problem_id=3)
    ws = tmp_path / "level1" / "19_ReLU"
    (ws / "kernels").mkdir(parents=True)
    (ws / "model_new.py").write_text("# ws\n")
    (ws / "kernels" / "relu.cpp").write_text("// k\n")
    (ws / "kernels" / "relu_binding.cpp").write_text("// b\n")
    (tmp_path / "20_LeakyReLU.py").write_text("# single file\n")
    (tmp_path / "level_2_problem_3_sample_0_kernel.py").write_text("# kernelbench naming\n")
    src = solution_source(tmp_path)
    assert isinstance(src, DirectorySolutions)
    c = src.candidate(task, "cpu")
    assert c.mode == "workspace" and sorted(c.files) == ["kernels/relu.cpp", "kernels/relu_binding.cpp",
                                                         "model_new.py"]
    s = src.candidate(other, "cpu")
    assert s.mode == "single_file" and s.files["model_new.py"] == "# single file\n" and SINGLE_FILE_BINDING in s.files
    assert src.candidate(third, "cpu").files["model_new.py"] == "# kernelbench naming\n"
    assert src.candidate(Task.from_source(TASK, name="level3/1_Y", level=3, problem_id=1), "cpu") is None
    assert solution_source("examples").candidate(load_suite("examples").tasks[0], "cpu").mode == "workspace"
    assert solution_source("reference").candidate(task, "cpu").mode == "reference"
    # samples (pass@k): KernelBench's naming, then our <task>/sample_S.py; sample 0 keeps the plain names
    (tmp_path / "level_2_problem_3_sample_1_kernel.py").write_text("# sample 1\n")
    (tmp_path / "20_LeakyReLU").mkdir()
    (tmp_path / "20_LeakyReLU" / "sample_2.py").write_text("# sample 2\n")
    assert src.candidate(third, "cpu", 1).files["model_new.py"] == "# sample 1\n"
    assert src.candidate(other, "cpu", 2).files["model_new.py"] == "# sample 2\n"
    assert src.candidate(other, "cpu", 1) is None  # the plain 20_LeakyReLU.py is sample 0 only
    assert DirectorySolutions(tmp_path, sample=1).candidate(third, "cpu").files["model_new.py"] == "# sample 1\n"
    from cuda_agent.benchmark import Job

    jobs = [Job(task=third, backend="cpu", config=EvalConfig(), sample=s) for s in (0, 1)]
    assert jobs[0].key == "level2/3_X" and len({workspace_dirname(j.key) for j in jobs}) == 2


def test_suite_subset_precision_and_unmet_requirements(tmp_path) -> None:
    from cuda_agent.benchmark.suite import unmet_requirements

    root = tmp_path / "KernelBench"
    for level, pid in ((1, 1), (1, 2), (2, 8), (4, 1)):
        (root / f"level{level}").mkdir(parents=True, exist_ok=True)
        (root / f"level{level}" / f"{pid}_T.py").write_text(TASK)
    rep = load_suite(root, subset="representative", precision="fp16")
    assert [t.name for t in rep.tasks] == ["level1/1_T", "level2/8_T"]  # 1.2 and 4.1 are not in the list
    assert {t.precision for t in rep.tasks} == {"fp16"} and rep.subset == "representative"
    with pytest.raises(ValueError, match="unknown subset"):
        load_suite(root, subset="nope")
    # level 4's pattern: the model name travels through get_init_inputs() into Model.__init__
    l4 = """
import torch
from transformers import AutoModelForCausalLM
class Model(torch.nn.Module):
    def __init__(self, model_name):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name)
    def forward(self, x):
        return self.model(x).logits
model_name = "org/not-cached-model-cuda-agent"
def get_inputs():
    return [torch.randint(0, 10, (1, 8))]
def get_init_inputs():
    return [model_name]
"""
    why = unmet_requirements(Task.from_source(l4, name="level4/1_T"))
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        assert why is not None and "transformers" in why
    else:
        assert why is not None and "org/not-cached-model-cuda-agent (config + weights)" in why and "no network" in why
    missing = unmet_requirements(Task.from_source("import no_such_pkg_cuda_agent\n" + TASK, name="x"))
    assert missing is not None and "no_such_pkg_cuda_agent" in missing
    assert unmet_requirements(Task.from_source(TASK, name="ok")) is None


def test_workspace_dirnames_are_safe_and_distinct() -> None:
    a, b = workspace_dirname("level1/19_ReLU"), workspace_dirname("level1__19_ReLU")
    assert "/" not in a and a != b


SINGLE_FILE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
{extra}
ext = load_inline(name="x", cpp_sources="", functions=["f"])

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
'''


def test_single_file_relaxes_only_the_load_inline_import(tmp_path, cache_dir) -> None:
    task = Task.from_source(TASK, name="relu")
    ws = create_workspace(task, tmp_path / "ws", "cpu", cache_dir=cache_dir)
    base = EvalConfig(backend="cpu")
    (ws.root / "model_new.py").write_text(SINGLE_FILE.format(extra=""))
    relaxed = single_file_config(base, ws.root, "cpu", "cpu_extension")
    assert relaxed.guards.disabled_rules == ["forbidden-import"]
    assert relaxed.guards.torch_compute and relaxed.guards.static_checks  # the runtime guard stays on
    assert base.guards.disabled_rules == []  # the default is untouched
    (ws.root / "model_new.py").write_text(SINGLE_FILE.format(extra="import subprocess"))
    assert single_file_config(base, ws.root, "cpu", "cpu_extension").guards.disabled_rules == []
    assert load_inline_import_lines("from torch.utils import cpp_extension\nimport torch.utils.cpp_extension\n"
                                    "from torch.utils.cpp_extension import *\nimport os, torch.utils.cpp_extension\n"
                                    ) == {1, 2}


def test_cli_report_compare_export_and_errors(tmp_path) -> None:
    from typer.testing import CliRunner

    from cuda_agent.cli import app
    from cuda_agent.evaluation import TimeMs, TimingStats

    def res(name: str, correct: bool, speed: float) -> EvalResult:
        stats = TimingStats(median=1.0, mean=1.0, std=0.01, min=0.99, max=1.05, trials=50)
        cand = TimingStats(median=1 / speed, mean=1 / speed, std=0.01 / speed, min=0.99 / speed, max=1.05 / speed,
                           trials=50)
        return EvalResult(task=name, task_hash="h", backend="cpu", compiled=True, correct=correct,
                          reward=1 if correct else -1, speedup_vs_eager=speed if correct else None,
                          speedup_vs_compile=speed if correct else None, eager_stats=stats, compile_stats=stats,
                          candidate_stats=cand, time_ms=TimeMs(eager=1.0, compile=1.0, candidate=1 / speed))

    for run, ok_b in (("a", False), ("b", True)):
        store = ResultStore(tmp_path / run)
        store.begin(info(tasks=["level1/1_x", "level1/2_y"], levels={"level1/1_x": 1, "level1/2_y": 1}))
        store.append(TaskRecord(task="level1/1_x", level=1, result=res("level1/1_x", True, 1.0 if run == "a" else 2.0)))
        store.append(TaskRecord(task="level1/2_y", level=1, result=res("level1/2_y", ok_b, 1.0)))
    runner = CliRunner()
    r = runner.invoke(app, ["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert {d["task"]: d["change"] for d in data["tasks"]} == {"level1/1_x": "faster", "level1/2_y": "fixed"}
    r = runner.invoke(app, ["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.exit_code == 0 and "fixed" in r.output and "pass rate" in r.output
    r = runner.invoke(app, ["bench", "compare", str(tmp_path / "b"), str(tmp_path / "b")])  # a run with itself
    assert r.exit_code == 0 and "no differences in 2 task(s) (--all lists them)" in r.output, r.output
    r = runner.invoke(app, ["bench", "compare", str(tmp_path / "b"), str(tmp_path / "b"), "--all"])
    assert "level1/1_x" in r.output and "level1/2_y" in r.output, r.output  # names never cut
    r = runner.invoke(app, ["bench", "report", str(tmp_path / "b"), "--format", "md", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "b" / "report.md").is_file() and not (tmp_path / "b" / "report.html").exists()
    r = runner.invoke(app, ["bench", "export-timing", str(tmp_path / "b"), str(tmp_path / "timing")])
    assert r.exit_code == 0 and (tmp_path / "timing" / "baseline_time_torch.json").is_file()
    assert json.loads((tmp_path / "timing" / "baseline_time_torch.json").read_text())["level1"]["1_x.py"]["mean"] == 1.0
    r = runner.invoke(app, ["bench", "run", "examples", "--solutions", "examples", "--policy", "x:y", "--out", "o"])
    assert r.exit_code == 2 and "exactly one" in r.output
    r = runner.invoke(app, ["bench", "report", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "no such" in r.output
    for bad, says in ((["--subset", "bogus"], "unknown subset"), (["--precision", "fp8"], "unknown precision"),
                      (["--tolerance", "loose"], "unknown tolerance profile")):
        r = runner.invoke(app, ["bench", "run", "examples", "--solutions", "reference", "--out",
                                str(tmp_path / "o"), *bad])
        assert r.exit_code == 2 and says in r.output, r.output
