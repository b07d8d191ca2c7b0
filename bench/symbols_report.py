"""Every symbol the bundled examples' built libraries import that the allowlist refuses.

    python bench/symbols_report.py --backend cuda

Run it on each machine a torch version is used on: torch's headers decide what a binding
imports, so the allowlist is checked against what really gets linked there.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cuda_agent.backends import get_backend
from cuda_agent.languages.cpp.build import build_workspace
from cuda_agent.languages.cpp.symbols import check_library, undefined_symbols
from cuda_agent.examples import list_examples
from cuda_agent.workspace import create_workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda")
    args = ap.parse_args()
    backend = get_backend(args.backend)
    root = Path(tempfile.mkdtemp(prefix="symbols-"))
    bad = 0
    for ex in list_examples():
        ws = create_workspace(ex.task, root / ex.name, args.backend, cache_dir=root / "cache")
        ex.install_solution(ws.root, args.backend)
        build = build_workspace(ws.root, backend, cache_dir=root / "cache")
        if not build.ok:
            print(f"{ex.name}: build failed: {build.log[:300]}")
            continue
        found = check_library(build.library, args.backend)
        bad += len(found)
        print(f"{ex.name}: {len(undefined_symbols(build.library))} undefined, {len(found)} refused")
        for f in found:
            print(f"  [{f.rule}] {f.message[:160]}")
    print(f"refused in all: {bad}")


if __name__ == "__main__":
    main()
