"""Tasks with many workloads: applying a workload to the source, the task record, the speed
claim over several workloads, and (CPU judge) every workload verified and timed, with a
held-out one that a shape-hard-coding kernel fails without the shape showing in the record."""

from __future__ import annotations

import hashlib
import json
import math
import random

import pytest
from pydantic import ValidationError

from cuda_agent.evaluation import evaluate
from cuda_agent.evaluation.records import SpeedupSummary
from cuda_agent.evaluation.reward import faster_over_workloads
from cuda_agent.evaluation.timing import clearly_faster
from cuda_agent.tasks import Task, Workload, apply_workload, load_tasks
from cuda_agent.workspace import create_workspace, open_workspace

from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW

SOURCE = '''import torch
import torch.nn as nn

# rows and cols are set per workload
rows = 64
cols: int = 1024
shape = (rows, cols)  # derived at import: must follow the workload


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(*shape)]


def get_init_inputs():
    return []
'''


def _task(**fields) -> Task:
    return Task.from_source(SOURCE, name="relu_shapes", **fields)


def test_apply_workload_rewrites_only_the_named_values():
    out = apply_workload(SOURCE, Workload(name="w", params={"rows": 7, "cols": 33}))
    assert "rows = 7\n" in out and "cols: int = 33\n" in out
    assert "# rows and cols are set per workload" in out and "shape = (rows, cols)" in out
    namespace: dict = {}
    exec(compile(out, "<w>", "exec"), namespace)
    assert namespace["shape"] == (7, 33)
    assert tuple(namespace["get_inputs"]()[0].shape) == (7, 33)


def test_an_empty_workload_is_the_source_byte_for_byte():
    assert apply_workload(SOURCE, Workload(name="w")) is SOURCE
    task = _task()
    assert task.evaluation_workloads() == [(Workload(name="default"), False)]
    assert task.content_hash == hashlib.sha256(SOURCE.encode()).hexdigest()


def test_strings_and_lists_are_literals_but_names_must_exist():
    out = apply_workload(SOURCE, Workload(name="w", params={"rows": 3, "cols": 5}))
    assert "rows = 3" in out
    with pytest.raises(ValueError, match="not assigned at the top level"):
        apply_workload(SOURCE, Workload(name="w", params={"batch": 3}))
    with pytest.raises(ValueError, match="not a plain literal"):
        apply_workload(SOURCE, Workload(name="w", params={"rows": float("nan")}))


def test_task_validation_names_the_problem():
    with pytest.raises(ValidationError, match="not assigned at the top level"):
        _task(workloads=[Workload(name="a", params={"depth": 2})])
    with pytest.raises(ValidationError, match="names repeat"):
        _task(workloads=[Workload(name="a", params={"rows": 2})], held_out=[Workload(name="a", params={"rows": 3})])
    with pytest.raises(ValidationError, match="equals a visible one"):
        _task(workloads=[Workload(name="a", params={"rows": 2})], held_out=[Workload(name="b", params={"rows": 2})])


def test_for_agent_drops_held_out_and_keeps_the_identity(tmp_path):
    task = _task(workloads=[Workload(name="a", params={"rows": 2})],
                 held_out=[Workload(name="secret", params={"rows": 4099, "cols": 3001})])
    agent = task.for_agent()
    assert agent.held_out == [] and agent.workloads == task.workloads
    assert agent.content_hash == task.content_hash
    assert task.content_hash != _task().content_hash  # visible workloads are part of the identity
    ws = create_workspace(agent, tmp_path / "ws", "cpu", cache_dir=tmp_path / "cache")
    text = "".join(p.read_text(errors="ignore") for p in ws.root.rglob("*") if p.is_file())
    assert "4099" not in text and "3001" not in text and "secret" not in text
    assert [w for w, held in task.evaluation_workloads() if held] == task.held_out


def test_a_workspace_made_from_the_full_task_shows_the_agent_no_held_out_workload(tmp_path):
    """The trusted record outside keeps the held-out workloads (every evaluation checks them);
    nothing inside the workspace, which the agent reads, names them."""
    task = _task(workloads=[Workload(name="a", params={"rows": 2})],
                 held_out=[Workload(name="secret", params={"rows": 4099, "cols": 3001})])
    ws = create_workspace(task, tmp_path / "ws", "cpu", cache_dir=tmp_path / "cache")
    text = "".join(p.read_text(errors="ignore") for p in ws.root.rglob("*") if p.is_file())
    assert "4099" not in text and "3001" not in text and "secret" not in text
    assert open_workspace(ws.root, cache_dir=tmp_path / "cache").task.held_out == task.held_out


def test_table_rows_carry_workloads(tmp_path):
    row = {"code": SOURCE, "name": "t", "workloads": json.dumps([{"name": "a", "params": {"rows": 8}}]),
           "held_out": [{"name": "h", "params": {"rows": 9}}]}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = load_tasks(path)
    assert task.workloads == [Workload(name="a", params={"rows": 8})]
    assert task.held_out == [Workload(name="h", params={"rows": 9})]
    assert "workloads" not in task.metadata


