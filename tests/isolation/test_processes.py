"""A child started as `python -m cuda_agent...` imports the same copy of the code as its parent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cuda_agent
from cuda_agent.isolation.processes import child_environment


def test_a_child_imports_this_copy_of_the_sources() -> None:
    env = child_environment({"PYTHONPATH": "/elsewhere", "PATH": os.environ.get("PATH", "")})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(Path(cuda_agent.__file__).resolve().parents[1]), "/elsewhere"]
    out = subprocess.run([sys.executable, "-c", "import cuda_agent; print(cuda_agent.__file__)"], env=env,
                         capture_output=True, text=True, check=True, cwd="/").stdout.strip()
    assert Path(out).resolve() == Path(cuda_agent.__file__).resolve()
    assert child_environment({})["PYTHONPATH"] == env["PYTHONPATH"].split(os.pathsep)[0]  # no empty entry
