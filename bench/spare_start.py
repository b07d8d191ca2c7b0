"""Where a GPU client's start goes (issue 23: fork to "spare" took ~0.6 s on an H100, and the
load phase of a small task waited for it).

1. `clients`: N clients started the judge's way (the fork server, `CandidateLink`), each one's
   start steps as it reported them (`CandidateLink.start_steps`) and its start as the judge saw it.
2. `raw`, `raw_preload`: children forked from a parent that imported torch, without and with the
   parent having dlopened cuDNN and cuBLAS first, timing the CUDA context, the first convolution
   and the first matmul, and the device memory after. (On an H100, 2026-11-28: the preload gained
   nothing, fork to done 0.55 s vs 0.49 s; the context is ~0.25 s, cuDNN ~0.1-0.2 s, cuBLAS ~0.06 s.)

    python bench/spare_start.py [--clients 4] [--raw 4] --out spare_start.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def client_starts(count: int, backend: str) -> dict:
    from cuda_agent.evaluation.candidate_link import CandidateLink, ForkServer
    from cuda_agent.evaluation.judge import _candidate_env

    t0 = time.monotonic()
    server = ForkServer(backend, _candidate_env())
    server.ready(120.0)
    ready_s = round(time.monotonic() - t0, 2)
    rows = []
    try:
        for _ in range(count):
            t0 = time.monotonic()
            link = CandidateLink(backend, _candidate_env(), forkserver=server)
            forked = time.monotonic() - t0
            link.await_started(time.monotonic() + 30.0)
            rows.append({"forked": link.forked, "fork_call_s": round(forked, 3), "start_s": link.start_s,
                         "steps_s": link.start_steps})
            link.close()
    finally:
        server.close()
    starts = [r["start_s"] for r in rows if r["start_s"] is not None]
    return {"server_ready_s": ready_s, "rows": rows,
            "median_start_s": statistics.median(starts) if starts else None}


def _raw_child(write_fd: int) -> None:
    import torch

    marks = [("begin", time.perf_counter())]
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    marks.append(("context", time.perf_counter()))
    x = torch.ones(1, 1, 8, 8, device="cuda")
    torch.nn.functional.conv2d(x, torch.ones(1, 1, 3, 3, device="cuda"))
    torch.cuda.synchronize()
    marks.append(("cudnn", time.perf_counter()))
    x[0, 0] @ x[0, 0]
    torch.cuda.synchronize()
    marks.append(("cublas", time.perf_counter()))
    free, total = torch.cuda.mem_get_info()
    steps = {n: round(t - p, 4) for (n, t), (_, p) in zip(marks[1:], marks)}
    os.write(write_fd, json.dumps({"steps_s": steps, "device_used_gib": round((total - free) / 2**30, 3)}).encode())


def preload_device_libraries() -> list[str]:
    """dlopen the cuDNN sub-libraries and cuBLASLt torch would open at the first call, without
    starting CUDA (what a fork server could do once for every child)."""
    import ctypes
    import glob

    import torch

    opened = []
    roots = {Path(torch.__file__).parent / "lib"}
    for p in sys.path:
        roots.add(Path(p) / "nvidia")
    for root in roots:
        for lib in sorted(glob.glob(str(root / "**" / "libcudnn*.so*"), recursive=True)) + \
                sorted(glob.glob(str(root / "**" / "libcublas*.so*"), recursive=True)):
            try:
                ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                opened.append(lib)
            except OSError:
                pass
    return opened


def raw_starts(count: int, preload: bool) -> dict:
    import torch  # noqa: F401 - imported before the fork, as in the fork server

    opened = preload_device_libraries() if preload else []
    rows = []
    for _ in range(count):
        r, w = os.pipe()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                _raw_child(w)
            finally:
                os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        row = json.loads(data) if data else {"error": "no answer"}
        row["fork_to_done_s"] = round(time.perf_counter() - t0, 3)
        rows.append(row)
    return {"preload": preload, "opened": len(opened), "rows": rows,
            "median_s": statistics.median(r.get("fork_to_done_s", 0) for r in rows) if rows else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--raw", type=int, default=4)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--out", default="spare_start.json")
    args = ap.parse_args()
    report = {"clients": client_starts(args.clients, args.backend)}
    # each variant in its own parent: a parent that opened the libraries can't unopen them
    for preload in (False, True):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, json.dumps(raw_starts(args.raw, preload)).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.waitpid(pid, 0)
        report["raw_preload" if preload else "raw"] = json.loads(data) if data else {"error": "no answer"}
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: {n: v.get(n) for n in ("median_start_s", "median_s", "opened", "server_ready_s")
                          if n in v} for k, v in report.items()}))


if __name__ == "__main__":
    main()
