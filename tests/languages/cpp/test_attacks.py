"""Attacks on the allow-lists: fallbacks hidden from the source scan must still be found in the
preprocessed source or in the built library's imports; string-built access in model_new.py
must be found however it is spelled. Every library here is really built (cpu backend)."""

from __future__ import annotations

import shutil
import textwrap
import time
from pathlib import Path

import pytest

from cuda_agent.backends import get_backend
from cuda_agent.languages.cpp.build import build_workspace
from cuda_agent.languages.cpp.source_rules import check_workspace
from cuda_agent.languages.cpp.symbols import check_library, classify, qualname
from cuda_agent.languages.model_new_rules import check_model_new
from cuda_agent.languages.records import RULES

from tests.conftest import RELU_BINDING, RELU_KERNEL

PKG = Path(__file__).resolve().parents[3] / "src" / "cuda_agent"

# ---- the built library's imports -----------------------------------------------------------
# Each kernel computes relu but also reaches for something the allow-list forbids, spelled so
# that the plain source scan cannot see it (macros, token pasting, asm labels, pointers).
LIB_ATTACKS = {
    "cblas through a pasted macro": ("blas-fallback", "cblas_sgemm", r'''
        #include <cstdint>
        #define CAT(a, b) a##b
        extern "C" void CAT(cblas_, sgemm)(int, int, int, int, int, int, float, const float*, int, const float*,
                                          int, float, float*, int);
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          CAT(cblas_, sgemm)(101, 111, 111, 1, 1, 1, 1.f, x, 1, x, 1, 0.f, y, 1);
        }'''),
    "Fortran BLAS under an asm label": ("blas-fallback", "sgemm_", r'''
        #include <cstdint>
        extern "C" void my_gemm(const char*, const char*, const int*, const int*, const int*, const float*,
                                const float*, const int*, const float*, const int*, const float*, float*,
                                const int*) __asm__("sgemm_");
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          int one = 1; float a = 1.f, b = 0.f;
          my_gemm("N", "N", &one, &one, &one, &a, x, &one, x, &one, &b, y, &one);
        }'''),
    "dlsym for torch's own kernels": ("dynamic-loading", "dlsym", r'''
        #include <cstdint>
        #define LOOKUP dl##sym
        extern "C" void* LOOKUP(void*, const char*);
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          auto f = (void (*)(const float*, float*, int64_t))LOOKUP(nullptr, "relu_reference");
          if (f) f(x, y, n);
        }'''),
    "at::cpu:: compute through a dispatch header": ("aten-compute-in-cpp", "at::cpu::relu", r'''
        #include "binding_registry.h"
        #include <ATen/ops/relu_cpu_dispatch.h>
        at::Tensor relu_forward(const at::Tensor& x) {
          return at::cpu::relu(x);
        }
        REGISTER_BINDING(relu, relu_forward)'''),
    "at::native:: compute": ("aten-compute-in-cpp", "at::native::", r'''
        #include "binding_registry.h"
        namespace at { namespace native { at::Tensor relu(const at::Tensor& self); } }
        at::Tensor relu_forward(const at::Tensor& x) {
          return at::native::relu(x);
        }
        REGISTER_BINDING(relu, relu_forward)'''),
    "the dispatcher": ("aten-compute-in-cpp", "c10::Dispatcher", r'''
        #include "binding_registry.h"
        #include <ATen/core/dispatch/Dispatcher.h>
        at::Tensor relu_forward(const at::Tensor& x) {
          auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::relu", "");
          return op.typed<at::Tensor(const at::Tensor&)>().call(x);
        }
        REGISTER_BINDING(relu, relu_forward)'''),
    "a thread": ("thread-creation", "pthread_create", r'''
        #include <cstdint>
        #include <pthread.h>
        static void* work(void*) { return nullptr; }
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          pthread_t t; pthread_create(&t, nullptr, work, nullptr); pthread_join(t, nullptr);
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
        }'''),
    "fork and exec": ("process-creation", "fork", r'''
        #include <cstdint>
        #include <unistd.h>
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          if (fork() == 0) execl("/bin/true", "true", (char*)nullptr);
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
        }'''),
    "syscall()": ("raw-syscall", "syscall", r'''
        #include <cstdint>
        extern "C" long syscall(long, ...);
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          syscall(39);
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
        }'''),
    "a syscall instruction": ("raw-syscall", "syscall", r'''
        #include <cstdint>
        #define INSN(x) #x
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          long r; __asm__ volatile(INSN(syscall) : "=a"(r) : "a"(39L) : "rcx", "r11", "memory");
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
        }'''),
    "raw bytes of a syscall": ("raw-syscall", "syscall", r'''
        #include <cstdint>
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          __asm__ volatile(".byte 0x0f, 0x05" ::: "rcx", "r11", "memory");
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
        }'''),
    "a file": ("io-in-kernel", "fopen", r'''
        #include <cstdint>
        #include <cstdio>
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          FILE* f = fopen("/tmp/expected.bin", "rb");
          if (f) { fread(y, sizeof(float), n, f); fclose(f); }
        }'''),
    "mprotect for a code page": ("io-in-kernel", "mprotect", r'''
        #include <cstdint>
        #include <sys/mman.h>
        extern "C" void relu_kernel(const float* x, float* y, int64_t n) {
          mprotect((void*)((uintptr_t)y & ~4095ul), 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
        }'''),
}


