"""The suite registry: "name[:arg]" picks a loader; a spec naming none is KernelBench's (a path)."""

from __future__ import annotations

import pytest

from cuda_agent.suites.registry import SUITES, load_suite_tasks
from cuda_agent.tasks import TaskError
from tests.conftest import RELU_TASK


def _checkout(root):
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "1_Relu.py").write_text(RELU_TASK)
    (level / "2_Bad.py").write_text("not python (")
    return root


def test_every_suite_is_named_and_examples_take_a_name_or_a_level():
    assert set(SUITES) == {"kernelbench", "examples", "flashinfer"}
    every = load_suite_tasks("examples")
    assert len(every) >= 8 and not every.rejected
    assert [t.name for t in load_suite_tasks("examples:swish")] == ["examples/swish"]
    assert [t.name for t in load_suite_tasks("examples:level=3")] == ["examples/mlp_block"]
    with pytest.raises(KeyError, match="no bundled example"):
        load_suite_tasks("examples:nope")


def test_a_path_is_kernelbench_with_or_without_its_name(tmp_path):
    root = _checkout(tmp_path)
    skipped = load_suite_tasks(str(root), on_error="skip")
    assert [t.name for t in skipped] == ["level1/1_Relu"] and len(skipped.rejected) == 1
    assert [t.name for t in load_suite_tasks(f"kernelbench:{root}", on_error="skip")] == ["level1/1_Relu"]
    with pytest.raises(TaskError, match="2_Bad"):
        load_suite_tasks(str(root))
    listing = tmp_path / "tasks.txt"
    listing.write_text("KernelBench/level1/1_Relu.py  # one task\n")
    assert [t.name for t in load_suite_tasks(str(listing))] == ["level1/1_Relu"]
    with pytest.raises(TaskError, match="no such file or directory"):
        load_suite_tasks(str(tmp_path / "nope:missing"))
