"""l2: the candidate's own "ready" message, sent from a static initializer over the harness's channel
(fd 6), with a "sandbox" field that is not an object. `_CandidateSession.await_ready` does
`dict(msg.get("sandbox") or {}, namespaces=...)` outside any handler that blames the candidate: a
list / string / number raises TypeError or ValueError out of evaluate() and the judge answers
"fault" (infrastructure) with its traceback. The kernel is WRONG (relu + 1): −1 is the right verdict.
MODE: list | str | int | control (a well-formed {"type":"ready","sandbox":{}}: round 7's early_ready)."""
import sys
from common import *
mode = sys.argv[1] if len(sys.argv) > 1 else "list"
PAYLOAD = {"list": '[1, 2]', "str": '"abc"', "int": '5', "control": '{}'}[mode]
msg = '{"type": "ready", "sandbox": %s}' % PAYLOAD
cmsg = msg.replace('\\', '\\\\').replace('"', '\\"')
BINDING = r'''
#include "binding_registry.h"
#include <cstdint>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
RESOLVER
using Send = long (*)(int, const void*, unsigned long, int);
static int misdeed() {
  auto p_send = (Send)resolve("SEND_");
  const char m[] = "MSG"; p_send(6, m, sizeof(m) - 1, 0);
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
'''.replace("MSG", cmsg).replace("RESOLVER", RESOLVER).replace('"SEND_"', '"%s"' % enc("send"))
res = run(f"l2_ready_sandbox_{mode}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": BINDING},
          note=f"early ready with sandbox={PAYLOAD}; kernel wrong (relu+1)")
record(name=f"l2_ready_sandbox_{mode}_summary", reward=res.reward, stage=res.model_dump(mode="json").get("stage"),
       reason=(res.reason or "")[:700])
