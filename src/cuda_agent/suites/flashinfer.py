"""FlashInfer-Bench as a suite, through its own package (`pip install 'cuda-agent[flashinfer]'`).

A FlashInfer Trace dataset folder (`definitions/`, `workloads/`, `solutions/`, `traces/`, read
by `flashinfer_bench.data.TraceSet`) becomes multi-workload Tasks: each Definition's reference
`run` is wrapped as a KernelBench-format `Model`, its axes and scalar inputs become top-level
names that each Workload sets, inputs are made the way FlashInfer-Bench makes them. Our
solutions go back out as its Solution JSON (CUDA, torch binding, entry `main.cpp::run`), and its
Traces give the named baselines; `fib_score` scores the way it does (arithmetic mean of
per-workload speedups) beside our reward.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..evaluation.records import EvalResult
from ..tasks import LoadedTasks, Task, TaskError, Workload
from ..tasks.task import top_level_names

SUITE = "flashinfer-bench"
INT_RANGES = {"int8": (-128, 128), "int16": (-1024, 1024), "int32": (-1024, 1024), "int64": (-1024, 1024)}


def _fib() -> Any:
    """flashinfer_bench.data, imported on first use so the core never needs it."""
    try:
        import flashinfer_bench.data as data
    except ImportError as exc:
        raise ImportError("the FlashInfer-Bench suite needs its package: pip install 'cuda-agent[flashinfer]' "
                          f"(flashinfer-bench, installed with --no-deps): {exc}") from exc
    return data


def load_trace_set(root: str | Path) -> Any:
    """The dataset folder, read by FlashInfer-Bench's own loader (TraceSet.from_path)."""
    root = Path(root)
    if not (root / "definitions").is_dir():
        raise TaskError(str(root), "is not a FlashInfer Trace folder (no definitions/)")
    return _fib().TraceSet.from_path(str(root))


# ---- Definition + Workloads -> Task ----------------------------------------------------------
def definition_source(definition: Any, first: Any) -> str:
    """A KernelBench-format file for `definition`, its names set to workload `first`'s values."""
    reference_names = top_level_names(ast.parse(definition.reference))
    var_axes, scalars = _params_of(definition, first)
    clash = sorted((set(var_axes) | set(scalars) | set(definition.const_axes)) & reference_names)
    if clash:
        raise TaskError(definition.name, f"the reference defines {clash} at its top level, which name axes here")
    args = ", ".join(definition.inputs)
    lines = [f'"""FlashInfer-Bench definition {definition.name} (op_type {definition.op_type}).',
             "", textwrap.fill(definition.description or "", 96), "",
             "Inputs, in order: " + _specs(definition.inputs), "Outputs: " + _specs(definition.outputs),
             "The variable axes and scalar inputs below change from workload to workload; the kernel",
             'must handle every value they can take, not only the ones shown."""', "",
             "import torch", "import torch.nn as nn", "",
             "# ---- the definition's reference, verbatim ----",
             definition.reference.rstrip(), "# ---- end of reference ----", ""]
    lines += [f"{name} = {value!r}  # const axis" for name, value in definition.const_axes.items()]
    lines += [f"{name} = {value!r}  # variable axis" for name, value in var_axes.items()]
    lines += [f"{name} = {value!r}  # scalar input" for name, value in scalars.items()]
    lines += ["", "", "class Model(nn.Module):", f"    def forward(self, {args}):", f"        return run({args})",
              "", "", "def _random(shape, dtype):", "    dtype = getattr(torch, dtype)",
              "    if dtype in (torch.float32, torch.float16, torch.bfloat16):",
              "        return torch.randn(shape, dtype=dtype)",
              "    if dtype is torch.bool:", "        return torch.randint(0, 2, shape, dtype=torch.bool)",
              "    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):",
              "        return torch.randn(shape).clamp_(-2.0, 2.0).to(dtype)",
              f"    low, high = {INT_RANGES!r}[str(dtype).removeprefix('torch.')]",
              "    return torch.randint(low, high, shape, dtype=dtype)", "", "",
              "def get_inputs():", "    return ["]
    for name, spec in definition.inputs.items():
        if name in scalars:
            lines.append(f"        {name},")
        elif spec.shape is None:
            lines.append(f"        _random((), {spec.dtype.value!r}).item(),")
        else:
            shape = "(" + "".join(f"{axis}, " for axis in spec.shape) + ")"
            made = f"_random({shape}, {spec.dtype.value!r})"
            if definition.op_type == "sampling" and name == "probs":  # as FlashInfer-Bench makes them
                made = f"torch.softmax({made}, dim=-1)"
            lines.append(f"        {made},")
    lines += ["    ]", "", "", "def get_init_inputs():", "    return []", ""]
    return "\n".join(lines)