def _files(kernel: str) -> dict[str, str]:
    """An attack with REGISTER_BINDING is the binding file (it sees ATen); else the kernel file."""
    kernel = textwrap.dedent(kernel)
    if "REGISTER_BINDING" in kernel:
        return {"relu.cpp": RELU_KERNEL, "relu_binding.cpp": kernel}
    return {"relu.cpp": kernel, "relu_binding.cpp": RELU_BINDING}


def _build(make_workspace, cache_dir: Path, kernel: str, name: str) -> tuple[Path, Path]:
    ws = make_workspace(kernels=_files(kernel), name=name)
    res = build_workspace(ws.root, get_backend("cpu"), cache_dir=cache_dir, jobs=1)
    assert res.ok, res.log
    return ws.root, Path(res.library)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LIB_ATTACKS))
def test_library_attack_is_found(make_workspace, cache_dir: Path, name: str) -> None:
    rule, symbol, kernel = LIB_ATTACKS[name]
    root, lib = _build(make_workspace, cache_dir, kernel, "atk")
    found = check_library(lib, "cpu", workspace=root)
    hits = [f for f in found if f.rule == rule and symbol in f.message]
    assert hits, "\n".join(f"[{f.rule}] {f.message}" for f in found)
    assert all(f.rule in RULES for f in found)
    if name in ("a file", "a thread", "fork and exec"):  # imports point at the file that names them
        assert (hits[0].file, hits[0].line) != (lib.name, 1), hits[0]


@pytest.mark.slow
def test_honest_library_is_clean_and_fast(make_workspace, cache_dir: Path) -> None:
    _, lib = _build(make_workspace, cache_dir, RELU_KERNEL, "honest")
    check_library(lib, "cpu")
    t0 = time.perf_counter()
    found = check_library(lib, "cpu")
    ms = (time.perf_counter() - t0) * 1000
    assert found == [], found
    assert ms < 500, ms


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(p.parent.name for p in PKG.glob("examples/*/cpu")))
def test_bundled_cpu_example_libraries_are_clean(cache_dir: Path, example: str) -> None:
    res = build_workspace(PKG / "examples" / example / "cpu", get_backend("cpu"), cache_dir=cache_dir, jobs=1)
    assert res.ok, res.log
    found = check_library(res.library, "cpu")
    assert found == [], "\n".join(f.message for f in found)


