"""Where a GPU client's start goes (issue 23: fork to "spare" took ~0.6 s on an H100, and the
load phase of a small task waited for it).

1. `clients`: N clients started the judge's way (the fork server, `CandidateLink`), each one's
   start steps as it reported them (`CandidateLink.start_steps`) and its start as the judge saw it.
2. `raw`, `raw_preload`: children forked from a parent that imported torch, without and with the
   parent having dlopened cuDNN and cuBLAS first, timing the CUDA context, the first convolution
   and the first matmul, and the device memory after. (On an H100, 2026-11-28: the preload gained
   nothing, fork to done 0.55 s vs 0.49 s; the context is ~0.25 s, cuDNN ~0.1-0.2 s, cuBLAS ~0.06 s.)
3. `split`: children that start the driver only (`torch.cuda.init()`), report the device memory
   the driver's table gives them then, and make their context when told, `--width` at once:
   whether a spare can do the driver's part ahead of need at no device memory, and whether two
   contexts made at once take twice as long (the second client of a new task started 0.43 s
   after the first in every KernelBench task of issue 23's eleventh session).
4. `client_pairs`: two clients started the judge's way at once, their start steps.
5. `kill_s`: how long a child with a context and N GiB allocated takes to be gone after SIGKILL
   (waitpid returns): what a new task's reference phase waits for when it reaps the last task's
   clients (H100, 2026-11-27: 0.09 s with nothing allocated, 0.11-0.13 s with 4 or 20 GiB).

    python bench/spare_start.py [--clients 4] [--raw 4] [--split 3] [--width 2] [--kill 0,4,20] --out spare_start.json
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


def _context_and_libraries(first: str) -> dict[str, float]:
    """The context, the first convolution and the first matmul, each synchronized: seconds per
    step, the first from a mark named `first` made now."""
    import torch

    marks = [(first, time.perf_counter())]
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
    return {n: round(t - p, 4) for (n, t), (_, p) in zip(marks[1:], marks)}


def _raw_child(write_fd: int) -> None:
    import torch

    steps = _context_and_libraries("begin")
    free, total = torch.cuda.mem_get_info()
    os.write(write_fd, json.dumps({"steps_s": steps, "device_used_gib": round((total - free) / 2**30, 3)}).encode())


def _holding_child(write_fd: int, gib: float) -> None:
    import torch

    held = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda") if gib else torch.ones(1, device="cuda")
    held.fill_(1)
    torch.cuda.synchronize()
    os.write(write_fd, b"up")
    os.close(write_fd)
    time.sleep(600)


def kill_seconds(gib: float) -> float:
    """Seconds from SIGKILL to waitpid for a forked child holding a context and `gib` GiB."""
    import signal

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _holding_child(w, gib)
        finally:
            os._exit(0)
    os.close(w)
    os.read(r, 2)
    os.close(r)
    t0 = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return round(time.perf_counter() - t0, 4)


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


def _own_device_gib() -> float | None:
    import subprocess

    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=10).stdout
    for line in out.splitlines():
        pid, _, used = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return round(float(used) / 1024, 3)
    return 0.0  # not in the table: no context


def _split_child(write_fd: int, go_fd: int) -> None:
    import torch

    t0 = time.perf_counter()
    torch.cuda.init()
    init_s = time.perf_counter() - t0
    row = {"init_s": round(init_s, 4), "after_init_gib": _own_device_gib()}
    os.write(write_fd, b"i")
    os.read(go_fd, 1)  # the parent says go to every child at once
    row["steps_s"] = _context_and_libraries("go")
    row["after_all_gib"] = _own_device_gib()
    os.write(write_fd, json.dumps(row).encode())


def split_starts(rounds: int, width: int) -> list[list[dict]]:
    import torch  # noqa: F401 - imported before the fork, as in the fork server

    out = []
    for _ in range(rounds):
        kids = []
        for _ in range(width):
            r, w = os.pipe()
            go_r, go_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                os.close(go_w)
                try:
                    _split_child(w, go_r)
                finally:
                    os._exit(0)
            os.close(w)
            os.close(go_r)
            kids.append((pid, r, go_w))
        for _, r, _ in kids:
            os.read(r, 1)
        time.sleep(0.3)
        t0 = time.perf_counter()
        for _, _, go_w in kids:
            os.write(go_w, b"g")
        rows = []
        for pid, r, go_w in kids:
            data = b""
            while chunk := os.read(r, 65536):
                data += chunk
            os.waitpid(pid, 0)
            row = json.loads(data) if data else {"error": "no answer"}
            row["go_to_done_s"] = round(time.perf_counter() - t0, 3)
            rows.append(row)
            os.close(r)
            os.close(go_w)
        out.append(rows)
    return out


def client_pairs(rounds: int, backend: str) -> list[list[dict]]:
    from cuda_agent.evaluation.candidate_link import CandidateLink, ForkServer
    from cuda_agent.evaluation.judge import _candidate_env

    server = ForkServer(backend, _candidate_env())
    server.ready(120.0)
    out = []
    try:
        for _ in range(rounds):
            t0 = time.monotonic()
            links = [CandidateLink(backend, _candidate_env(), forkserver=server) for _ in range(2)]
            rows = []
            for link in links:
                link.await_started(time.monotonic() + 30.0)
                rows.append({"start_s": link.start_s, "steps_s": link.start_steps,
                             "seen_started_s": round(time.monotonic() - t0, 3)})
            for link in links:
                link.close()
            out.append(rows)
            time.sleep(0.5)
    finally:
        server.close()
    return out


def _in_child(work) -> object:
    """`work()`'s JSON answer, run in a forked child (a parent that started CUDA can't fork one)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, json.dumps(work()).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 20):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"error": "no answer"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--raw", type=int, default=4)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--kill", default="", help="GiB a killed child holds, comma-separated (e.g. 0,4,20)")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--out", default="spare_start.json")
    args = ap.parse_args()
    report = {"clients": client_starts(args.clients, args.backend)}
    # each variant in its own parent: a parent that opened the libraries can't unopen them
    for preload in (False, True):
        report["raw_preload" if preload else "raw"] = _in_child(lambda: raw_starts(args.raw, preload))
    for width in sorted({1, args.width}) if args.split else ():
        report[f"split_width{width}"] = _in_child(lambda: split_starts(args.split, width))
        print(f"split width {width}:", json.dumps(report[f"split_width{width}"]), flush=True)
    if args.pairs:
        report["client_pairs"] = client_pairs(args.pairs, args.backend)
        print("client pairs:", json.dumps(report["client_pairs"]), flush=True)
    if args.kill:
        sizes = [float(g) for g in args.kill.split(",")]
        report["kill_s"] = _in_child(lambda: {str(g): [kill_seconds(g) for _ in range(3)] for g in sizes})
        print("kill:", json.dumps(report["kill_s"]), flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: {n: v.get(n) for n in ("median_start_s", "median_s", "opened", "server_ready_s")
                          if n in v} for k, v in report.items() if isinstance(v, dict)}))


if __name__ == "__main__":
    main()
