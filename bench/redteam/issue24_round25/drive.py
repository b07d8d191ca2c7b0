"""Drive a real Judge("cpu") end to end on one task, the reference as its own solution (as
tests/evaluation/test_weights_shared.py does).  usage: python drive.py TASKFILE [N] [SHARE=0|1] [SEED]"""
import os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/work/main/src")
from cuda_agent.evaluation.config import EvalConfig, TimingConfig
from tests.evaluation.test_weights_shared import _request
from cuda_agent.evaluation.judge import Judge

def main():
    path = Path(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    share = (sys.argv[3] if len(sys.argv) > 3 else "0") == "1"
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 42
    src = path.read_text()
    tmp = Path(tempfile.mkdtemp(prefix=f"r25_{path.stem}_"))
    cache = tmp / "cache"; cache.mkdir(); os.environ["CUDA_AGENT_CACHE"] = str(cache)
    cfg = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache), worker_timeout_s=180, seed=seed,
                     memory_limit_gb=4.0, timing=TimingConfig(budget_s=0.3, min_trials=20, warmup_ms=20))
    req = _request(tmp, cache, cfg, src, path.stem)
    judge = Judge("cpu"); judge.shares_weights = share
    try:
        for i in range(n):
            t0 = time.monotonic()
            a = judge.evaluate(req)
            st = judge.state
            print(f"eval {i}: correct={a.correct} stage={a.stage} reason={str(a.reason)[:300]!r} "
                  f"({time.monotonic()-t0:.1f}s)", flush=True)
            if st is not None:
                print(f"   state: mutates={st.mutates} trials_held={st.trials is not None} refs_held={st.refs is not None} "
                      f"writes_weights={st.writes_weights}", flush=True)
    finally:
        judge.close()

if __name__ == "__main__":
    main()
