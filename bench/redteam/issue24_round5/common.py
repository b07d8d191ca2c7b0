"""Shared driver for round-5 reproducers: default EvalConfig(backend="cpu") with every guard on,
only cache_dir (and optionally timing/compile) set. Appends a line to results.jsonl per run."""
import sys, time, json, os
from pathlib import Path
sys.path.insert(0, "/work/main")
from tests.conftest import RELU_TASK, RELU_KERNEL, RELU_BINDING, RELU_MODEL_NEW
from cuda_agent.evaluation import EvalConfig, TimingConfig, GuardConfig, evaluate
from cuda_agent.tasks import Task
from cuda_agent.workspace import create_workspace

ROOT = Path("/tmp/redteam-r5"); ROOT.mkdir(exist_ok=True)
CACHE = ROOT / "cache"; CACHE.mkdir(exist_ok=True)
os.environ.setdefault("CUDA_AGENT_CACHE", str(CACHE))
RESULTS = Path(__file__).resolve().parent / "results.jsonl"

def cfg(static=True, torch_compute=True, **kw):
    g = GuardConfig() if static else GuardConfig(static_checks=False, symbols=False, torch_compute=torch_compute)
    return EvalConfig(backend="cpu", cache_dir=str(CACHE), guards=g, **kw)

def run(name, model_new, kernels=None, task=RELU_TASK, static=True, torch_compute=True, note="", **kw):
    t = Task.from_source(task, name=name)
    ws = create_workspace(t, ROOT / "ws" / name, "cpu", cache_dir=CACHE, overwrite=True)
    (ws.root / "model_new.py").write_text(model_new)
    files = kernels if kernels is not None else {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING}
    for f, txt in files.items():
        (ws.root / "kernels" / f).write_text(txt)
    t0 = time.time()
    c = cfg(static, torch_compute, **kw)
    res = evaluate(ws, c)
    d = res.model_dump(mode="json")
    out = dict(name=name, note=note, static=static, reward=res.reward, correct=res.correct, stage=d.get("stage"),
               reason=(res.reason or "")[:3000], flags=d.get("flags"), secs=round(time.time() - t0, 1),
               speedup_vs_eager=d.get("speedup_vs_eager"), speedup_vs_compile=d.get("speedup_vs_compile"),
               interval=d.get("speedup_interval"), time_ms=d.get("time_ms"),
               calls_per_interval=d.get("calls_per_interval"),
               trials=[(t.get("ok"), (t.get("detail") or t.get("reason") or "")[:200]) if isinstance(t, dict) else str(t)[:200]
                       for t in (d.get("trials") or [])],
               rounds={k: (d.get(k) or {}).get("trials") for k in ("eager_stats", "compile_stats", "candidate_stats")},
               worker_log=(d.get("worker_log") or "")[-4000:],
               judge=json.dumps(d.get("judge"), default=str)[:3000], eager_stats=json.dumps(d.get("eager_stats"), default=str)[:1500], config=dict(budget_s=c.timing.budget_s, compile_mode=c.compile_mode))
    print(json.dumps(out, indent=1, default=str)[:8000])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(out, default=str) + "\n")
    return res
