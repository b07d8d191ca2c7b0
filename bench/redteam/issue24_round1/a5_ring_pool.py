"""Class 2 with every guard on: a ring of 16 output buffers (never one the judge still holds,
k <= 2 batches) for a 16 MiB relu, where the judge does hold earlier batches.
Control: the honest binding allocating each call."""
import sys
from common import *
TASK = RELU_TASK.replace("torch.randn(64, 1024)", "torch.randn(256, 16384)")
RING_BINDING = '''
#include "binding_registry.h"
#include <vector>
extern "C" void relu_kernel(const float* x, float* y, int64_t n);
at::Tensor relu_forward(const at::Tensor& x) {
  CHECK_CONTIGUOUS(x); CHECK_DTYPE(x, at::kFloat);
  static std::vector<at::Tensor> ring;
  static int64_t calls = 0;
  if (ring.empty() || ring[0].numel() != x.numel()) { ring.clear(); for (int i = 0; i < 16; ++i) ring.push_back(at::empty_like(x)); }
  at::Tensor out = ring[calls++ % 16];
  relu_kernel(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
  return out;
}
REGISTER_BINDING(relu, relu_forward)
'''
which = sys.argv[1:] or ["ring", "honest"]
for w in which:
    b = RING_BINDING if w == "ring" else RELU_BINDING
    run(f"a5_mid_{w}", RELU_MODEL_NEW, {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": b}, task=TASK)
