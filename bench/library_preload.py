"""Two costs of a client process on a GPU host, measured in forked children as the fork server
makes them (a warm parent that imported torch and never started the device):

1. Its first convolution and matmul (cuDNN's and cuBLAS's start: 0.15 s and 0.09 s of every new
   task's client on an H100, issue 23), with and without cuDNN's sub-libraries loaded in the parent
   before the fork (`--preload`): how much of the start is loading shared objects.
2. How long a child with a device context and N GiB allocated takes to be gone after SIGKILL
   (waitpid returns): what a judge waits for when it reaps the last task's clients.

    python bench/library_preload.py --out results.json
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import signal
import time
from pathlib import Path


def cudnn_sublibraries() -> list[str]:
    """cuDNN's sub-libraries beside the libcudnn.so.9 this process mapped (torch links the dispatcher only)."""
    maps = Path("/proc/self/maps").read_text().split()
    here = sorted({os.path.dirname(p) for p in maps if "libcudnn.so" in p})
    return sorted(p for d in here for p in glob.glob(os.path.join(d, "libcudnn_*.so*")))


def child_start(write_fd: int) -> None:
    import torch

    marks = [time.perf_counter()]
    x = torch.ones(1, 1, 8, 8, device="cuda")
    torch.cuda.synchronize()
    marks.append(time.perf_counter())
    torch.nn.functional.conv2d(x, torch.ones(1, 1, 3, 3, device="cuda"))
    torch.cuda.synchronize()
    marks.append(time.perf_counter())
    _ = x[0, 0] @ x[0, 0]
    torch.cuda.synchronize()
    marks.append(time.perf_counter())
    steps = {k: round(b - a, 4) for k, a, b in zip(("device", "cudnn", "cublas"), marks, marks[1:])}
    os.write(write_fd, json.dumps(steps).encode())
    os._exit(0)


def fork_and_read(target, *args) -> dict:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            target(w, *args)
        finally:
            os._exit(1)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data or b"{}")


def child_hold(write_fd: int, gib: float) -> None:
    import torch

    held = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda") if gib else torch.ones(1, device="cuda")
    held.fill_(1)
    torch.cuda.synchronize()
    os.write(write_fd, b"up")
    os.close(write_fd)
    time.sleep(600)


def kill_time(gib: float) -> float:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child_hold(w, gib)
        os._exit(0)
    os.close(w)
    os.read(r, 2)
    os.close(r)
    t0 = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return round(time.perf_counter() - t0, 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()
    import torch  # noqa: F401 - imported, the device never started, as in the fork server

    result: dict = {"plain": [], "preloaded": [], "kill_s": {}}
    for _ in range(args.repeats):
        result["plain"].append(fork_and_read(child_start))
    subs = cudnn_sublibraries()
    t0 = time.perf_counter()
    for path in subs:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    result["preload_s"] = round(time.perf_counter() - t0, 4)
    result["sublibraries"] = [os.path.basename(p) for p in subs]
    for _ in range(args.repeats):
        result["preloaded"].append(fork_and_read(child_start))
    for gib in (0, 4, 20):
        result["kill_s"][str(gib)] = [kill_time(gib) for _ in range(3)]
    print(json.dumps(result, indent=1))
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
