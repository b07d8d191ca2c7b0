"""Evaluate a workspace N times in one process (the judge stays warm); one line per evaluation."""
import json, sys, time
from cuda_agent import evaluate, EvalConfig
ws, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    t = time.time()
    r = evaluate(ws, EvalConfig())
    j = r.judge or {}
    print(json.dumps({"i": i, "reward": r.reward, "rounds": j.get("rounds"), "m": r.calls_per_interval,
                      "vs_eager": round(r.speedup_vs_eager or 0, 3), "vs_compile": round(r.speedup_vs_compile or 0, 3),
                      "spread": j.get("ratio_spread"), "s": round(time.time() - t, 1), "reason": r.reason[:160]}), flush=True)
