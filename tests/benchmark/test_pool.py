"""End-to-end benchmark runs on CPU: the local pool over the bundled examples (all three
reports), a driver killed with SIGKILL and resumed, a local 2-CPU Ray cluster, a KernelBench
style single-file (load_inline) solution, and the policy seam with a scripted episode."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.benchmark import (
    LocalPool,
    ResultStore,
    TaskRecord,
    build_report,
    device_slots,
    load_suite,
    run_benchmark,
    solution_source,
    to_markdown,
    write_reports,
)
from cuda_agent.evaluation import EvalConfig, TimingConfig
from cuda_agent.examples import get_example

from tests.conftest import RELU_TASK

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
KILL_SUBSET = ["layernorm", "conv2d_relu", "mlp_block"]
RAY_SUBSET = ["layernorm", "conv2d_relu", "mlp_block"]
# Timing cut to the minimum (CI has 2 cores): these tests check the harness, not speed.
TIMING = TimingConfig(budget_s=0.05, min_trials=5, floor_trials=5, warmup_ms=1, host_trials=3)
# the same settings as CLI flags, for the subprocess runs
CLI_FLAGS = ["--backend", "cpu", "--trials", "2", "--no-compile-baseline", "--timing-budget", "0.05",
             "--min-rounds", "5", "--warmup-ms", "1", "--build-workers", "1", "--no-report"]


def fast_config(cache_dir: Path) -> EvalConfig:
    return EvalConfig(backend="cpu", trials=2, compile_mode=None, memory_limit_gb=3.0, worker_timeout_s=300,
                      cache_dir=str(cache_dir), timing=TIMING)


def deterministic(records: list[TaskRecord]) -> dict[str, tuple]:
    """What must not depend on timing noise or on how the run was scheduled."""
    return {r.task: (r.level, r.status, r.mode, r.compiled, r.correct, r.result.stage if r.result else None)
            for r in records}


@pytest.fixture(scope="module")
def examples_run(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> tuple[Path, list[TaskRecord]]:
    out = tmp_path_factory.mktemp("bench") / "examples"
    pool = LocalPool(device_slots("cpu", cpu_slots=2), build_workers=1)
    records = run_benchmark(load_suite("examples"), out, pool, backend="cpu", config=fast_config(cache_dir),
                            solutions=solution_source("examples"))
    return out, records


def test_local_pool_over_examples_writes_all_three_reports(examples_run) -> None:
    out, records = examples_run
    assert len(records) == 8
    assert all(r.status == "evaluated" and r.correct for r in records), \
        [(r.task, r.summary) for r in records if not r.correct]
    assert {r.slot for r in records} == {"cpu:0", "cpu:1"}  # both evaluation slots took work
    assert all(r.speedup_vs_eager and r.result.time_ms.candidate for r in records)
    info = ResultStore(out).info()
    paths = write_reports(build_report(records, info), out)
    md = (out / "report.md").read_text()
    assert "| overall | 8 | 100.0% / 98.8% |" in md and "examples/mlp_block" in md
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    import json

    data = json.loads((out / "report.json").read_text())
    assert data["metrics"]["overall"]["pass_rate"] == 1.0 and len(data["tasks"]) == 8
    assert [m["tasks"] for m in data["metrics"]["levels"]] == [4, 3, 1]
    assert {p.name for p in paths} == {"report.md", "report.html", "report.json"}


def _children(pid: int) -> set[int]:
    kids: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            pass
    return kids


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")
def test_driver_killed_midway_then_resumed_equals_an_uninterrupted_run(examples_run, tmp_path, cache_dir) -> None:
    out = tmp_path / "killed"
    only = [f for name in KILL_SUBSET for f in ("--only", name)]
    cmd = [sys.executable, "-m", "cuda_agent", "bench", "run", "examples", "--solutions", "examples", "--out",
           str(out), *only, *CLI_FLAGS]
    env = {**os.environ, "CUDA_AGENT_CACHE": str(cache_dir)}
    driver = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and driver.poll() is None:
        if results.is_file() and len(results.read_bytes().splitlines()) >= 1:
            break
        time.sleep(0.2)
    assert driver.poll() is None, driver.stderr.read().decode()[-3000:] if driver.stderr else ""
    slots = _children(driver.pid)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    before = results.read_bytes()
    n_before = len(before.splitlines())
    assert 1 <= n_before < len(KILL_SUBSET)
    time.sleep(1.0)
    assert not [p for p in slots if _alive(p)], "a slot process outlived the killed driver"

    resumed = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = results.read_bytes()
    assert after.startswith(before)  # nothing finished was lost or rewritten
    store = ResultStore(out)
    records = store.records()
    assert sorted(r.task for r in records) == sorted(f"examples/{n}" for n in KILL_SUBSET)  # each exactly once
    assert len({r.session for r in records}) == 2
    uninterrupted = {r.task: v for r, v in zip(examples_run[1], deterministic(examples_run[1]).values())
                     if r.task in {f"examples/{n}" for n in KILL_SUBSET}}
    assert deterministic(records) == uninterrupted


def test_ray_cluster_of_two_workers_matches_the_local_pool(examples_run, tmp_path, cache_dir) -> None:
    ray = pytest.importorskip("ray")
    from cuda_agent.benchmark import RayPool

    suite = load_suite("examples", only=RAY_SUBSET)
    try:
        records = run_benchmark(suite, tmp_path / "ray", RayPool("cpu", num_cpus=2), backend="cpu",
                                config=fast_config(cache_dir), solutions=solution_source("examples"))
    finally:
        ray.shutdown()
    assert all(r.slot == "ray:build" or re.fullmatch(r"ray:[0-9a-f]{8}:cpu", r.slot) for r in records)
    local = deterministic([r for r in examples_run[1] if r.task in {t.name for t in suite.tasks}])
    assert deterministic(records) == local
    assert all(r.correct and r.speedup_vs_eager for r in records)


# ---- a KernelBench-style single-file solution, a forbidden one, and a missing one ----------------
LOAD_INLINE_RELU = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const float* a = x.data_ptr<float>();
  float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
  return y;
}
"""
relu_ext = load_inline(name="bench_test_relu_inline", cpp_sources=source, functions=["relu_forward"],
                       extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
'''


def test_single_file_load_inline_solutions(tmp_path, cache_dir) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("relu", "relu_sneaky", "relu_unsolved"):
        (tasks / f"{name}.py").write_text(RELU_TASK)
    sols = tmp_path / "solutions"
    sols.mkdir()
    (sols / "relu.py").write_text(LOAD_INLINE_RELU)
    (sols / "relu_sneaky.py").write_text("import os\n" + LOAD_INLINE_RELU)  # os is still forbidden
    records = run_benchmark(load_suite(tasks), tmp_path / "run", LocalPool(device_slots("cpu"), build_workers=1),
                            backend="cpu", config=fast_config(cache_dir), solutions=solution_source(sols))
    by = {r.task: r for r in records}
    ok = by["relu"]
    assert ok.mode == "single_file" and ok.correct, ok.summary + (ok.result.worker_log[-1500:] if ok.result else "")
    sneaky = by["relu_sneaky"]
    assert sneaky.slot == "build" and sneaky.result.stage == "guard" and sneaky.reward == -1
    assert "forbidden-import" in sneaky.result.reason and "import os" in sneaky.result.reason
    assert by["relu_unsolved"].status == "no_solution" and by["relu_unsolved"].reward == -1


HINGE_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))

def get_inputs():
    return [torch.rand(256, 64), torch.randint(0, 2, (256, 1)).float() * 2 - 1]

def get_init_inputs():
    return []
'''


def test_reference_as_solution_is_the_harness_check(tmp_path, cache_dir) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    # KernelBench style: 245 of its 250 tasks call super(Model, self).__init__()
    (tasks / "relu.py").write_text(RELU_TASK.replace("super().__init__()", "super(Model, self).__init__()"))
    (tasks / "hinge.py").write_text(HINGE_TASK)  # a 0-dim output, as KernelBench's loss tasks have
    records = run_benchmark(load_suite(tasks), tmp_path / "run", LocalPool(device_slots("cpu"), build_workers=2),
                            backend="cpu", config=fast_config(cache_dir), solutions=solution_source("reference"))
    assert len(records) == 2
    for r in records:
        assert r.mode == "reference" and r.correct and r.reward == 1, r.summary
        # never far faster than itself, unless the judge's own interval reaches 1: on a shared 2-core
        # box a ~20 us op's few rounds scatter (CI once printed 2.94x with reward 1, within noise);
        # a harness that timed nothing lands far above 1 with an interval as far. No tight lower
        # bound: there a ~20 us op can cost the candidate's client more (docs/guards.md, "Costs")
        low, _ = r.result.speedup_interval["eager"]
        assert 0.05 < r.speedup_vs_eager and (r.speedup_vs_eager < 2.0 or low <= 1.0), (r.speedup_vs_eager, low)
    assert ResultStore(tmp_path / "run").info().config.guards.static_checks  # relaxed per job, not in the run


def test_reference_twice_has_no_fast_1_and_compare_calls_nothing_faster(tmp_path, cache_dir) -> None:
    """The issue's check on CPU: the reference as its own solution, run twice. Point speedups
    scatter far from 1.0 on a shared box; the noise-aware fast_p and `compare` must not turn
    that into speed. A task needing a package this machine lacks is skipped, not charged."""
    from cuda_agent.benchmark import compare_runs, compute_metrics

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "relu.py").write_text(RELU_TASK)
    (tasks / "tanh.py").write_text(RELU_TASK.replace("torch.relu(x)", "torch.tanh(x) * 2"))
    (tasks / "hinge.py").write_text(HINGE_TASK)
    (tasks / "needs_pkg.py").write_text("import not_a_real_package_cuda_agent\n" + RELU_TASK)
    # 12 rounds, the fewest whose 99% interval leaves out the extremes: at the module's 5 the interval is the whole
    # range, and the reference as its own solution had all 5 rounds under 0.95 by chance (in CI and on the CPU box)
    config = fast_config(cache_dir)
    config = config.model_copy(update={"timing": config.timing.model_copy(update={"min_trials": 12,
                                                                                   "floor_trials": 12})})
    runs = []
    for name in ("a", "b"):
        recs = run_benchmark(load_suite(tasks), tmp_path / name, LocalPool(device_slots("cpu"), build_workers=1),
                             backend="cpu", config=config, solutions=solution_source("reference"))
        runs.append(recs)
        by = {r.task: r for r in recs}
        assert by["needs_pkg"].status == "skipped" and "not_a_real_package_cuda_agent" in by["needs_pkg"].reason
        m = compute_metrics(recs).overall
        assert (m.tasks, m.skipped, m.pass_rate) == (3, 1, 1.0)
        assert m.fast_p_eager["1"] == 0.0 and m.faster_than_eager_rate == 0.0
    cmp = compare_runs(*runs)
    assert not {"faster", "slower"} & set(cmp.counts), cmp.counts
    assert cmp.counts.get("skipped") == 1


