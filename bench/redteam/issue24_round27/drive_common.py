"""Shared driver: evaluate a CPU workspace (task source, model_new.py, kernels) through cuda_agent.evaluation.evaluate."""
import sys, tempfile, json, time
from pathlib import Path
sys.path.insert(0, "/work/main")
from tests.conftest import cpu_workspace, RELU_MODEL_NEW, RELU_BINDING, RELU_KERNEL, RELU_TASK
from cuda_agent.evaluation import evaluate, EvalConfig, TimingConfig

CACHE = Path("/tmp/rt27_cache"); CACHE.mkdir(exist_ok=True)

def run(label, task_source, model_new, kernels, budget=0.5, name="t", **timing):
    ws = cpu_workspace(Path(tempfile.mkdtemp()) / name, CACHE, model_new, kernels, task_source, name)
    t = dict(budget_s=budget, warmup_ms=5); t.update(timing)
    cfg = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(CACHE), worker_timeout_s=120,
                     memory_limit_gb=3.0, timing=TimingConfig(**t))
    t0 = time.time()
    try:
        r = evaluate(ws, cfg)
        out = {"label": label, "reward": r.reward, "m": r.calls_per_interval, "speedup": r.speedup_vs_eager,
               "reason": (r.reason or "")[:400], "wall": round(time.time() - t0, 1)}
    except Exception as e:
        out = {"label": label, "exception": f"{type(e).__name__}: {e}"[:400], "wall": round(time.time() - t0, 1)}
    print(json.dumps(out), flush=True)
    return out