# What the CUDA bundled examples' libraries import, taken from nvcc 13 objects and the binding
# template (c10::cuda stream/guard); the full libraries link only against torch with CUDA.
CUDA_HONEST_IMPORTS = [
    "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaRegisterFunction", "__cudaUnregisterFatBinary",
    "__cudaPushCallConfiguration", "__cudaPopCallConfiguration", "__cudaLaunchKernel", "__cudaGetKernel",
    "cudaLaunchKernel", "cudaGetDevice", "cudaDeviceGetAttribute", "cudaGetLastError", "cudaGetErrorString",
    "cudaFuncSetAttribute", "cudaMemsetAsync", "cudaMemcpyAsync", "cuTensorMapEncodeTiled", "atexit",
    "__cxa_guard_acquire", "c10::cuda::getCurrentCUDAStream(signed char)",
    "c10::cuda::ExchangeDevice(signed char)", "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, "
    "unsigned int, bool)", "c10::cuda::CUDACachingAllocator::allocator",
    "at::cuda::getCurrentDeviceProperties()", "c10::impl::device_guard_impl_registry",
    "float* at::TensorBase::data_ptr<float>() const",
    "c10::throwNullDataPtrError()", "c10::warnDeprecatedDataPtr()",  # inlined by data_ptr<T>() on torch 2.11
    "at::_ops::empty_like::call(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, "
    "std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
]


@pytest.mark.parametrize("symbol", CUDA_HONEST_IMPORTS)
def test_cuda_honest_imports_are_allowed(symbol: str) -> None:
    assert classify(symbol, "cuda") is None, classify(symbol, "cuda")


@pytest.mark.parametrize("symbol", ["cublasSgemm_v2", "cublasLtMatmul", "cudnnConvolutionForward"])
def test_vendor_gemm_and_conv_imports_need_the_paper_profile(symbol: str) -> None:
    assert classify(symbol, "cuda", "paper") is None
    got = classify(symbol, "cuda", "strict")
    assert got is not None and got[0] == "blas-fallback", got


