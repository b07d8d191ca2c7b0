"""Bundled example tasks, each with hand-written CUDA and CPU solutions.

Layout: `<name>/task.py` (KernelBench format) and `<name>/<backend>/` holding `model_new.py`
and `kernels/`; `<name>/<backend>_<variant>/` is another solution for that backend (e.g.
`gemm_bias_relu/cuda_cublas`, `conv2d_relu/cuda_cudnn`: vendor GEMM / convolution plus an own
epilogue kernel, honest under the `paper` rules profile and refused under `strict`). They are the quickstart's main job and the environment's own test bed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..tasks import Task
from ..tasks.loaders import bundled_task, bundled_task_names

EXAMPLES_DIR = Path(__file__).parent


@dataclass(frozen=True)
class Example:
    name: str
    level: int
    task: Task
    root: Path

    def solution_dir(self, backend: str) -> Path:
        return self.root / backend

    def solution_variants(self) -> list[str]:
        """Every solution folder: a backend (`cuda`, `cpu`), `triton`, or a named variant of a
        backend (`cuda_cublas`, `cuda_cudnn`: cuBLAS GEMM / cuDNN convolution, allowed under the
        `paper` rules profile only)."""
        return sorted(d.name for d in self.root.iterdir() if (d / "model_new.py").is_file())

    def install_solution(self, workspace: Path, backend: str) -> None:
        """Copy this example's solution for `backend` (or the `triton` one, or a variant such as
        `cuda_cublas`: see `solution_variants`) into a workspace."""
        src = self.solution_dir(backend)
        if not src.is_dir():
            raise FileNotFoundError(f"example {self.name} has no {backend} solution")
        shutil.copyfile(src / "model_new.py", workspace / "model_new.py")
        kernels = workspace / "kernels"
        for old in kernels.iterdir():
            old.unlink()
        for f in sorted((src / "kernels").iterdir()):
            shutil.copyfile(f, kernels / f.name)


def list_examples() -> list[Example]:
    """Every bundled example, ordered by level then name."""
    out = []
    for name in bundled_task_names():  # one reader of the task files: tasks.loaders (load_tasks("swish") too)
        task = bundled_task(name)
        assert task is not None and task.level is not None
        out.append(Example(name=name, level=task.level, task=task, root=EXAMPLES_DIR / name))
    return sorted(out, key=lambda e: (e.level, e.name))


def get_example(name: str) -> Example:
    for ex in list_examples():
        if ex.name == name:
            return ex
    raise KeyError(f"no bundled example {name!r}; have: {', '.join(e.name for e in list_examples())}")
