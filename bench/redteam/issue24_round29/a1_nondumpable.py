"""A1: prctl(PR_SET_DUMPABLE, 0) (allowed: only PR_SET_PDEATHSIG is denied) with a WRONG output (y = x).
Non-dumpable, /proc/<pid> turns root-owned and ptrace-mode checks need CAP_SYS_PTRACE: if the judge then
cannot read the output (process_vm_readv EPERM) or its /proc looks fail, the verdict might become the judge's
fault (retried as infrastructure) instead of -1. Control: the honest relu, also non-dumpable (it must keep 1)."""
from common import *  # noqa
import sys
B = r'''
#include "binding_registry.h"
#include <sys/prctl.h>
#include <errno.h>
#include <stdio.h>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
static int armed = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  if (!armed++) { long r = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); fprintf(stderr, "RT29 dumpable0 %ld errno %d now %d\n", r, errno, prctl(PR_GET_DUMPABLE)); fflush(stderr); }
  auto y = at::empty_like(x);
  if (WRONG) { float* o = y.data_ptr<float>(); const float* i = x.data_ptr<float>(); for (int64_t k = 0; k < x.numel(); ++k) o[k] = i[k]; }
  else relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''
if __name__ == "__main__":
    g = GuardConfig(static_checks=False, symbols=False)
    run("a1 nondumpable wrong", ws("a1w", B.replace("WRONG", "1")), cfg(g, budget_s=0.3), grep="RT29")
    run("a1 nondumpable honest", ws("a1h", B.replace("WRONG", "0")), cfg(g, budget_s=0.3), grep="RT29")
    run("a1 control honest", ws("a1c"), cfg(budget_s=0.3))