def _specs(tensors: dict[str, Any]) -> str:
    return "; ".join(f"{n} {list(s.shape) if s.shape is not None else 'scalar'} {s.dtype.value}"
                     for n, s in tensors.items())


def definition_task(definition: Any, workloads: list[Any], *, held_out: int = 1,
                    max_workloads: int | None = None) -> Task:
    """One Task for a Definition: its workloads (FlashInfer `Workload`s, deduplicated by
    value), `held_out` of them kept from the agent (chosen by a hash of their uuid: stable,
    not by size), at most `max_workloads` shown (spread over the sizes)."""
    usable, skipped = [], []
    for w in workloads:
        (skipped if any(spec.type == "safetensors" for spec in w.inputs.values()) else usable).append(w)
    if not usable:
        why = f" ({len(skipped)} need safetensors blobs, not supported)" if skipped else ""
        raise TaskError(definition.name, f"has no usable workload{why}")
    unique: dict[str, tuple[Any, Workload]] = {}
    for w in usable:
        ours = _workload(definition, w)
        unique.setdefault(ours.digest, (w, ours))
    pairs = list(unique.values())
    if held_out >= len(pairs):
        raise TaskError(definition.name, f"{len(pairs)} distinct workload(s): too few to hold {held_out} out")
    by_hash = sorted(pairs, key=lambda p: hashlib.sha256(p[0].uuid.encode()).hexdigest())
    hidden, shown = by_hash[:held_out], by_hash[held_out:]
    shown.sort(key=lambda p: _size(p[1]))
    if max_workloads and len(shown) > max_workloads:
        step = (len(shown) - 1) / max(max_workloads - 1, 1)
        shown = [shown[round(i * step)] for i in range(max_workloads)]
    source = definition_source(definition, shown[0][0])
    return Task.from_source(
        source, name=f"flashinfer/{definition.name}", origin=f"flashinfer-bench:{definition.name}",
        ops=[definition.op_type], workloads=[ours for _, ours in shown], held_out=[ours for _, ours in hidden],
        metadata={"suite": SUITE, "definition": definition.name, "op_type": definition.op_type,
                  "skipped_workloads": len(skipped) + len(usable) - len(pairs)})


def flashinfer_tasks(root: str | Path, *, definitions: list[str] | None = None, held_out: int = 1,
                     max_workloads: int | None = None) -> LoadedTasks:
    """Tasks for the dataset's definitions (all, or those named); a definition that cannot
    become a task is listed in `rejected` with its reason."""
    trace_set = load_trace_set(root)
    names = definitions or sorted(trace_set.definitions)
    loaded = LoadedTasks()
    for name in names:
        try:
            if name not in trace_set.definitions:
                raise TaskError(name, "no such definition in the dataset")
            rows = [t.workload for t in trace_set.workloads.get(name, [])]
            loaded.append(definition_task(trace_set.definitions[name], rows, held_out=held_out,
                                          max_workloads=max_workloads))
        except TaskError as exc:
            loaded.rejected.append(exc)
    return loaded


def workload_uuid(workload: Workload) -> str:
    """The FlashInfer workload uuid a task workload came from (kept in its name)."""
    return workload.name.rsplit("#", 1)[-1]


def _workload(definition: Any, w: Any) -> Workload:
    var_axes, scalars = _params_of(definition, w)
    label = ",".join(f"{k}={v}" for k, v in var_axes.items()) or "const"
    return Workload(name=f"{label}#{w.uuid}", params={**var_axes, **scalars})


def _params_of(definition: Any, w: Any) -> tuple[dict[str, int], dict[str, Any]]:
    missing = [a for a in definition.var_axes if a not in w.axes]
    if missing:
        raise TaskError(definition.name, f"workload {w.uuid} gives no value for axes {missing}")
    var_axes = {a: int(w.axes[a]) for a in definition.var_axes}
    scalars = {n: spec.value for n, spec in w.inputs.items() if spec.type == "scalar"}
    return var_axes, scalars


