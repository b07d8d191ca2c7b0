"""The paper's agent_workdir layout (tests/fixtures/paper_agent_workdir, a layout-faithful
rewrite of the release's example): adopted as it is, its pybind11 registry and utils/ scripts
accepted, its fixed files tamper-checked, Python-from-C++ fallbacks refused, and on the cpu
backend (the same files with a C++ kernel) built, loaded and rewarded by the shared judge."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cuda_agent.evaluation import evaluate
from cuda_agent.languages import get_language
from cuda_agent.tasks import Task
from cuda_agent.workspace import WorkspaceError, adopt_workspace

FIXTURE = Path(__file__).parents[2] / "fixtures" / "paper_agent_workdir"

CPU_KERNEL = '''extern "C" void axpby_launcher(float* out, const float* a, const float* b, float alpha, int n) {
  for (int i = 0; i < n; ++i) out[i] = alpha * a[i] + b[i];
}
'''
CPU_BINDING = '''#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "../binding_registry.h"

extern "C" void axpby_launcher(float* out, const float* a, const float* b, float alpha, int n);

static torch::Tensor axpby_forward(torch::Tensor a, torch::Tensor b, double alpha, int config = 0) {
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "a and b must be contiguous");
  auto out = torch::empty_like(a);
  axpby_launcher(out.data_ptr<float>(), a.data_ptr<float>(), b.data_ptr<float>(), static_cast<float>(alpha),
                 static_cast<int>(a.numel()));
  return out;
}

static void register_axpby(pybind11::module& m) {
  m.def("axpby_forward", &axpby_forward, py::arg("a"), py::arg("b"), py::arg("alpha"), py::arg("config") = 0);
}

REGISTER_BINDING(axpby, register_axpby);
'''


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "agent_workdir"
    shutil.copytree(FIXTURE, dest)
    return dest


def _task(root: Path) -> Task:
    return Task.from_source((root / "model.py").read_text(), name="paper/axpby")


def test_the_paper_workdir_is_adopted_and_passes_the_allowlist(tmp_path: Path, cache_dir: Path) -> None:
    root = _copy(tmp_path)
    ws = adopt_workspace(root, _task(root), "cuda", "paper", cache_dir=cache_dir)
    assert {"binding_registry.h", "binding.cpp", "utils/verification.py", "utils/compile.sh"} <= set(ws.fixed_files)
    assert get_language("paper").check(root, "cuda") == []
    (root / "utils" / "verification.py").write_text("print('[PASS] verify success')\n")
    assert ws.tampered_files() == ["utils/verification.py"]


def test_a_directory_without_the_registry_is_not_a_paper_workdir(tmp_path: Path, cache_dir: Path) -> None:
    root = _copy(tmp_path)
    (root / "binding_registry.h").unlink()
    with pytest.raises(WorkspaceError, match="binding_registry.h"):
        adopt_workspace(root, _task(root), "cuda", "paper", cache_dir=cache_dir)


@pytest.mark.parametrize("call", ['py::module::import("torch").attr("relu")(a)',
                                  'pybind11::eval("__import__(\'torch\').relu")(a)',
                                  'py::reinterpret_steal<py::object>(PyObject_CallObject(f, nullptr))'])
def test_python_called_from_the_binding_is_refused(tmp_path: Path, call: str) -> None:
    root = _copy(tmp_path)
    binding = (root / "kernels" / "axpby_binding.cpp").read_text()
    binding = binding.replace("auto out = torch::empty_like(a);", f"auto out = torch::empty_like(a);\n  {call};")
    (root / "kernels" / "axpby_binding.cpp").write_text(binding)
    assert "dynamic-code" in {f.rule for f in get_language("paper").check(root, "cuda")}


def test_the_paper_layout_gets_its_reward_from_the_shared_judge(tmp_path: Path, cache_dir: Path,
                                                                 fast_config) -> None:
    """The fixture's files, with the kernel in C++ for the cpu backend: built against torch's
    and pybind11's headers (~3 min cold on the 2-core box, cached after), symbols checked,
    imported as `cuda_extension` by the sandboxed candidate, verified and timed."""
    root = _copy(tmp_path)
    (root / "kernels" / "axpby.cu").unlink()
    (root / "kernels" / "axpby.cpp").write_text(CPU_KERNEL)
    (root / "kernels" / "axpby_binding.cpp").write_text(CPU_BINDING)
    ws = adopt_workspace(root, _task(root), "cpu", "paper", cache_dir=cache_dir)
    result = evaluate(ws, fast_config)
    assert result.correct and result.reward >= 1, (result.stage, result.reason, result.worker_log[-2000:])
    assert result.build is not None and result.build.library.endswith(".pyext.so")
    broken = CPU_KERNEL.replace("alpha * a[i] + b[i]", "alpha * a[i] - b[i]")
    (root / "kernels" / "axpby.cpp").write_text(broken)
    assert evaluate(ws, fast_config).reward == -1
