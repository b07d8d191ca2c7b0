"""Attack (a): the futile stop ends a slow candidate's rounds early, so a kernel that goes wrong
only after some calls (a time bomb / a racy kernel that goes wrong on a fraction of calls) faces
fewer output checks.  Same kernel, early_stop on (the new stop) vs off.
usage: python drive_futile.py K [budget_s]   (K = call count after which outputs are wrong; 0 = never)"""
import sys, tempfile, json
from pathlib import Path
sys.path.insert(0, "/work/main")
from tests.conftest import cpu_workspace, RELU_MODEL_NEW, RELU_BINDING
from cuda_agent.evaluation import evaluate, EvalConfig, TimingConfig

K = int(sys.argv[1]); budget = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
KERNEL = '''
#include <cstdint>
static int64_t calls = 0;
extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
  calls++;
  const bool wrong = (%d > 0) && calls > %d;
  for (int rep = 0; rep < 6; ++rep)      // slow: ~6x the work, never faster than eager
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  if (wrong) y[0] += 1000.f;              // a wrong element after K calls
}
''' % (K, K)
cache = Path(tempfile.mkdtemp())
for early in (True, False):
    ws = cpu_workspace(Path(tempfile.mkdtemp()) / "relu", cache, RELU_MODEL_NEW,
                       {"relu.cpp": KERNEL, "relu_binding.cpp": RELU_BINDING})
    cfg = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache), worker_timeout_s=120, memory_limit_gb=3.0,
                     timing=TimingConfig(budget_s=budget, early_stop=early, interval_ms=1.0, warmup_ms=5))
    r = evaluate(ws, cfg)
    print(json.dumps({"early_stop": early, "K": K, "reward": r.reward, "rounds": r.judge.get("rounds"),
                      "m": r.calls_per_interval, "speedup": r.speedup_vs_eager, "reason": r.reason[:160]}), flush=True)
