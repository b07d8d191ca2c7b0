"""Benchmark of the evaluation environment itself.

Measures, side by side in one run on the local device:
  1. build: one-time PCH, a cold one-kernel build (new sources), a warm rebuild, and
     torch's `load_inline` of the same kernel (the KernelBench way);
  2. evaluation latency: cold (empty caches: build + torch.compile baseline) vs warm;
  3. timing spread: the candidate's median over repeated evaluations (max / min);
  4. noise safety: how often an unchanged candidate (the reference itself) is called faster.

    python bench/env_bench.py --backend cuda --out bench/results/h100.json
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path

from cuda_agent.backends import default_backend_name, get_backend
from cuda_agent.evaluation import EvalConfig, evaluate
from cuda_agent.evaluation.config import GuardConfig
from cuda_agent.languages.cpp.build import build_workspace, ensure_pch
from cuda_agent.examples import get_example, list_examples
from cuda_agent.workspace import create_workspace

NOOP = {
    "cuda": ("noop.cu", '#include <cuda_runtime.h>\n__global__ void noop_k() {}\n'
             'extern "C" void noop_launch(cudaStream_t s) { noop_k<<<1, 1, 0, s>>>(); }\n',
             'extern "C" void noop_launch(cudaStream_t s);\n'
             'at::Tensor noop(const at::Tensor& x) { noop_launch(current_stream()); return x; }\n'),
    "cpu": ("noop.cpp", 'extern "C" int noop_k(int x) { return x + 1; }\n',
            'extern "C" int noop_k(int x);\n'
            'at::Tensor noop(const at::Tensor& x) { noop_k(1); return x; }\n'),
}


def _noop_kernels(ws: Path, backend: str, salt: str = "") -> None:
    name, kernel, binding = NOOP[backend]
    for f in (ws / "kernels").iterdir():
        f.unlink()
    (ws / "kernels" / name).write_text(kernel + f"// {salt}\n")
    (ws / "kernels" / "noop_binding.cpp").write_text(
        '#include "binding_registry.h"\n' + binding + "REGISTER_BINDING(noop, noop)\n")


def bench_build(backend: str, root: Path) -> dict:
    be = get_backend(backend)
    cache = root / "build-cache"
    ex = list_examples()[0]
    ws = create_workspace(ex.task, root / "build-ws", backend, cache_dir=cache)
    t0 = time.monotonic()
    ensure_pch(be, cache, time.monotonic() + 600)
    pch_s = time.monotonic() - t0
    _noop_kernels(ws.root, backend, salt=str(time.time()))
    cold = build_workspace(ws.root, be, cache_dir=cache)
    warm = build_workspace(ws.root, be, cache_dir=cache)
    assert cold.ok and warm.ok, cold.log
    out = {"pch_once_s": pch_s, "cold_build_s": cold.seconds, "warm_build_s": warm.seconds,
           "cold_units": cold.compiled_units}
    out["load_inline_s"] = _load_inline_seconds(backend, root / "inline")
    out["load_inline_over_cold_build"] = out["load_inline_s"] / cold.seconds
    return out


def _load_inline_seconds(backend: str, build_dir: Path) -> float:
    from torch.utils.cpp_extension import load_inline

    build_dir.mkdir(parents=True, exist_ok=True)
    cpp = "torch::Tensor noop(torch::Tensor x);"
    body = ("__global__ void noop_k() {}\n"
            "torch::Tensor noop(torch::Tensor x) { noop_k<<<1, 1>>>(); return x; }\n")
    t0 = time.monotonic()
    if backend == "cuda":
        load_inline(name=f"inline_{int(t0)}", cpp_sources=cpp, cuda_sources=body, functions=["noop"],
                    build_directory=str(build_dir), verbose=False)
    else:
        load_inline(name=f"inline_{int(t0)}", cpp_sources=body.replace("__global__ void noop_k() {}\n", "")
                    .replace("noop_k<<<1, 1>>>(); ", ""), functions=["noop"],
                    build_directory=str(build_dir), verbose=False)
    return time.monotonic() - t0


def bench_latency_and_spread(backend: str, root: Path, example: str, repeats: int, gap_s: float) -> dict:
    cache = root / "eval-cache"
    ex = get_example(example)
    ws = create_workspace(ex.task, root / f"eval-{example}", backend, cache_dir=cache)
    ex.install_solution(ws.root, backend)
    cfg = EvalConfig(backend=backend, cache_dir=str(cache))
    cold = evaluate(ws, cfg)
    warm = []
    for _ in range(repeats):
        time.sleep(gap_s)  # an agent thinks between evaluations; the spare worker starts meanwhile
        warm.append(evaluate(ws, cfg))
    meds = [r.time_ms.candidate for r in warm if r.time_ms.candidate]
    return {
        "example": example, "cold_eval_s": cold.seconds, "cold_reward": cold.reward,
        "cold_phases": cold.phases, "gap_between_evals_s": gap_s,
        "warm_eval_s": [r.seconds for r in warm], "warm_rewards": [r.reward for r in warm],
        "warm_phases": [r.phases for r in warm],
        "candidate_median_ms": meds, "spread_max_over_min": max(meds) / min(meds) if meds else None,
        "reasons": sorted({r.reason for r in [cold, *warm]}),
    }


def bench_unchanged(backend: str, root: Path, per_task: int) -> dict:
    """The starter model_new.py is the reference renamed: it must never be called faster.
    (The guards, which forbid exactly that torch code, are off for this measurement.)"""
    cache = root / "eval-cache"
    cfg = EvalConfig(backend=backend, cache_dir=str(cache), guards=GuardConfig.off())
    rewards: dict[str, list[int]] = {}
    detail: list[dict] = []
    for ex in list_examples():
        ws = create_workspace(ex.task, root / f"same-{ex.name}", backend, cache_dir=cache)
        _noop_kernels(ws.root, backend)
        rewards[ex.name] = []
        for _ in range(per_task):
            r = evaluate(ws, cfg)
            rewards[ex.name].append(r.reward)
            detail.append({"task": ex.name, "reward": r.reward, "seconds": r.seconds,
                           "speedup_vs_eager": r.speedup_vs_eager, "speedup_vs_compile": r.speedup_vs_compile,
                           "baseline_cached": r.baseline_cached, "reason": r.reason[:200]})
    flat = [x for xs in rewards.values() for x in xs]
    return {"evaluations": len(flat), "reward_1": sum(x == 1 for x in flat),
            "called_faster": sum(x >= 2 for x in flat), "failed": sum(x < 0 for x in flat),
            "rate_reward_1": sum(x == 1 for x in flat) / max(len(flat), 1), "per_task": rewards,
            "evaluations_detail": detail}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--example", default="swish")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gap", type=float, default=3.0, help="seconds between warm evaluations")
    ap.add_argument("--unchanged-per-task", type=int, default=3)
    ap.add_argument("--skip", nargs="*", default=[], choices=["build", "latency", "unchanged"])
    args = ap.parse_args()
    backend = args.backend or default_backend_name()
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-bench-"))
    report: dict = {"backend": backend, "machine": platform.node(), "device": get_backend(backend).device_key()}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=1))

    try:
        if "build" not in args.skip:
            report["build"] = bench_build(backend, root)
            save()
            print("build", json.dumps(report["build"]), flush=True)
        if "latency" not in args.skip:
            report["latency"] = bench_latency_and_spread(backend, root, args.example, args.repeats, args.gap)
            save()
            print("latency", json.dumps(report["latency"]), flush=True)
        if "unchanged" not in args.skip:
            report["unchanged"] = bench_unchanged(backend, root, args.unchanged_per_task)
            save()
            print("unchanged", json.dumps({k: v for k, v in report["unchanged"].items()
                                           if k not in ("per_task", "evaluations_detail")}),
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
