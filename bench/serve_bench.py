"""Throughput and latency of `cuda-agent serve` against calling `evaluate_files` directly, in one run.

    python bench/serve_bench.py --n 4 --clients 4 --out bench/results/serve_cpu.json

N distinct cheap evaluations (no timing, one trial) of a small ReLU task, each candidate made
distinct by a comment so none is answered from the store: first directly, one after another in
this process; then through a service (one slot) started as a subprocess, from `--clients`
concurrent clients; then the same N again (answered from the store)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cuda_agent.evaluation import EvalConfig, evaluate_files  # noqa: E402
from cuda_agent.tasks import Task  # noqa: E402
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK  # noqa: E402
from tests.serve.test_serve import TOKEN, Server  # noqa: E402


def files(i: int, tag: str) -> dict[str, str]:
    return {"model_new.py": RELU_MODEL_NEW, "kernels/relu.cpp": RELU_KERNEL + f"\n// {tag} {i}\n",
            "kernels/relu_binding.cpp": RELU_BINDING}


def summary(lat: list[float], wall: float) -> dict[str, float]:
    lat = sorted(lat)
    return {"n": len(lat), "wall_s": round(wall, 2), "throughput_per_s": round(len(lat) / wall, 3),
            "p50_s": round(statistics.median(lat), 3), "p99_s": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cache = Path(os.environ.get("CUDA_AGENT_CACHE", "/tmp/cuda-agent-serve-bench-cache"))
    os.environ["CUDA_AGENT_CACHE"] = str(cache)
    tag = str(time.time())
    task = Task.from_source(RELU_TASK, name="relu")
    config = EvalConfig(backend="cpu", measure=False, trials=1, compile_mode=None, memory_limit_gb=3.0)
    evaluate_files(task, "cpu", files(-1, tag), config)  # warm the build cache and PCH for both sides

    lat, t0 = [], time.monotonic()
    for i in range(args.n):
        t = time.monotonic()
        assert evaluate_files(task, "cpu", files(i, "direct" + tag), config).reward == 1
        lat.append(time.monotonic() - t)
    direct = summary(lat, time.monotonic() - t0)

    db = cache / f"bench-{tag}.sqlite"
    srv = Server(db, cache)
    try:
        opts = {"measure": False, "trials": 1, "compile_baseline": False}
        srv.client.evaluate(RELU_TASK, files(-2, tag), opts, timeout_s=600)  # start the slot's judge

        def one(i: int) -> float:
            t = time.monotonic()
            assert srv.client.evaluate(RELU_TASK, files(i, "served" + tag), opts, timeout_s=600).reward == 1
            return time.monotonic() - t

        t0 = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            served = summary(list(pool.map(one, range(args.n))), time.monotonic() - t0)
        t0 = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            repeats = summary(list(pool.map(one, range(args.n))), time.monotonic() - t0)
        health = srv.client.health()
    finally:
        srv.stop()
    out = {"machine": f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", "options": "cpu, no timing, 1 trial",
           "direct_evaluate_files": direct, "service_1_slot": served, "service_repeats_from_store": repeats,
           "service_health": health}
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
