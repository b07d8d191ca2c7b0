"""Bundled example tasks, each with hand-written CUDA and CPU solutions.

Layout: `<name>/task.py` (KernelBench format) and `<name>/<backend>/` holding `model_new.py`
and `kernels/`. They are the quickstart's main job and the environment's own test bed.
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

    def install_solution(self, workspace: Path, backend: str) -> None:
        """Copy this example's solution for `backend` (or the `triton` one) into a workspace."""
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
