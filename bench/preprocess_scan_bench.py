"""What honest code costs the static scan's preprocessor: per translation unit of every bundled
example (and a heavy CUDA unit: cuda_runtime, cub, thrust, cuda_fp16, mma), the preprocessor's
wall time, its output's size and the largest expansion of one of the candidate's own lines. The
scan's bounds (`source_rules.SCAN_TIME_S`, `SCAN_OUTPUT_BYTES`, `LINE_EXPANSION_BYTES`) are set
far above these.

    PYTHONPATH=src python bench/preprocess_scan_bench.py --backend cpu --out bench/results/preprocess_scan_cpu.json

The cuda backend needs only nvcc (its host preprocessing passes), no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

from cuda_agent.backends import get_backend
from cuda_agent.examples import list_examples
from cuda_agent.languages.cpp import TEMPLATES_DIR
from cuda_agent.languages.cpp.build import BuildError, Layout, _plan_units, ensure_pch, run_confined, unit_command
from cuda_agent.languages.cpp.source_rules import _own_lines
from cuda_agent.languages.snapshot import take_snapshot
from cuda_agent.workspace import create_workspace

HEAVY_CU = """#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cub/cub.cuh>
#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <cstdint>
__global__ void heavy_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
"""


def scan_units(ws_root: Path, backend: str, cache: Path) -> list[dict]:
    be = get_backend(backend)
    snap = take_snapshot(ws_root, cache, TEMPLATES_DIR)
    layout = Layout()
    units = [u for u in _plan_units(snap, be, layout, strict=False) if u.kind != "fixed"]
    try:
        pch: Path | None = ensure_pch(be, cache, time.monotonic() + 900)
    except BuildError:  # (a CPU-only torch has no CUDA headers for the PCH: bindings then fail, kernels don't)
        pch = None
    rows = []
    for u in units:
        for cmd in unit_command(u, be, layout, pch, snap, None):
            with tempfile.TemporaryDirectory(dir=cache) as tmp:
                out = Path(tmp) / "pp.ii"
                t0 = time.monotonic()
                try:
                    run_confined(cmd, time.monotonic() + 300, snap, Path(tmp), stdout_to=out,
                                 reads=[*u.reads, *([pch] if pch else [])])
                    ok = True
                except BuildError as exc:
                    ok = str(exc)[-300:]
                dt = time.monotonic() - t0
                text = out.read_text(errors="replace")
                own = _own_lines(text, snap.kernels.resolve())
                longest = max((sum(len(c) + 1 for c in chunks) for lines in own.values() for chunks in lines.values()),
                              default=0)
                rows.append({"unit": u.source.name, "ok": ok, "seconds": round(dt, 3), "output_bytes": len(text),
                             "largest_own_line_bytes": longest})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--out")
    a = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="pp-bench-") as tmp:
        root, cache = Path(tmp), Path(tmp) / "cache"
        for ex in list_examples():
            for variant in ex.solution_variants():
                if variant.split("_")[0] != a.backend:
                    continue
                ws = create_workspace(ex.task, root / f"{ex.name}-{variant}", a.backend, cache_dir=cache)
                ex.install_solution(ws.root, variant)
                for row in scan_units(ws.root, a.backend, cache):
                    results.append({"example": ex.name, "variant": variant, **row})
                    print(json.dumps(results[-1]))
        if a.backend == "cuda":
            ex = list_examples()[0]
            ws = create_workspace(ex.task, root / "heavy", a.backend, cache_dir=cache)
            ex.install_solution(ws.root, "cuda")
            (ws.root / "kernels" / "heavy.cu").write_text(HEAVY_CU)
            for row in scan_units(ws.root, a.backend, cache):
                if row["unit"] == "heavy.cu":
                    results.append({"example": "heavy-cuda-headers", "variant": "cuda", **row})
                    print(json.dumps(results[-1]))
    summary = {"backend": a.backend, "host": platform.node(), "cpus": os.cpu_count(),
               "max_seconds": max(r["seconds"] for r in results),
               "max_output_bytes": max(r["output_bytes"] for r in results),
               "max_own_line_bytes": max(r["largest_own_line_bytes"] for r in results),
               "children_max_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10, "units": results}
    print(json.dumps({k: v for k, v in summary.items() if k != "units"}, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
