"""Build time of one bundled example, cold (new sources, PCH already made) and warm (nothing
changed: a cache hit), plus the check + build pair the evaluator runs, per backend.

    PYTHONPATH=src python bench/build_cache_bench.py --backend cpu --out bench/results/build_cache_cpu.json

The PCH is made once first and not counted (it is per machine, not per build). Each cold build
gets new sources (a salted comment), so nothing of it is cached; `repeats` of each, median kept.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

from cuda_agent.backends import get_backend
from cuda_agent.examples import get_example
from cuda_agent.languages import get_language
from cuda_agent.languages.cpp.build import build_workspace, ensure_pch
from cuda_agent.workspace import create_workspace


def _salt(ws: Path, salt: str) -> None:
    for f in sorted((ws / "kernels").iterdir()):
        if f.is_file():
            f.write_text(f.read_text() + f"\n// salt {salt}\n")


def bench(backend: str, example: str, repeats: int) -> dict:
    be = get_backend(backend)
    ex = get_example(example)
    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp:
        root = Path(tmp)
        cache = root / "cache"
        ws = create_workspace(ex.task, root / "ws", backend, cache_dir=cache)
        ex.install_solution(ws.root, backend)
        ensure_pch(be, cache, time.monotonic() + 900)
        lang = get_language("cpp")
        cold, warm, check_warm = [], [], []
        for i in range(repeats):
            _salt(ws.root, f"{time.time()}-{i}")
            c = build_workspace(ws.root, be, cache_dir=cache)
            assert c.ok, c.log
            w = build_workspace(ws.root, be, cache_dir=cache)
            assert w.ok and w.compiled_units == 0, w
            t0 = time.monotonic()
            lang.check(ws.root, backend, cache_dir=cache)
            r = lang.build(ws.root, be, cache_dir=cache, timeout_s=300)
            assert r.ok, r.log
            check_warm.append(time.monotonic() - t0)
            cold.append(c.seconds)
            warm.append(w.seconds)
            units = c.compiled_units
    return {"backend": backend, "example": example, "units": units, "repeats": repeats,
            "cold_build_s": statistics.median(cold), "warm_build_s": statistics.median(warm),
            "check_plus_warm_build_s": statistics.median(check_warm),
            "cold_all": cold, "warm_all": warm, "host": platform.node(), "cpus": __import__("os").cpu_count()}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--example", default="swish")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    res = {"label": a.label, **bench(a.backend, a.example, a.repeats)}
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
