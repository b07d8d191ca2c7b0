"""Hostile input to the static checker / build: a macro chain whose expansion doubles at every level
(2^N tokens) in kernels/. The preprocessed scan runs the real preprocessor (-E) and reads its output.
Measures the evaluator's own peak RSS and wall time. N=levels (default 24: 16 Mi tokens, ~32 MB)."""
import sys, resource, time
from common import *
N = int(sys.argv[1]) if len(sys.argv) > 1 else 24
lines = ["#include <cstdint>", "#define X0 1+"] + [f"#define X{i} X{i-1} X{i-1}" for i in range(1, N + 1)]
lines += [f"extern \"C\" int64_t bomb() {{ return X{N} 0; }}", RELU_KERNEL]
t0 = time.time(); r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run(f"k1_bomb{N}", RELU_MODEL_NEW, {"relu.cpp": "\n".join(lines), "relu_binding.cpp": RELU_BINDING}, note=f"macro bomb 2^{N}")
print("evaluator maxrss MB before/after:", r0 // 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
      "children maxrss MB:", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, "wall s:", round(time.time() - t0, 1))
