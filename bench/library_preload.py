"""Does loading cuDNN's sub-libraries in the fork server shorten a client's first convolution?

    for i in 1 2 3 4; do for v in none preloaded; do
      PYTHONPATH=src python bench/library_preload.py --variant $v --out preload.jsonl; done; done

A client forked from the fork server pays, after its device context, cuDNN's first
convolution (0.09-0.2 s on an H100) and cuBLAS's first matmul (0.07-0.09 s), on a new task's
critical path. Part of cuDNN's is `dlopen` of its sub-libraries (hundreds of MB of code),
which needs no device: a parent that has them loaded before it forks gives every child them
mapped. Each run is a parent that imported torch (the fork server's state), with or without
the sub-libraries loaded, forking two children at once (as a new task's two clients); each child
reports its driver start, context, first convolution, first matmul, and a small conv net's
first forward, as seconds. One JSON line per child.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import time
from pathlib import Path

from cuda_agent.evaluation.judge import warm_up_libraries  # imported before the fork, as the fork server has it


def cudnn_libraries() -> list[str]:
    """cuDNN's sub-libraries beside the one torch links (`nvidia/cudnn/lib` in a pip install)."""
    import torch

    roots = [Path(torch.__file__).parent / "lib"]
    try:
        import nvidia.cudnn  # type: ignore[import-not-found]

        roots += [Path(p) / "lib" for p in nvidia.cudnn.__path__]
    except ImportError:
        pass
    found: list[str] = []
    for root in roots:
        found += sorted(glob.glob(str(root / "libcudnn_*.so*")))
    return found


def mapped(name: str) -> bool:
    return name in Path("/proc/self/maps").read_text()


def child(write_fd: int, variant: str) -> None:
    import torch

    marks = {"variant": variant, "cudnn_graph_mapped_before": mapped("libcudnn_graph")}
    t = time.perf_counter()
    torch.cuda.init()
    marks["driver"] = time.perf_counter() - t
    t = time.perf_counter()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    marks["context"] = time.perf_counter() - t
    steps = [("start", time.perf_counter())]
    warm_up_libraries(torch, "cuda", steps)  # the judge's own first convolution (cuDNN), then matmul (cuBLAS)
    for (_, before), (library, at) in zip(steps, steps[1:]):
        marks[{"cudnn": "first_conv", "cublas": "first_matmul"}[library]] = at - before
    net = torch.nn.Sequential(*[torch.nn.Conv2d(16 + 8 * i, 16 + 8 * (i + 1), 3, padding=1) for i in range(12)]).cuda()
    inp = torch.randn(4, 16, 56, 56, device="cuda")
    t = time.perf_counter()
    with torch.no_grad():
        net(inp)
    torch.cuda.synchronize()
    marks["net_first_forward"] = time.perf_counter() - t
    os.write(write_fd, (json.dumps(marks) + "\n").encode())
    os._exit(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", choices=("none", "preloaded"), required=True)
    ap.add_argument("--out", type=Path, required=True, help="a JSON lines file, appended to")
    args = ap.parse_args()
    import torch  # noqa: F401 - the fork server's state: torch imported, no device started

    preload_s = None
    if args.variant == "preloaded":  # once loaded a library stays: one parent per variant
        t = time.perf_counter()
        for lib in cudnn_libraries():
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        preload_s = time.perf_counter() - t
    r, w = os.pipe()
    pids = []
    for _ in range(2):  # two at once, as a new task's two clients start
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(w, args.variant)
        pids.append(pid)
    os.close(w)
    for pid in pids:
        os.waitpid(pid, 0)
    with os.fdopen(r) as fh:
        rows = [dict(json.loads(line), parent_preload_s=preload_s) for line in fh if line.strip()]
    with args.out.open("a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
            print(json.dumps(row))


if __name__ == "__main__":
    main()