def _size(w: Workload) -> int:
    return math.prod(max(v, 1) for v in w.params.values() if isinstance(v, int))


# ---- our solution -> its Solution JSON -------------------------------------------------------
_ENTRY = r'''// main.cpp -- FlashInfer-Bench entry point (torch binding) generated by cuda-agent.
// run(*inputs) calls ModelNew from model_new.py, whose `import {extension}` is answered by the ops
// that kernels/*_binding.cpp register (REGISTER_BINDING) in the torch namespace {namespace}.
#include <torch/extension.h>
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>

namespace py = pybind11;

static const char* kLoader = R"PY(
import os, sys, types, torch

def load(so_path, namespace, extension):
    ops = getattr(torch.ops, namespace)
    shim = types.ModuleType(extension)
    shim.__getattr__ = lambda attr: getattr(ops, attr)
    sys.modules[extension] = shim
    path = os.path.join(os.path.dirname(os.path.abspath(so_path)), "model_new.py")
    scope = {{"__name__": "model_new", "__file__": path}}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), scope)
    return scope["ModelNew"]().eval()

def call(model, *args):
    with torch.no_grad():
        return model(*args)
)PY";

// Leaked on purpose: Python objects must not be destroyed after the interpreter is.
static py::module_* g_self = nullptr;
static py::object* g_loader = nullptr;
static py::object* g_model = nullptr;

py::object run(py::args args) {{
  if (g_model == nullptr) {{
    py::object load = (*g_loader)["load"];
    g_model = new py::object(load(g_self->attr("__file__"), "{namespace}", "{extension}"));
  }}
  return (*g_loader)["call"](*g_model, *args);
}}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{
  g_self = new py::module_(m);
  g_loader = new py::object(py::dict());
  py::exec(kLoader, *g_loader);
  m.def("run", &run, "the candidate's ModelNew.forward on the definition's inputs");
}}
'''


def export_solution(workspace: str | Path, definition: str, *, name: str, author: str = "cuda-agent",
                    description: str | None = None) -> dict[str, Any]:
    """The workspace's solution as FlashInfer-Bench Solution JSON (CUDA, torch binding, entry
    `main.cpp::run`), checked by its own pydantic model. Sources: kernels/ as they are, the
    workspace's binding_registry.h and binding.cpp with the extension's torch namespace made
    unique to this solution (two solutions can live in one process), model_new.py, main.cpp."""
    root = Path(workspace)
    kernels = sorted(p for p in (root / "kernels").rglob("*") if p.is_file())
    if not kernels:
        raise ValueError(f"{root}: kernels/ is empty; nothing to export")
    extension = _extension_of(root)
    namespace = "cuda_agent_" + hashlib.sha256("".join(p.read_text() for p in kernels).encode()
                                               + (root / "model_new.py").read_bytes()).hexdigest()[:12]
    prelude = (f"// exported by cuda-agent: the extension's torch namespace and its CUDA flavour\n"
               f"#define CUDA_AGENT_EXTENSION {namespace}\n#define CUDA_AGENT_CUDA 1\n")
    sources = [{"path": "main.cpp", "content": _ENTRY.format(namespace=namespace, extension=extension)},
               {"path": "binding_registry.h", "content": prelude + (root / "binding_registry.h").read_text()},
               {"path": "binding.cpp", "content": (root / "binding.cpp").read_text()},
               {"path": "model_new.py", "content": (root / "model_new.py").read_text()}]
    sources += [{"path": p.relative_to(root).as_posix(), "content": p.read_text()} for p in kernels]
    solution = {"name": name, "definition": definition, "author": author,
                "spec": {"language": "cuda", "target_hardware": ["cuda"], "entry_point": "main.cpp::run",
                         "dependencies": [], "destination_passing_style": False, "binding": "torch"},
                "sources": sources,
                "description": description or f"cuda-agent workspace solution for {definition}"}
    return _fib().Solution.model_validate(solution).model_dump(mode="json")


def _extension_of(root: Path) -> str:
    """The module name model_new.py imports the built ops from (cuda_extension)."""
    found = re.search(r"^\s*import\s+(\w+_extension)\b", (root / "model_new.py").read_text(), re.M)
    return found[1] if found else "cuda_extension"


