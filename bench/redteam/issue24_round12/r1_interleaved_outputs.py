"""R1: two outputs carved from one allocation, rows interleaved: each pair costs the judge ~1.3-1.6 s of CPU and
~1 GiB of transient memory (`_really_overlap` builds an int64 index per output *byte*), outside every timed
interval, on every batch of every round.

The candidate is a correct relu over a (1024, 4096) float input (16 MiB out). Its binding allocates one
(2048, 4096) buffer per two calls and returns the even rows to the first call and the odd rows to the second
(strides (8192, 1): an extent of 2x the elements, within the layout check's padding allowance, and no byte
shared: the honest `test_two_outputs_carved_from_one_allocation_are_fine` pattern). Their spans overlap and
neither is dense, so `check_aliasing` (judge.py) calls `_really_overlap` for every such pair, which allocates
`numel * element_size` int64s per tensor, twice. Deserved: 1, in the time an honest relu takes. Control: the
same relu with one fresh allocation per call. The judge's peak RSS (VmHWM) and the evaluation's seconds are
recorded. Usage: python r1_interleaved_outputs.py
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

TASK = common.RELU_TASK.replace("torch.randn(64, 1024)", "torch.randn(1024, 4096)")
BINDING = r'''
#include "binding_registry.h"
extern "C" void relu_rows(const float* x, float* y, int64_t rows, int64_t cols, int64_t ystride);
static at::Tensor pending;   // the buffer whose odd rows the next call returns
static long calls = 0;
at::Tensor relu_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  int64_t r = x.size(0), c = x.size(1);
  at::Tensor y;
  if (calls++ % 2 == 0) { pending = at::empty({2 * r, c}, x.options()); y = pending.slice(0, 0, 2 * r, 2); }
  else { y = pending.slice(0, 1, 2 * r, 2); pending = at::Tensor(); }
  relu_rows(x.data_ptr<float>(), y.data_ptr<float>(), r, c, 2 * c);
  return y;
}
REGISTER_BINDING(relu, relu_forward)
'''
KERNEL = r'''
#include <cstdint>
extern "C" void relu_rows(const float* x, float* y, int64_t rows, int64_t cols, int64_t ystride) {
  #pragma omp parallel for
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) { float v = x[i * cols + j]; y[i * ystride + j] = v > 0.f ? v : 0.f; }
}
'''


def judge_hwm_gib() -> float:
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and b"cuda_agent.evaluation.judge" in (p / "cmdline").read_bytes():
                m = re.search(r"VmHWM:\s+(\d+) kB", (p / "status").read_text())
                return round(int(m.group(1)) / 2**20, 2)
        except OSError:
            continue
    return -1.0


def main() -> None:
    cfg = common.config()
    try:
        common.run("r1_interleaved_outputs", "honest control", common.workspace("r1honest", task_source=TASK), cfg,
                   deserved="1", judge_vmhwm_gib_after=None)
        h0 = judge_hwm_gib()
        common.run("r1_interleaved_outputs", "attack (rows interleaved in pairs)",
                   common.workspace("r1attack", task_source=TASK,
                                    kernels={"relu.cpp": KERNEL, "relu_binding.cpp": BINDING}),
                   cfg, deserved="1, at an honest relu's cost to the judge", judge_vmhwm_gib_before=h0,
                   judge_vmhwm_gib_after=judge_hwm_gib())
        common.run("r1_interleaved_outputs", "honest control (after)", common.workspace("r1honest2", task_source=TASK),
                   cfg, deserved="1")
    finally:
        common.shutdown()


if __name__ == "__main__":
    main()
