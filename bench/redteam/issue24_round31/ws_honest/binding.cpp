// binding.cpp -- FIXED FILE (protected; edits make the evaluation fail as "tampered").
//
// The extension's entry point. Every kernels/*_binding.cpp registers its functions with
// REGISTER_BINDING (see binding_registry.h); the build links them all into one library,
// so this file never needs to change when a kernel is added.
#include "binding_registry.h"

TORCH_LIBRARY(CUDA_AGENT_EXTENSION, m) {}