@pytest.mark.parametrize("symbol,rule", [
    ("cublasSaxpy_v2", "blas-fallback"), ("cublasSgeam", "blas-fallback"),
    ("cudnnActivationForward", "blas-fallback"), ("cudaStreamCreateWithFlags", "stream-creation"),
    ("cudaLaunchHostFunc", "thread-creation"), ("cudaGetDriverEntryPoint", "dynamic-loading"),
    ("cuGetProcAddress_v2", "dynamic-loading"), ("cuModuleLoadData", "dynamic-loading"),
    ("nvrtcCompileProgram", "dynamic-loading"), ("cudaIpcGetMemHandle", "io-in-kernel"),
    ("at::cuda::getCurrentCUDABlasHandle()", "blas-fallback"),
    ("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "aten-compute-in-cpp"),
    ("at::_ops::relu::call(at::Tensor const&)", "aten-compute-in-cpp"),
    ("torch::Library::_impl(char const*, torch::CppFunction&&, torch::_RegisterOrVerify) &", "aten-compute-in-cpp"),
    ("c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey, bool)", "aten-compute-in-cpp"),
    ("GOMP_parallel", "symbol-not-allowed"), ("PyRun_SimpleString", "symbol-not-allowed"),
    ("cudaDeviceReset", "symbol-not-allowed"),
])
def test_cuda_forbidden_imports(symbol: str, rule: str) -> None:
    got = classify(symbol, "cuda")
    assert got is not None and got[0] == rule, got


def test_qualname_strips_types_templates_and_versions() -> None:
    assert qualname("float* at::TensorBase::data_ptr<float>() const") == "at::TensorBase::data_ptr"
    assert qualname("memcpy@GLIBC_2.14") == "memcpy"
    assert qualname("std::basic_ostream<char, std::char_traits<char> >::operator<<(int)") == \
        "std::basic_ostream::operator<<"
    assert qualname("operator new(unsigned long)") == "operator new"


# ---- preprocessed kernels/ sources ---------------------------------------------------------
def _kernel_ws(tmp_path: Path, kernel: str, backend: str = "cpu") -> Path:
    (tmp_path / "kernels").mkdir(parents=True)
    ext = "cpu_extension" if backend == "cpu" else "cuda_extension"
    (tmp_path / "model_new.py").write_text(f"import torch.nn as nn\nimport {ext}\n\nclass ModelNew(nn.Module):\n"
                                           f"    def forward(self, x):\n        return {ext}.relu(x.contiguous())\n")
    for fname, text in _files(kernel).items():
        (tmp_path / "kernels" / fname).write_text(text)
    return tmp_path


@pytest.mark.parametrize("name", [n for n in sorted(LIB_ATTACKS) if "bytes" not in n and "instruction" not in n])
def test_source_attack_is_found_after_preprocessing(tmp_path: Path, name: str) -> None:
    rule, symbol, kernel = LIB_ATTACKS[name]
    found = check_workspace(_kernel_ws(tmp_path, kernel), "cpu", "cpu_extension")
    assert found, name
    assert all(f.file.startswith("kernels/") for f in found)


@pytest.mark.parametrize("kernel", [
    '#define GO sys##tem\nextern "C" int GO(const char*);\nvoid f() { GO("id"); }',
    '#define P(a, b) a##b\nextern "C" void* P(dl, open)(const char*, int);\nvoid f() { P(dl, open)("x", 0); }',
    '#include <sys/cdefs.h>\nextern "C" long __CONCAT(sys, call)(long, ...);\nvoid f() { __CONCAT(sys, call)(1); }',
    '#define T std::thr##ead\n#include <thread>\nvoid g(); void f() { T t(g); t.join(); }',
    'extern "C" void* h(void*, const char*) __asm__("dlsym");',
    '#pragma redefine_extname h dlsym\nextern "C" void* h(void*, const char*);',
    'void f() { __asm__ volatile("sys" "call"); }',
    'void f() { asm("int $0x80"); }',
    '#define BLAS(f) cblas_##f\nextern "C" void cblas_sgemm();\nvoid f() { BLAS(sgemm)(); }',
    '#define Q(a, b) a##b\nextern "C" void Q(sg, emm_)();\nvoid f() { Q(sg, emm_)(); }',
])
def test_macro_hidden_calls_are_found(tmp_path: Path, kernel: str) -> None:
    ws = _kernel_ws(tmp_path, "#include <cstdint>\n" + kernel)
    found = check_workspace(ws, "cpu", "cpu_extension")
    assert found and all(f.file == "kernels/relu.cpp" for f in found), found
    assert any("after preprocessing" in f.message or "inline asm" in f.message for f in found), found


def test_honest_kernel_with_barrier_asm_is_clean(tmp_path: Path) -> None:
    kernel = RELU_KERNEL + '\nstatic inline void fence() { asm volatile("" ::: "memory"); }\n'
    assert check_workspace(_kernel_ws(tmp_path, kernel), "cpu", "cpu_extension") == []


# ---- model_new.py: string-built access ---------------------------------------------------------
def _model(body: str, header: str = "") -> str:
    return (f"import torch\nimport torch.nn as nn\nimport cuda_extension\n{header}\n"
            f"class ModelNew(nn.Module):\n    def forward(self, x):\n"
            + textwrap.indent(textwrap.dedent(body), " " * 8))


PY_ATTACKS = [
    ('return getattr(torch, "re" + "lu")(x)', "dynamic-code"),
    ('return getattr(torch.nn.functional, "relu")(x)', "dynamic-code"),
    ('return getattr(cuda_extension, "relu")(x)', "dynamic-code"),
    ('g = getattr\nreturn g(torch, "relu")(x)', "dynamic-code"),
    ('return __builtins__["__import__"]("os").system("id")', "dynamic-code"),
    ("return __import__('o' + 's')", "dynamic-code"),
    ("return torch.__dict__['relu'](x)", "dynamic-code"),
    ("return vars(torch)['relu'](x)", "dynamic-code"),
    ("return globals()['torch'].relu(x)", "dynamic-code"),
    ("return type(x).relu(x)", "dynamic-code"),
    ("T = type('T', (torch.Tensor,), {})\nreturn x", "dynamic-code"),
    ("return x.__class__.relu(x)", "dynamic-code"),
    ("return object.__getattribute__(torch, 'relu')(x)", "dynamic-code"),
    ("return print.__self__.__import__('os')", "dynamic-code"),
    ("f = eval\nreturn f('torch.relu')(x)", "dynamic-code"),
    ("return torch.os.system('id')", "torch-compute"),
    ("return cuda_extension.torch.relu(x)", "extension-access"),
    ("return cuda_extension._os.system('id')", "extension-access"),
    ("return torch.ops.cuda_extension.relu._op(x)", "extension-access"),
    ("return x._base", "dynamic-code"),
    ("return '{0.__class__}'.format(x)", "dynamic-code"),
    ("return typing.get_type_hints(self.forward)", "dynamic-code"),
    ("return operator.attrgetter('relu')(torch)(x)", "dynamic-code"),
    ("return operator.methodcaller('relu')(x)", "dynamic-code"),
    ("return memoryview(x)", "dynamic-code"),
    ("setattr(self, 'y', x)\nreturn x", "dynamic-code"),
    ("return dir(torch)", "dynamic-code"),
]


@pytest.mark.parametrize("body,rule", PY_ATTACKS, ids=[b.splitlines()[0][:40] for b, _ in PY_ATTACKS])
def test_string_built_access_is_found(body: str, rule: str) -> None:
    found = check_model_new(_model(body, "import typing\nimport operator"), "cuda_extension")
    assert rule in {f.rule for f in found}, found


@pytest.mark.parametrize("header,rule", [
    ("import importlib", "forbidden-import"),
    ("import sys", "forbidden-import"),
    ("import gc", "forbidden-import"),
    ("import inspect", "forbidden-import"),
    ("import builtins", "forbidden-import"),
    ("from torch.utils import cpp_extension", "forbidden-import"),
    ("def deco(f):\n    return f\n@deco\ndef helper(t):\n    return t", "decorator"),
    ("class Meta(type):\n    pass", "class-definition"),
    ("class M(nn.Module, metaclass=type):\n    pass", "class-definition"),
    ("class M(nn.Module):\n    torch.relu = None\n    for i in range(3):\n        pass", "class-body"),
    ("class M(nn.Module):\n    def __getattr__(self, name):\n        return 1", "class-body"),
    ("for i in range(2):\n    pass", "module-body"),
    ("print(torch.relu)", "module-body"),
    ("async def f():\n    pass", "dynamic-code"),
])
def test_module_level_attack_is_found(header: str, rule: str) -> None:
    found = check_model_new(_model("return cuda_extension.relu(x)", header), "cuda_extension")
    assert rule in {f.rule for f in found}, found


def test_function_escaping_init_counts_as_runtime() -> None:
    src = ("import torch\nimport torch.nn as nn\nimport cuda_extension\n\n"
           "def act(t):\n    return torch.relu(t)\n\n"
           "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.fn = act\n    def forward(self, x):\n        return self.fn(x)\n")
    assert "torch-compute" in {f.rule for f in check_model_new(src, "cuda_extension")}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_kernel_is_preprocessed_like_nvcc_does(tmp_path: Path) -> None:
    """nvcc's own host preprocessing command: a pasted dlsym in a .cu file is found; the
    bundled softmax kernel stays clean."""
    src = (PKG / "examples" / "softmax" / "cuda" / "kernels" / "softmax.cu").read_text()
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "kernels" / "softmax.cu").write_text(src)
    assert check_workspace(ws, "cuda", "cuda_extension") == []
    (ws / "kernels" / "softmax.cu").write_text(src + '\n#define P(a, b) a##b\n'
                                               'extern "C" void* P(dl, sym)(void*, const char*);\n')
    found = check_workspace(ws, "cuda", "cuda_extension")
    assert [(f.file, f.rule) for f in found] == [("kernels/softmax.cu", "dynamic-loading")], found
