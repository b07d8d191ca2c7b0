"""Honest relu on the CPU backend: the control for this round (reward expected 1 on 2 cores)."""
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "/work/main/tests")
from conftest import cpu_workspace
from cuda_agent.evaluation import EvalConfig, TimingConfig

def fast_config(cache_dir):
    return EvalConfig(backend='cpu', compile_mode=None, cache_dir=str(cache_dir), worker_timeout_s=120,
                      memory_limit_gb=3.0, timing=TimingConfig(budget_s=0.2, min_trials=20, warmup_ms=5))
from cuda_agent.evaluation import evaluate

root = Path(tempfile.mkdtemp(prefix="rt23-"))
cache = root / "cache"; cache.mkdir()
import os; os.environ["CUDA_AGENT_CACHE"] = str(cache)
ws = cpu_workspace(root / "ws", cache)
t = time.time()
r = evaluate(ws, fast_config(cache))
out = {"name": "honest_relu", "reward": r.reward, "verdict": getattr(r, "verdict", None), "s": round(time.time() - t, 1),
       "speedup": getattr(r, "speedup", None)}
print(json.dumps(out, default=str))
with open(Path(__file__).parent / "results.jsonl", "a") as f:
    f.write(json.dumps(out, default=str) + "\n")
