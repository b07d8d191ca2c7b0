"""FIXED FILE (protected). Runs a cuda-agent verb on this workspace (the paper's utils/ entry points)."""
import os
import subprocess
import sys

PYTHON = "@PYTHON@"


def run(*verb: str) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.call([PYTHON, "-m", "cuda_agent", *verb, root, *sys.argv[1:]])
