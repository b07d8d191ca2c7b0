"""Launcher for the `bash` tool: apply Landlock, then exec the command.

Usage: python -I -S confine.py WRITABLE... -- ARGV...

Run as its own small process (not a `preexec_fn`, which is unsafe in a threaded parent), in
isolated mode: it loads its sibling `sandbox.py` by path, so no package (and no torch) is
imported and nothing on the caller's path can stand in for it.
"""

import importlib.util
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit("usage: confine.py WRITABLE... -- ARGV...")
    sep = argv.index("--")
    writable, command = argv[:sep], argv[sep + 1:]
    sandbox_py = Path(__file__).with_name("sandbox.py")
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
