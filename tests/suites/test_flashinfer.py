"""FlashInfer-Bench as a suite: its dataset folder becomes multi-workload tasks, our workspace
solution goes out as Solution JSON that its own loader accepts, its Traces give baselines, and
its score (arithmetic mean of per-workload speedups) is computed beside ours. CPU only; the
end-to-end GPU run is bench/fib_gpu.sh."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

fib = pytest.importorskip("flashinfer_bench.data")

from cuda_agent.evaluation.records import EvalResult, TimeMs, WorkloadResult  # noqa: E402
from cuda_agent.suites.flashinfer import (  # noqa: E402
    definition_task,
    export_solution,
    fib_score,
    flashinfer_tasks,
    load_trace_set,
    trace_baseline,
    workload_uuid,
    write_solution,
)
from cuda_agent.tasks import TaskError  # noqa: E402
from cuda_agent.workspace import create_workspace  # noqa: E402

FIXTURE = Path(__file__).parents[1] / "fixtures" / "flashinfer_trace"
SOLUTION = Path(__file__).parents[2] / "src" / "cuda_agent" / "suites" / "solutions" / "fused_add_rmsnorm_h4096" / "cuda"
DEF = "fused_add_rmsnorm_h4096"


def _run_source(source: str) -> tuple[list[torch.Tensor], torch.Tensor]:
    scope: dict = {}
    exec(compile(source, "<task>", "exec"), scope)
    torch.manual_seed(0)
    inputs = scope["get_inputs"]()
    return inputs, scope["Model"]()(*inputs)


def test_the_dataset_becomes_a_multi_workload_task():
    loaded = flashinfer_tasks(FIXTURE, max_workloads=3)
    assert not loaded.rejected and len(loaded) == 1
    task = loaded[0]
    assert task.name == f"flashinfer/{DEF}" and task.metadata["definition"] == DEF
    assert len(task.workloads) == 3 and len(task.held_out) == 1
    trace_set = load_trace_set(FIXTURE)
    uuids = {t.workload.uuid: t.workload.axes["batch_size"] for t in trace_set.workloads[DEF]}
    definition = trace_set.definitions[DEF]
    for workload, _ in task.evaluation_workloads():
        batch = uuids[workload_uuid(workload)]
        inputs, out = _run_source(task.workload_source(workload)) if batch <= 32 else (None, None)
        if inputs is None:
            continue
        assert [list(x.shape) for x in inputs] == [list(s) for s in definition.get_input_shapes({"batch_size": batch})]
        assert all(x.dtype == torch.bfloat16 for x in inputs) and out.shape == (batch, 4096)
        scope: dict = {}
        exec(definition.reference, scope)
        assert torch.equal(out, scope["run"](*inputs))  # the Model is the definition's reference


def test_the_held_out_choice_is_stable_and_not_the_shown_ones():
    a = flashinfer_tasks(FIXTURE)[0]
    b = flashinfer_tasks(FIXTURE, held_out=2)[0]
    assert a.held_out[0] in b.held_out  # by uuid hash: holding out more keeps the first
    assert not {w.digest for w in a.held_out} & {w.digest for w in a.workloads}
    assert a.workload_source(a.workloads[0]) == a.source  # model.py shows the first shown workload


def _definition(**inputs_extra):
    return fib.Definition.model_validate({
        "name": "scale_h8", "op_type": "elementwise",
        "axes": {"n": {"type": "var"}, "h": {"type": "const", "value": 8}},
        "inputs": {"x": {"shape": ["n", "h"], "dtype": "float32"}, "alpha": {"shape": None, "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n", "h"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x, alpha):\n    return x * alpha\n"})


def _workload(uuid: str, n: int, alpha=None, blob: bool = False):
    inputs = {"x": {"type": "random"}}
    if blob:
        inputs["x"] = {"type": "safetensors", "path": "blob/x.safetensors", "tensor_key": "x"}
    if alpha is not None:
        inputs["alpha"] = {"type": "scalar", "value": alpha}
    return fib.Workload.model_validate({"uuid": uuid, "axes": {"n": n}, "inputs": inputs})


def test_scalar_inputs_are_workload_values_and_blobs_are_skipped():
    d = _definition()
    task = definition_task(d, [_workload("u1", 2, 0.5), _workload("u2", 3, 2.0), _workload("u3", 4, 2.0),
                               _workload("u4", 9, blob=True), _workload("u5", 2, 0.5)], held_out=1)
    assert len(task.workloads) + len(task.held_out) == 3  # u5 repeats u1; u4 needs a blob
    assert task.metadata["skipped_workloads"] == 2
    for workload, _ in task.evaluation_workloads():
        inputs, out = _run_source(task.workload_source(workload))
        assert inputs[1] == workload.params["alpha"] and inputs[0].shape == (workload.params["n"], 8)
        assert torch.equal(out, inputs[0] * inputs[1])
    with pytest.raises(TaskError, match="too few"):
        definition_task(d, [_workload("u1", 2, 0.5)], held_out=1)
    with pytest.raises(TaskError, match="safetensors"):
        definition_task(d, [_workload("u4", 9, blob=True)])


def _solution_workspace(tmp_path: Path):
    task = flashinfer_tasks(FIXTURE)[0]
    ws = create_workspace(task.for_agent(), tmp_path / "ws", "cuda", cache_dir=tmp_path / "cache")
    shutil.copy(SOLUTION / "model_new.py", ws.root / "model_new.py")
    for f in (SOLUTION / "kernels").iterdir():
        shutil.copy(f, ws.root / "kernels" / f.name)
    return task, ws


def test_the_exported_solution_is_accepted_by_flashinfer_bench(tmp_path):
    task, ws = _solution_workspace(tmp_path)
    solution = export_solution(ws.root, DEF, name="cuda_agent_fused_add_rmsnorm", author="cuda-agent")
    parsed = fib.Solution.model_validate(solution)
    assert parsed.spec.language.value == "cuda" and parsed.spec.binding.value == "torch"
    assert parsed.get_entry_path().as_posix() == "main.cpp" and parsed.get_entry_symbol() == "run"
    assert not parsed.spec.destination_passing_style
    paths = {s.path for s in parsed.sources}
    assert {"kernels/fused_add_rmsnorm.cu", "kernels/fused_add_rmsnorm_binding.cpp", "model_new.py",
            "binding_registry.h", "binding.cpp"} <= paths
    header = next(s.content for s in parsed.sources if s.path == "binding_registry.h")
    namespace = header.split("#define CUDA_AGENT_EXTENSION ")[1].split()[0]
    entry = parsed.get_entry_source().content
    assert f'"{namespace}"' in entry and "PYBIND11_MODULE(TORCH_EXTENSION_NAME" in entry and '"cuda_extension"' in entry
    root = tmp_path / "trace"
    shutil.copytree(FIXTURE, root)
    write_solution(root, solution, "rmsnorm")
    loaded = load_trace_set(root)  # FlashInfer-Bench's own loader
    assert loaded.get_solution("cuda_agent_fused_add_rmsnorm") == parsed
    assert [s.name for s in loaded.solutions[DEF]] == ["cuda_agent_fused_add_rmsnorm"]
    (ws.root / "kernels" / "fused_add_rmsnorm.cu").write_text("// changed\n")
    changed = export_solution(ws.root, DEF, name="x")
    assert changed["sources"][1]["content"] != solution["sources"][1]["content"]  # namespace follows the code


def test_a_workspace_without_kernels_is_not_exported(tmp_path):
    _, ws = _solution_workspace(tmp_path)
    for f in (ws.root / "kernels").iterdir():
        f.unlink()
    with pytest.raises(ValueError, match="kernels/ is empty"):
        export_solution(ws.root, DEF, name="x")


def _traces(definition, workloads, solution: str, latencies: list[float], hardware: str = "NVIDIA B200"):
    rows = []
    for w, ms in zip(workloads, latencies):
        rows.append(fib.Trace.model_validate({
            "definition": definition, "workload": w.model_dump(mode="json"), "solution": solution,
            "evaluation": {"status": "PASSED", "environment": {"hardware": hardware}, "timestamp": "2026-01-01",
                           "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
                           "performance": {"latency_ms": ms, "reference_latency_ms": 2 * ms,
                                           "speedup_factor": 2.0}}}))
    return rows


def test_traces_give_the_baseline_and_the_score_is_the_arithmetic_mean(tmp_path):
    task = flashinfer_tasks(FIXTURE, max_workloads=2)[0]
    trace_set = load_trace_set(FIXTURE)
    by_uuid = {t.workload.uuid: t.workload for t in trace_set.workloads[DEF]}
    runs = task.evaluation_workloads()
    rows = _traces(DEF, [by_uuid[workload_uuid(w)] for w, _ in runs[:2]], "flashinfer_wrapper", [0.010, 0.020])
    rows.append(fib.Trace.model_validate({  # a failed run: not a baseline
        "definition": DEF, "workload": by_uuid[workload_uuid(runs[2][0])].model_dump(mode="json"),
        "solution": "flashinfer_wrapper", "evaluation": {"status": "RUNTIME_ERROR", "timestamp": "2026-01-01",
                                                         "environment": {"hardware": "NVIDIA B200"}}}))
    root = tmp_path / "trace"
    shutil.copytree(FIXTURE, root)
    (root / "traces" / "rmsnorm").mkdir(parents=True)
    (root / "traces" / "rmsnorm" / f"{DEF}.jsonl").write_text("\n".join(json.dumps(r.model_dump(mode="json")) for r in rows))
    base = trace_baseline(load_trace_set(root), DEF, "flashinfer_wrapper")
    assert len(base.latency_ms) == 2 and base.hardware == ["NVIDIA B200"]  # the failed trace is not a baseline
    with pytest.raises(TaskError, match="no passed traces"):
        trace_baseline(load_trace_set(root), DEF, "nobody")

    result = EvalResult(task=task.name, task_hash=task.content_hash, backend="cuda", correct=True, reward=1,
                        workloads=[WorkloadResult(name=w.name, held_out=h, correct=True,
                                                  time_ms=TimeMs(eager=0.04, candidate=c))
                                   for (w, h), c in zip(runs, [0.005, 0.010, 0.020])])
    score = fib_score(result, task, base)
    assert math.isclose(score.mean_speedup_vs_reference, (8 + 4 + 2) / 3)
    assert math.isclose(score.mean_speedup_vs_baseline, (0.010 / 0.005 + 0.020 / 0.010) / 2)
    assert score.missing_baseline == [workload_uuid(runs[2][0])] and score.workloads[2].held_out
    with pytest.raises(ValueError, match="only a correct"):
        fib_score(result.model_copy(update={"correct": False}), task, base)


def test_bench_suites_name_a_flashinfer_dataset_folder():
    """`bench run flashinfer:DIR`: each definition a multi-workload task, held-out ones kept."""
    from cuda_agent.benchmark.suite import load_suite

    suite = load_suite(f"flashinfer:{FIXTURE}")
    assert suite.tasks and all(t.workloads and t.held_out for t in suite.tasks)
    with pytest.raises(Exception):
        load_suite(f"flashinfer:{FIXTURE / 'missing'}")
