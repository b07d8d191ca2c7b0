"""What slows a spare's device context: a new context's start, timed under what runs beside it.

    python bench/context_contention.py --out DIR [--repeats 4]

Issue 23 (twelfth session): a held spare, told to go, made its context in 0.26-0.55 s during an
evaluation, against ~0.12 s alone. Beside it then ran: the judge's reference phase (kernels and
cudaMalloc/cudaFree on the device), the last task's clients ending (their contexts and arenas
torn down), and the other spare making its own. Each is reproduced here on its own, in processes
forked from a parent that imported torch and never touched the device (as the fork server does),
and the child's steps timed: the context (`torch.empty(1, device="cuda")` after `torch.cuda.init()`,
as `start_driver`/`start_device` do), then cuDNN's and cuBLAS's first calls. One JSON line per
measurement in DIR/context_contention.jsonl and a summary (median per condition) printed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import time
from pathlib import Path

import torch


def _mapped() -> set[str]:
    """The shared objects this process has mapped."""
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if ".so" in line.split()[-1]}


def _child(go_r: int, out_w: int) -> None:
    """The measured process: the driver first, then on "go" its context and libraries (and
    the shared objects each step mapped that the process had not)."""
    torch.cuda.init()
    os.read(go_r, 1)
    before = _mapped()
    t0 = time.perf_counter()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    after_context = _mapped()
    x = torch.randn(1, 3, 16, 16, device="cuda")
    torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3, device="cuda"))
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    after_cudnn = _mapped()
    a = torch.randn(64, 64, device="cuda")
    (a @ a).sum().item()
    t3 = time.perf_counter()
    after_cublas = _mapped()
    os.write(out_w, json.dumps({"context": t1 - t0, "cudnn": t2 - t1, "cublas": t3 - t2,
                                "mapped": {"context": sorted(after_context - before),
                                           "cudnn": sorted(after_cudnn - after_context),
                                           "cublas": sorted(after_cublas - after_cudnn)}}).encode())
    os._exit(0)


def _fork(target, *args) -> int:  # type: ignore[no-untyped-def]
    pid = os.fork()
    if pid == 0:
        try:
            target(*args)
        finally:
            os._exit(0)
    return pid


def _busy(kind: str, ready_w: int) -> None:
    """Work beside the measured start: kernels, allocation churn, or memory held until killed."""
    torch.empty(1, device="cuda")
    if kind == "kernels":  # a model's forward: back-to-back ~1 ms GEMMs
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        (a @ a).sum().item()
        os.write(ready_w, b"r")
        while True:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()
    if kind == "malloc":  # the reference phase's blocks made and given back (empty_cache), 1 GiB at a time
        os.write(ready_w, b"r")
        while True:
            t = torch.empty(1 << 28, device="cuda")
            t.fill_(1.0)
            del t
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if kind.startswith("hold"):  # a client of the last task: its arena and working memory, killed at "go"
        t = torch.empty(int(kind[4:]) << 28, device="cuda")  # GiB of float32
        t.fill_(1.0)
        torch.cuda.synchronize()
        os.write(ready_w, b"r")
        while True:
            time.sleep(1)


def measure(condition: str, measured: int, beside: list[str], kill_at_go: bool) -> list[dict]:
    """One start of `measured` processes at once, with `beside` running (killed at "go" if `kill_at_go`)."""
    helpers = []
    for kind in beside:
        r, w = os.pipe()
        helpers.append((_fork(_busy, kind, w), r))
        os.close(w)  # a helper that dies is an end of file here, not a wait forever
    for _, r in helpers:
        if not os.read(r, 1):
            raise RuntimeError("a helper beside the measured start died")
    kids = []
    for _ in range(measured):
        go_r, go_w = os.pipe()
        out_r, out_w = os.pipe()
        kids.append((_fork(_child, go_r, out_w), go_w, out_r))
        os.close(go_r)
        os.close(out_w)
    time.sleep(0.5)  # their driver up (~0.13 s)
    if kill_at_go:
        for pid, _ in helpers:
            os.kill(pid, signal.SIGKILL)
    for _, go_w, _ in kids:
        try:
            os.write(go_w, b"g")
        except BrokenPipeError:
            pass  # it died before "go": its row says so
    rows = []
    for pid, _, out_r in kids:
        said = b""
        while chunk := os.read(out_r, 1 << 16):
            said += chunk
        rows.append({"condition": condition, **(json.loads(said) if said else {"error": "the child died"})})
        os.waitpid(pid, 0)
    for pid, _ in helpers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    return rows


CONDITIONS = {  # name: (measured at once, beside, killed at go)
    "alone": (1, [], False),
    "two_at_once": (2, [], False),
    "beside_kernels": (1, ["kernels"], False),
    "beside_malloc": (1, ["malloc"], False),
    "two_beside_kernels": (2, ["kernels"], False),
    "last_clients_end_2x8GiB": (1, ["hold8", "hold8"], True),
    "last_clients_end_2x20GiB": (1, ["hold20", "hold20"], True),
    "two_beside_kernels_and_clients_end": (2, ["kernels", "hold8", "hold8"], True),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--preload", action="store_true", help="first map, in this parent, the shared objects a child's "
                    "context and libraries map (as a fork server could before forking), then measure")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.conditions.split(",")
    rows = []
    tag = "_preloaded" if args.preload else ""
    if args.preload:
        import ctypes

        probe = measure("probe", 1, [], False)[0]
        for step in ("context", "cudnn", "cublas"):
            for path in probe.get("mapped", {}).get(step, []):
                t = time.perf_counter()
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    print(f"preloaded {path} ({time.perf_counter() - t:.3f} s, {step})", flush=True)
                except OSError as exc:
                    print(f"not preloaded {path}: {exc}", flush=True)
    with open(args.out / f"context_contention{tag}.jsonl", "w") as log:
        for rep in range(args.repeats):
            for name in names:
                measured, beside, kill = CONDITIONS[name]
                for row in measure(name, measured, beside, kill):
                    row["repeat"] = rep
                    rows.append(row)
                    log.write(json.dumps(row) + "\n")
                    log.flush()
    for name in names:
        mine = [r for r in rows if r["condition"] == name]
        mine = [r for r in mine if "error" not in r] or [{"context": -1, "cudnn": -1, "cublas": -1}]
        med = {k: round(statistics.median(r[k] for r in mine), 3) for k in ("context", "cudnn", "cublas")}
        print(f"{name + tag:40s} n={len(mine):2d} " + " ".join(f"{k} {v:.3f}" for k, v in med.items()), flush=True)


if __name__ == "__main__":
    main()
