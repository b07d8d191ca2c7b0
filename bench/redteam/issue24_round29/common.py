"""Round 29: shared helpers. Each attack: a hostile workspace and an honest control, evaluated by the real
judge (cuda_agent.evaluation.evaluate, CPU backend, every guard on unless said), one JSON line each."""
from __future__ import annotations
import json, os, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tests"))
from conftest import cpu_workspace, RELU_MODEL_NEW, RELU_KERNEL, RELU_BINDING, RELU_TASK  # noqa: E402
from cuda_agent.evaluation import evaluate, EvalConfig, TimingConfig, GuardConfig  # noqa: E402

ROOT = Path("/tmp/rt29"); ROOT.mkdir(exist_ok=True)
CACHE = ROOT / "cache"; CACHE.mkdir(exist_ok=True)


def ws(name, binding=RELU_BINDING, kernel=RELU_KERNEL, model_new=RELU_MODEL_NEW, task=RELU_TASK):
    return cpu_workspace(Path(tempfile.mkdtemp(dir=ROOT, prefix=name + "-")), CACHE, model_new,
                         {"relu.cpp": kernel, "relu_binding.cpp": binding}, task, "relu")


def cfg(guards=None, **timing):
    t = {} if os.environ.get("RT29_DEFAULTS") else dict(warmup_ms=10)
    t.update(timing)
    return EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(CACHE), worker_timeout_s=200,
                      memory_limit_gb=3.0, timing=TimingConfig(**t), guards=guards or GuardConfig())


def run(label, w, c, grep=None):
    t0 = time.time()
    r = evaluate(w, c)
    row = {"label": label, "reward": r.reward, "correct": r.correct, "stage": r.stage,
           "reason": (r.reason or "")[:300], "speedup": r.speedup_vs_eager, "s": round(time.time() - t0, 1),
           "rounds": len((r.judge or {}).get("samples", {}).get("candidate", []) or []) if isinstance(r.judge, dict) else None}
    print(json.dumps(row), flush=True)
    if grep:
        print("\n".join(l for l in (r.worker_log or "").splitlines() if grep in l) or (r.worker_log or "")[-1500:], flush=True)
    with open(HERE / "results.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")
    return r