# ---- its Traces, and its score -----------------------------------------------------------------
class BaselineTimes(BaseModel):
    """One named solution's latency per workload uuid, as its Traces record them."""

    solution: str
    latency_ms: dict[str, float]
    reference_latency_ms: dict[str, float] = Field(default_factory=dict)
    hardware: list[str] = Field(default_factory=list)


def trace_baseline(trace_set: Any, definition: str, solution: str) -> BaselineTimes:
    """The named solution's passed Traces for `definition` (the last one per workload)."""
    latency, reference, hardware = {}, {}, set()
    for t in trace_set.traces.get(definition, []):
        ev = t.evaluation
        if t.solution != solution or ev is None or ev.performance is None or str(ev.status.value) != "PASSED":
            continue
        latency[t.workload.uuid] = float(ev.performance.latency_ms)
        if ev.performance.reference_latency_ms:
            reference[t.workload.uuid] = float(ev.performance.reference_latency_ms)
        hardware.add(ev.environment.hardware)
    if not latency:
        raise TaskError(definition, f"no passed traces of solution {solution!r}")
    return BaselineTimes(solution=solution, latency_ms=latency, reference_latency_ms=reference,
                         hardware=sorted(hardware))


class FibWorkloadScore(BaseModel):
    uuid: str
    held_out: bool
    candidate_ms: float
    speedup_vs_reference: float = Field(description="the definition's reference (our eager) over the candidate")
    speedup_vs_baseline: float | None = None


class FibScore(BaseModel):
    """FlashInfer-Bench's aggregate beside ours: arithmetic means of per-workload speedups."""

    definition: str
    mean_speedup_vs_reference: float
    baseline: str | None = None
    baseline_hardware: list[str] = Field(default_factory=list)
    mean_speedup_vs_baseline: float | None = None
    missing_baseline: list[str] = Field(default_factory=list, description="workload uuids the baseline's traces lack")
    workloads: list[FibWorkloadScore]


def fib_score(result: EvalResult, task: Task, baseline: BaselineTimes | None = None) -> FibScore:
    """Score an evaluation of a FlashInfer task the way FlashInfer-Bench does: per workload,
    speedup = reference (or named baseline) latency / candidate latency; the suite's number is
    their arithmetic mean. Candidate and reference times are our judge's; the baseline's come
    from its Traces (so from whatever hardware they were taken on: `baseline_hardware`)."""
    if not result.correct or not result.workloads:
        raise ValueError(f"{task.name}: only a correct multi-workload evaluation can be scored ({result.reason})")
    runs = task.evaluation_workloads()
    if len(runs) != len(result.workloads):
        raise ValueError(f"{task.name}: the result has {len(result.workloads)} workloads, the task {len(runs)}")
    rows, missing = [], []
    for (workload, held), got in zip(runs, result.workloads):
        uuid = workload_uuid(workload)
        cand, eager = got.time_ms.candidate, got.time_ms.eager
        if not cand or not eager:
            raise ValueError(f"{task.name}: workload {got.name} was not timed")
        versus = None
        if baseline is not None:
            if uuid in baseline.latency_ms:
                versus = baseline.latency_ms[uuid] / cand
            else:
                missing.append(uuid)
        rows.append(FibWorkloadScore(uuid=uuid, held_out=held, candidate_ms=cand, speedup_vs_reference=eager / cand,
                                     speedup_vs_baseline=versus))
    scored = [r.speedup_vs_baseline for r in rows if r.speedup_vs_baseline is not None]
    return FibScore(definition=str(task.metadata.get("definition", task.name)),
                    mean_speedup_vs_reference=sum(r.speedup_vs_reference for r in rows) / len(rows),
                    baseline=baseline.solution if baseline else None,
                    baseline_hardware=baseline.hardware if baseline else [],
                    mean_speedup_vs_baseline=sum(scored) / len(scored) if scored else None,
                    missing_baseline=missing, workloads=rows)


def write_solution(trace_root: str | Path, solution: dict[str, Any], op_type: str) -> Path:
    """Put a Solution JSON where a TraceSet finds it: solutions/<op_type>/<definition>/<name>.json."""
    path = Path(trace_root) / "solutions" / op_type / solution["definition"] / f"{solution['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(solution, indent=1))
    return path


__all__ = ["BaselineTimes", "FibScore", "FibWorkloadScore", "definition_source", "definition_task",
           "export_solution", "fib_score", "flashinfer_tasks", "load_trace_set", "trace_baseline",
           "workload_uuid", "write_solution"]