def test_speed_claim_over_workloads():
    rng = random.Random(0)
    fast = [0.5 + 0.01 * rng.random() for _ in range(40)]
    slow = [1.0 + 0.01 * rng.random() for _ in range(40)]
    noisy = [0.90 + 0.2 * rng.random() for _ in range(40)]
    for one in (fast, slow, noisy):  # one workload: the single-workload rule, unchanged
        assert faster_over_workloads([one], 0.05, 0.99) == clearly_faster(one, 0.05, 0.99)
    assert faster_over_workloads([fast, fast], 0.05, 0.99)
    twice_slower = [2 * r for r in slow]
    assert not faster_over_workloads([fast, twice_slower], 0.05, 0.99)  # 2x faster on one, 2x slower on the other
    assert faster_over_workloads([fast, slow, slow], 0.05, 0.99)  # geometric mean of the bounds ~0.80
    assert not faster_over_workloads([fast, []], 0.05, 0.99)  # an untimed workload proves nothing
    assert not faster_over_workloads([], 0.05, 0.99)


def test_speedup_summary():
    s = SpeedupSummary.of([2.0, 0.5, 1.0])
    assert math.isclose(s.geomean, 1.0) and math.isclose(s.mean, 3.5 / 3) and s.worst == 0.5 and s.workloads == 3
    with pytest.raises(ValueError):
        SpeedupSummary.of([])


# ---- the judge, on the CPU ------------------------------------------------------------------
HARD_CODED_KERNEL = '''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  const int64_t seen = 64 * 1024;  // the largest input the agent was shown
  const int64_t m = n < seen ? n : seen;
  #pragma omp parallel for simd
  for (int64_t i = 0; i < m; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''


def _multi_task(task_source: str = SOURCE) -> Task:
    return Task.from_source(task_source, name="relu_shapes",
                            workloads=[Workload(name="64x1024", params={}),
                                       Workload(name="16x100", params={"rows": 16, "cols": 100})],
                            held_out=[Workload(name="hidden", params={"rows": 129, "cols": 1031})])


def _workspace(tmp_path, cache_dir, task: Task, kernel: str):
    ws = create_workspace(task.for_agent(), tmp_path / "ws", "cpu", cache_dir=cache_dir, overwrite=True)
    (ws.root / "model_new.py").write_text(RELU_MODEL_NEW)
    (ws.root / "kernels" / "relu.cpp").write_text(kernel)
    (ws.root / "kernels" / "relu_binding.cpp").write_text(RELU_BINDING)
    return ws


def _slack(cfg):
    """Three workloads in one evaluation: room for a loaded 2-core box."""
    return cfg.model_copy(update={"worker_timeout_s": 600.0})


def test_every_workload_is_verified_and_timed(tmp_path, cache_dir, fast_config):
    fast_config = _slack(fast_config)
    task = _multi_task()
    ws = _workspace(tmp_path, cache_dir, task, RELU_KERNEL)
    result = evaluate(ws, fast_config, task=task)
    assert result.correct, result.reason
    assert [w.name for w in result.workloads] == ["64x1024", "16x100", "held-out 1"]
    assert all(w.correct and w.time_ms.candidate for w in result.workloads)
    assert result.workloads[2].params == {} and result.workloads[1].params == {"rows": 16, "cols": 100}
    eager = result.speedups["eager"]
    speedups = [w.speedup_vs_eager for w in result.workloads]
    assert eager.workloads == 3 and math.isclose(eager.worst, min(speedups))
    assert math.isclose(eager.mean, sum(speedups) / 3)
    assert math.isclose(result.speedup_vs_eager, eager.geomean)
    assert "over 3 workloads" in result.reason and result.reward >= 1
    assert len(result.trials) == 2 * (fast_config.trials + 1)  # the visible workloads' checks only (+ a secret set each)
    # one of several: its baselines timed alone whatever its speed (`JudgeRequest.sole_workload`): a baseline slowed
    # on any workload counts in the joint claim (a review of issue 23's fifteenth session)
    assert result.phases.get("solo", 0) > 0, result.phases


def _strings(value):
    """Every string in a JSON value, keys included; hashes and paths left out (their hex digits
    and random names are noise)."""
    if isinstance(value, str):
        if "/" not in value:
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            if "hash" not in k:
                yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_a_hard_coded_shape_fails_on_the_held_out_workload_without_showing_it(tmp_path, cache_dir, fast_config):
    fast_config = _slack(fast_config)
    task = _multi_task()
    ws = _workspace(tmp_path, cache_dir, task, HARD_CODED_KERNEL)
    shown = evaluate(ws, fast_config, task=task.for_agent())  # what the agent can check: it passes
    assert shown.correct, shown.reason
    result = evaluate(ws, fast_config, task=task)
    assert not result.correct and result.reward == -1
    assert "held-out workload" in result.reason
    record = result.model_dump_json()
    assert result.workloads[-1].params == {}
    texts = list(_strings(json.loads(record)))  # names, reasons, logs (numbers are times and counts)
    assert not [t for t in texts if "hidden" in t or "129" in t or "1031" in t]
    assert result.workloads[-1].held_out and not result.workloads[-1].correct
