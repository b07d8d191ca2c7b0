import sys, time, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main/tests")
from conftest import cpu_workspace, RELU_MODEL_NEW
from cuda_agent.evaluation import evaluate, EvalConfig, TimingConfig

BINDING = r'''
#include "binding_registry.h"
extern "C" void relu_kernel(const float* x, float* y, int64_t n, int reps, int wrong);
static int64_t calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  ++calls;
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), REPS, calls > LIMIT);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''
KERNEL = r'''
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n, int reps, int wrong) {
  for (int r = 0; r < reps; ++r)
    for (int64_t i = 0; i < n; ++i) { float v = x[i]; y[i] = wrong ? v : (v > 0.f ? v : 0.f); asm volatile("" ::: "memory"); }
}
'''
cache = Path("/tmp/rt28/cache"); cache.mkdir(exist_ok=True)
limit = int(sys.argv[1]); reps = int(sys.argv[2]) if len(sys.argv) > 2 else 8
ws = cpu_workspace(Path(tempfile.mkdtemp(dir="/tmp/rt28")), cache, RELU_MODEL_NEW,
    {"relu.cpp": KERNEL, "relu_binding.cpp": BINDING.replace("LIMIT", str(limit)).replace("REPS", str(reps))})
cfg = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache), worker_timeout_s=200, memory_limit_gb=3.0,
                 timing=TimingConfig(warmup_ms=20, early_stop=(sys.argv[3] != "noearly") if len(sys.argv) > 3 else True))
t = time.time()
res = evaluate(ws, cfg)
tm = res.timing if hasattr(res, "timing") else None
print("LIMIT", limit, "reward", res.reward, "correct", res.correct, "reason", (res.reason or "")[:200], "secs", round(time.time()-t,1))
try:
    j = res.judge or {}
    print({k: (v if not isinstance(v, (list, dict)) else type(v).__name__) for k, v in j.items()})
    print("samples:", {k: len(v) for k, v in (getattr(res, "samples", None) or {}).items()})
except Exception as e: print(e)
print("rounds", res.judge.get("rounds"), "m", res.calls_per_interval, "speedup", res.speedup_vs_eager)