# ---- the policy seam ------------------------------------------------------------------------------
def scripted_episode(*, task, workspace, backend, config, **options):
    """A stand-in policy: writes the bundled example's solution, or fails on request."""
    if options.get("fail_on") and task.name.endswith(options["fail_on"]):
        raise RuntimeError("the model API went away")
    get_example(task.name.split("/")[-1]).install_solution(Path(workspace), backend)
    return {"tokens": 1234, "turns": 7, "stop_reason": "done"}


def test_policy_runs_episodes_then_evaluates(tmp_path, cache_dir, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    suite = load_suite("examples", only=["conv2d_relu", "mlp_block"])
    records = run_benchmark(suite, tmp_path / "policy", LocalPool(device_slots("cpu"), build_workers=1),
                            backend="cpu", config=fast_config(cache_dir),
                            policy="tests.benchmark.test_pool:scripted_episode", policy_options={"fail_on": "mlp_block"})
    by = {r.task: r for r in records}
    good, bad = by["examples/conv2d_relu"], by["examples/mlp_block"]
    assert good.mode == "policy" and good.correct and good.episode.tokens == 1234 and good.episode.turns == 7
    assert bad.status == "episode_failed" and "model API went away" in bad.reason and bad.reward == -1
    report = build_report(records, ResultStore(tmp_path / "policy").info())
    assert report.metrics.overall.episodes == 1 and report.metrics.overall.tokens_total == 1234


def test_agent_policy_through_the_agent_layer(tmp_path, cache_dir) -> None:
    """`--policy agent:scripted:<replies>`: the real agent loop (a scripted policy writes the
    example's CPU solution with its tools); the benchmark evaluates the final workspace."""
    import json

    solution = get_example("conv2d_relu").solution_dir("cpu")
    writes = [{"name": "write_file", "arguments": {"path": str(p.relative_to(solution)), "content": p.read_text()}}
              for p in [solution / "model_new.py", *sorted((solution / "kernels").iterdir())]]
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([{"content": "writing the kernel", "tool_calls": writes}, {"content": "done"}]))
    suite = load_suite("examples", only=["conv2d_relu"])
    (r,) = run_benchmark(suite, tmp_path / "agent", LocalPool(device_slots("cpu"), build_workers=1), backend="cpu",
                         config=fast_config(cache_dir), policy=f"agent:scripted:{script}",
                         policy_options={"max_turns": 4, "evaluate_on_verify": False})
    assert r.mode == "policy" and r.correct, r.summary
    assert r.episode.turns == 2 and r.episode.stop_reason == "done"
    assert r.episode.trajectory and Path(r.episode.trajectory).is_file()
