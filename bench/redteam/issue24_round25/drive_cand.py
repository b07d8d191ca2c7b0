"""A custom candidate (model_new.py + kernels) against a real Judge("cpu").
usage: python drive_cand.py CASE [N]"""
import os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/work/main/src")
from cuda_agent.evaluation.config import EvalConfig, TimingConfig
from cuda_agent.evaluation.judge import Judge
from tests.conftest import cpu_workspace, RELU_TASK, RELU_MODEL_NEW, RELU_BINDING

# relu, honest output on every call; calls 7 and 8 of the process (after the 6 verification calls: the warm-up's
# two batches when the load runs no call) first spin ~SPIN s: the window a warm-up gives, untimed
SLOW_KERNEL = '''
#include <cstdint>
static int64_t calls = 0;
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  ++calls;
  if (calls >= FIRST && calls < FIRST + 2) { volatile uint64_t s = 0; for (uint64_t i = 0; i < SPINITERS; ++i) s += i; }
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''

def request(root, cache, cfg, kernel):
    from cuda_agent.backends import get_backend
    from cuda_agent.evaluation.evaluator import _baseline_key, _judge_request
    from cuda_agent.languages import get_language
    ws = cpu_workspace(root / "relu", cache, RELU_MODEL_NEW, {"relu.cpp": kernel, "relu_binding.cpp": RELU_BINDING},
                       task_source=RELU_TASK, name="relu")
    backend, lang = get_backend("cpu"), get_language(ws.language)
    build = lang.build(ws.root, backend, cache_dir=cache, timeout_s=300)
    assert build.ok, build.log
    lang.publish(ws.root, backend, build.library)
    return _judge_request(ws, ws.task, backend, cfg, cache, _baseline_key(ws.task.content_hash, backend, cfg, None),
                          build.library)

def main():
    first, iters = int(sys.argv[1]), sys.argv[2]
    tmp = Path(tempfile.mkdtemp(prefix="r25_cand_"))
    cache = tmp / "cache"; cache.mkdir(); os.environ["CUDA_AGENT_CACHE"] = str(cache)
    cfg = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache), worker_timeout_s=300)
    kernel = SLOW_KERNEL.replace("FIRST", str(first)).replace("SPINITERS", iters)
    req = request(tmp, cache, cfg, kernel)
    judge = Judge("cpu")
    try:
        t0 = time.monotonic()
        a = judge.evaluate(req)
        print(f"correct={a.correct} reward={getattr(a, 'reward', None)} stage={a.stage} reason={str(a.reason)[:300]!r} "
              f"wall={time.monotonic()-t0:.1f}s", flush=True)
        s = a.samples if hasattr(a, "samples") else None
        if s:
            print({k: (len(v), sorted(v)[len(v)//2], max(v)) for k, v in s.items()})
        print("phases:", getattr(a, "phases", None) or (a.judge or {}).get("phases"))
    finally:
        judge.close()

if __name__ == "__main__":
    main()
