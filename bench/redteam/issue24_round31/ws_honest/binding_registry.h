// binding_registry.h -- FIXED FILE (protected; edits make the evaluation fail as "tampered").
//
// Include this, and nothing heavier from torch, in every kernels/*_binding.cpp. It gives
// tensor types, allocation, checks and the REGISTER_BINDING macro. The headers below are
// precompiled once per machine, so a binding file compiles in a second or two; including
// <torch/extension.h> instead works but costs ~40 s per build.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/contiguous_ops.h>
#include <c10/util/Optional.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

#ifdef CUDA_AGENT_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

// The stream every launcher must use: PyTorch's current stream on the input's device.
inline cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

#define CHECK_CUDA(x) TORCH_CHECK((x).is_cuda(), #x " must be a CUDA tensor")
#define CHECK_LAUNCH()                                                              \
  do {                                                                              \
    cudaError_t err_ = cudaGetLastError();                                          \
    TORCH_CHECK(err_ == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err_)); \
  } while (0)
#endif

#define CHECK_CONTIGUOUS(x) TORCH_CHECK((x).is_contiguous(), #x " must be contiguous")
#define CHECK_DTYPE(x, t) TORCH_CHECK((x).scalar_type() == (t), #x " has the wrong dtype")

// Register one function as an op of the extension: REGISTER_BINDING(relu, relu_forward);
// Python then calls it as `cuda_extension.relu(x)` (or `cpu_extension.relu(x)`).
// Argument types: at::Tensor / const at::Tensor&, int64_t, double, bool,
// std::vector<int64_t>, c10::optional<at::Tensor>; return at::Tensor or std::vector<at::Tensor>.
#define REGISTER_BINDING(name, fn) \
  TORCH_LIBRARY_FRAGMENT(CUDA_AGENT_EXTENSION, m) { m.def(#name, fn); }
