"""A child started as `python -m cuda_agent...` imports the same copy of the code as its parent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cuda_agent
from cuda_agent.isolation.processes import child_environment
from tests.conftest import nest_folders


def test_a_child_imports_this_copy_of_the_sources() -> None:
    env = child_environment({"PYTHONPATH": "/elsewhere", "PATH": os.environ.get("PATH", "")})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(Path(cuda_agent.__file__).resolve().parents[1]), "/elsewhere"]
    out = subprocess.run([sys.executable, "-c", "import cuda_agent; print(cuda_agent.__file__)"], env=env,
                         capture_output=True, text=True, check=True, cwd="/").stdout.strip()
    assert Path(out).resolve() == Path(cuda_agent.__file__).resolve()
    assert child_environment({})["PYTHONPATH"] == env["PYTHONPATH"].split(os.pathsep)[0]  # no empty entry


def test_remove_tree_takes_any_depth_any_modes_and_never_follows_a_link_out(tmp_path) -> None:
    """What a candidate or an agent leaves is theirs to shape: 3,000 nested folders (shutil.rmtree
    raised RecursionError), a folder with no rights, a link to a file outside that must survive."""
    import os
    import time

    from cuda_agent.isolation.processes import remove_tree

    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    tree = tmp_path / "tree"
    nest_folders(tree, 3000)
    locked = tree / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "f").write_text("x")
    os.chmod(locked, 0)
    (tree / "link").symlink_to(outside)
    (tree / "dirlink").symlink_to(tmp_path)
    remove_tree(tree)
    assert not os.path.lexists(tree) and outside.read_text() == "keep"
    remove_tree(tree)  # gone already: nothing to do, nothing raised
    remove_tree(None)
    later = tmp_path / "later"
    (later / "a" / "b").mkdir(parents=True)
    remove_tree(later, wait=False)
    deadline = time.monotonic() + 30
    while later.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not later.exists()
