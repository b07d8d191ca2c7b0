"""Launcher for the `bash` tool: apply Landlock, then exec the command.

Usage: python -I -S _confine.py SANDBOX_PY WRITABLE... -- ARGV...

Run as its own small process (not a `preexec_fn`, which is unsafe in a threaded parent). It
loads the evaluation sandbox module by path so that no package (and no torch) is imported.
"""

import importlib.util
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    if "--" not in argv or len(argv) < 3:
        sys.exit("usage: _confine.py SANDBOX_PY WRITABLE... -- ARGV...")
    sep = argv.index("--")
    sandbox_py, writable, command = argv[0], argv[1:sep], argv[sep + 1:]
    spec = importlib.util.spec_from_file_location("_cuda_agent_sandbox", sandbox_py)
    if spec is None or spec.loader is None:
        sys.exit(f"cannot load {sandbox_py}")
    sandbox = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sandbox)
    report = sandbox.restrict_writes([Path(p) for p in writable])
    if not str(report.get("landlock", "")).startswith("abi"):
        print(f"[sandbox] write confinement not applied: {report.get('landlock')}", file=sys.stderr)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
