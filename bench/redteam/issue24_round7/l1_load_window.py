"""l1: the candidate's load window (it now loads beside the baseline client's warm-up and check, and
is frozen only once it says ready). A static initializer of the library (it runs at load, after the
sandbox) misbehaves; the kernel itself is WRONG (relu + 1), so −1 is the only right verdict; anything
else ("infrastructure", a hang past the limits, reward ≥ 0) is the finding.
MODE: exit0 | segv | closesock | garbage | early_ready | early_done | stopself | control (no misdeed)."""
import sys, time
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "control"
ACTIONS = {
  "control": "",
  "exit0": "p_exit(0);",
  "segv": "*(volatile int*)8 = 1;",
  "closesock": "p_close(6);",
  "garbage": 'p_send(6, "\\x00\\xffnot json", 10, 0);',
  "early_ready": 'const char m[] = "{\\"type\\": \\"ready\\"}"; p_send(6, m, sizeof(m) - 1, 0);',
  "early_done": 'const char m[] = "{\\"type\\": \\"done\\", \\"outputs\\": []}"; p_send(6, m, sizeof(m) - 1, 0);',
  "stopself": "p_kill(p_getpid(), 19);",
}
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Exit = void (*)(int); using Close = int (*)(int); using Send = long (*)(int, const void*, unsigned long, int);
using Kill = int (*)(int, int); using Getpid = int (*)();
static int misdeed() {
  auto p_exit = (Exit)resolve("EXIT_"); auto p_close = (Close)resolve("CLOSE_"); auto p_send = (Send)resolve("SEND_");
  auto p_kill = (Kill)resolve("KILL_"); auto p_getpid = (Getpid)resolve("GETPID_");
  (void)p_exit; (void)p_close; (void)p_send; (void)p_kill; (void)p_getpid;
  ACTION
  return 1;
}
static int g_done = misdeed();
at::Tensor relu_forward(const at::Tensor& x) {
  auto y = at::empty_like(x);
  relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  float* p = y.data_ptr<float>(); for (int64_t i = 0; i < x.numel(); ++i) p[i] += 1.0f;   // wrong on purpose
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''.replace("ACTION", ACTIONS[mode]).replace("RESOLVER", RESOLVER)
for k, v in {"EXIT_": "_exit", "CLOSE_": "close", "SEND_": "send", "KILL_": "kill", "GETPID_": "getpid"}.items():
    BINDING = BINDING.replace('"%s"' % k, '"%s"' % enc(v))
run(f"l1_load_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING}, note=f"load-window misdeed {mode}; kernel wrong (relu+1)")
