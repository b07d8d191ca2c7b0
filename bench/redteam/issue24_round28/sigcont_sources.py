import sys, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main/tests")
from conftest import cpu_workspace, RELU_MODEL_NEW, RELU_KERNEL
from cuda_agent.evaluation import evaluate, EvalConfig, TimingConfig, GuardConfig
BINDING = r'''
#include "binding_registry.h"
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static int armed = 0;
static void arm() {
  struct sigevent sev; memset(&sev, 0, sizeof sev); sev.sigev_notify = SIGEV_SIGNAL; sev.sigev_signo = SIGCONT;
  long tid = 0; long r = syscall(SYS_timer_create, CLOCK_MONOTONIC, &sev, &tid);
  fprintf(stderr, "RT28 timer_create %ld errno %d\n", r, errno);
  int p[2]; pipe(p); r = fcntl(p[0], 10 /*F_SETSIG*/, SIGCONT); fprintf(stderr, "RT28 F_SETSIG %ld errno %d\n", r, errno);
  r = syscall(SYS_mq_notify, 0, &sev); fprintf(stderr, "RT28 mq_notify %ld errno %d\n", r, errno);
  r = prctl(PR_SET_PDEATHSIG, SIGCONT); fprintf(stderr, "RT28 pdeathsig %ld errno %d ppid %d\n", r, errno, getppid());
  r = syscall(SYS_pidfd_open, getppid(), 0); fprintf(stderr, "RT28 pidfd_open(parent) %ld errno %d\n", r, errno);
  r = kill(0, SIGCONT); fprintf(stderr, "RT28 kill(0,SIGCONT) %ld errno %d\n", r, errno);
  r = syscall(SYS_io_uring_setup, 4, 0); fprintf(stderr, "RT28 io_uring %ld errno %d\n", r, errno);
  fflush(stderr);
}
at::Tensor relu_forward(const at::Tensor& x) {
  if (!armed++) arm();
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''
cache = Path("/tmp/rt28/cache"); cache.mkdir(exist_ok=True)
ws = cpu_workspace(Path(tempfile.mkdtemp(dir="/tmp/rt28")), cache, RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING})
cfg = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache), worker_timeout_s=200, memory_limit_gb=3.0,
                 guards=GuardConfig(static_checks=False, symbols=False), timing=TimingConfig(budget_s=0.3, warmup_ms=10))
res = evaluate(ws, cfg)
print("reward", res.reward, res.reason[:200])
print("\n".join(l for l in (res.worker_log or "").splitlines() if "RT28" in l) or res.worker_log[-1500:])
