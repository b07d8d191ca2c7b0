import sys, time, json, os
from pathlib import Path
sys.path.insert(0, "/work/main")
from tests.conftest import RELU_TASK, RELU_KERNEL, RELU_BINDING, RELU_MODEL_NEW
from cuda_agent.evaluation import EvalConfig, TimingConfig, GuardConfig, evaluate
from cuda_agent.tasks import Task
from cuda_agent.workspace import create_workspace

CACHE = Path("/tmp/redteam24/cache"); CACHE.mkdir(exist_ok=True)
os.environ.setdefault("CUDA_AGENT_CACHE", str(CACHE))

def cfg(static=True, torch_compute=True, **kw):
    g = GuardConfig() if static else GuardConfig(static_checks=False, symbols=False, torch_compute=torch_compute)
    timing = kw.pop("timing", TimingConfig(budget_s=0.2, min_trials=20, warmup_ms=5))
    kw.setdefault("compile_mode", None)
    return EvalConfig(backend="cpu", cache_dir=str(CACHE), worker_timeout_s=120,
                      memory_limit_gb=3.0, timing=timing, guards=g, **kw)

def run(name, model_new, kernels=None, task=RELU_TASK, static=True, torch_compute=True, **kw):
    t = Task.from_source(task, name=name)
    ws = create_workspace(t, Path("/tmp/redteam24/ws") / name, "cpu", cache_dir=CACHE, overwrite=True)
    (ws.root / "model_new.py").write_text(model_new)
    files = kernels if kernels is not None else {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING}
    for f, txt in files.items():
        (ws.root / "kernels" / f).write_text(txt)
    t0 = time.time()
    res = evaluate(ws, cfg(static, torch_compute, **kw))
    out = dict(name=name, static=static, reward=res.reward, correct=res.correct, stage=getattr(res, "stage", None),
               reason=(res.reason or "")[:3000], flags=getattr(res, "flags", None), secs=round(time.time()-t0,1))
    try:
        out["timing"] = {k: v for k, v in (res.model_dump().get("timing") or {}).items() if not isinstance(v, list)} if hasattr(res, "model_dump") else None
    except Exception as e:
        out["timing"] = str(e)
    try:
        d = res.model_dump(mode="json")
        out["speed"] = {k: d.get(k) for k in d if k not in ("trials", "reason", "sandbox", "judge", "build", "checks")}
        j = d.get("judge") or {}
        out["judge_keys"] = list(j)[:40]
    except Exception as e:
        out["speed"] = repr(e)
    print(json.dumps(out, indent=1, default=str)[:6000])
    with open("/tmp/redteam24/results.jsonl", "a") as f:
        f.write(json.dumps(out, default=str) + "\n")
    return res
