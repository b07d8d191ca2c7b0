"""Every rule of the built library's symbol allow-list with an attack of its own: each
alternative of each deny rule (std::thread, std::async, host callbacks, dlsym, raw syscalls,
...) as the demangler writes it, on both backends, next to the honest imports that must stay
allowed; and the raw system-call instruction scan on real ELF files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_agent.languages.cpp.symbols import check_library, classify

BACKENDS = ["cpu", "cuda"]

ATTACKS: dict[str, list[str]] = {
    "thread-creation": [
        "pthread_create", "pthread_create@GLIBC_2.34", "thrd_create",
        "std::thread::_M_start_thread(std::unique_ptr<std::thread::_State, std::default_delete<std::thread::_State> >, "
        "void (*)())",
        "std::thread::join()", "std::thread::detach()", "std::thread::hardware_concurrency()",
        "std::jthread::_M_start_thread(std::unique_ptr<std::thread::_State, std::default_delete<std::thread::_State> >, "
        "void (*)())",
        "std::__future_base::_Async_state_commonV2::_M_complete_async()",
        "std::__future_base::_State_baseV2::_M_do_set(std::function<std::unique_ptr<std::__future_base::_Result_base, "
        "std::__future_base::_Result_base::_Deleter> ()>*, bool*)",
        "std::async", "cudaLaunchHostFunc", "cudaStreamAddCallback", "cuLaunchHostFunc", "cuStreamAddCallback",
    ],
    "process-creation": ["fork", "vfork", "_Fork", "__fork", "clone", "clone3", "__clone2", "execl", "execle", "execlp",
                         "execv", "execve", "execvp", "execvpe", "execveat", "fexecve", "posix_spawn", "posix_spawnp",
                         "system", "popen", "pclose", "wordexp", "daemon", "kill", "raise", "ptrace"],
    "raw-syscall": ["syscall", "syscall@GLIBC_2.2.5", "__syscall_cancel", "__libc_syscall"],
    "dynamic-loading": ["dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo", "dlerror",
                        "dl_iterate_phdr", "_dl_find_object", "__libc_dlsym", "cuGetProcAddress", "cuGetProcAddress_v2",
                        "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion", "cuGetExportTable",
                        "cudaGetExportTable", "cuModuleLoadData", "cuModuleLoadDataEx", "cuLibraryLoadData",
                        "cudaLibraryLoadData", "cuLinkCreate_v2", "nvrtcCompileProgram", "nvJitLinkCreate",
                        "nvPTXCompilerCompile"],
    "stream-creation": ["cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
                        "cuStreamCreate", "cuStreamCreateWithPriority"],
    "io-in-kernel": ["fopen", "fopen64", "freopen", "fdopen", "open", "open64", "__open_2", "openat", "creat",
                     "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "getenv",
                     "secure_getenv", "setenv", "putenv", "unsetenv", "opendir", "unlink", "unlinkat", "remove",
                     "rename", "mkdir", "chmod", "chdir", "read", "write", "pread64", "pwrite", "sendmsg", "recvfrom",
                     "ioctl", "mmap", "mmap64", "mprotect", "munmap", "mremap", "shm_open", "memfd_create",
                     "std::basic_ofstream<char, std::char_traits<char> >::basic_ofstream(char const*, "
                     "std::_Ios_Openmode)",
                     "std::basic_ifstream<char, std::char_traits<char> >::open(char const*, std::_Ios_Openmode)",
                     "std::basic_filebuf<char, std::char_traits<char> >::open(char const*, std::_Ios_Openmode)",
                     "std::__basic_file<char>::open(char const*, std::_Ios_Openmode, int)",
                     "std::filesystem::remove_all(std::filesystem::__cxx11::path const&)",
                     "std::__fs::filesystem::status(std::__fs::filesystem::path const&)",
                     "std::random_device::_M_init(std::__cxx11::basic_string<char, std::char_traits<char>, "
                     "std::allocator<char> > const&)",
                     "cudaIpcGetMemHandle", "cuIpcOpenMemHandle", "cuMemExportToShareableHandle",
                     "cuMemPoolImportFromShareableHandle", "cudaMemPoolExportToShareableHandle"],
    "blas-fallback": ["cblas_sgemm", "sgemm_", "dgemm", "zgemm3m_", "sgemv_", "daxpy", "sdot_", "mkl_sgemm_batch",
                      "MKL_Set_Num_Threads", "openblas_set_num_threads", "goto_sgemm", "bli_gemm", "dnnl_sgemm",
                      "cublasSgemm_v2", "cublasLtMatmul", "cudnnConvolutionForward", "cusparseSpMM", "cusolverDnCreate",
                      "cufftExecC2C", "curandGenerateUniform", "cutensorContract",
                      "at::native::cpublas::gemm(char, char, long, long, long, float, float const*, long, float const*, "
                      "long, float, float*, long)",
                      "at::cuda::blas::gemm<float>(char, char, long, long, long, float, float const*, long, float const*, "
                      "long, float, float*, long)", "at::cuda::getCurrentCUDABlasHandle()"],
    "aten-compute-in-cpp": [
        "at::native::add(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
        "at::cpu::relu(at::Tensor const&)", "at::cuda::mm(at::Tensor const&, at::Tensor const&)",
        "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "at::_ops::relu::call(at::Tensor const&)",
        "at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
        "at::Tensor::matmul(at::Tensor const&) const", "at::matmul(at::Tensor const&, at::Tensor const&)",
        "torch::jit::Module::forward(std::vector<c10::IValue, std::allocator<c10::IValue> >)",
        "c10::Dispatcher::singleton()", "c10::OperatorHandle::callBoxed(std::vector<c10::IValue>*) const",
        "c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey, bool)",
        "c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)",
        "c10::KernelFunction::callBoxed(c10::OperatorHandle const&, c10::DispatchKeySet, std::vector<c10::IValue>*) const",
        "at::globalContext()", "at::Context::setDeterministicAlgorithms(bool, bool)", "c10::SetAllocator(c10::DeviceType, "
        "c10::Allocator*, unsigned char)", "c10::SetCPUAllocator(c10::Allocator*, unsigned char)",
        "at::compositeexplicitautograd::add(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
        "at::meta::relu(at::Tensor const&)",
    ],
}

HONEST = [
    "memcpy", "memcpy@GLIBC_2.14", "memset", "strlen", "expf", "tanhf", "__expf_finite", "sqrt", "fmaf", "malloc", "free",
    "posix_memalign", "__cxa_guard_acquire", "__cxa_throw", "__gxx_personality_v0", "_Unwind_Resume",
    "__stack_chk_fail", "operator new(unsigned long)", "operator delete(void*, unsigned long)", "printf", "snprintf",
    "__printf_chk", "abort", "pthread_mutex_lock", "pthread_once", "sched_yield", "__tls_get_addr",
    "std::__throw_length_error(char const*)", "std::__cxx11::basic_string<char, std::char_traits<char>, "
    "std::allocator<char> >::_M_create(unsigned long&, unsigned long)",
    "std::ostream::operator<<(int)", "std::chrono::_V2::steady_clock::now()",
    "float* at::TensorBase::data_ptr<float>() const", "at::TensorBase::numel() const",
    "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, "
    "std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
    "at::_ops::contiguous::call(at::Tensor const&, c10::MemoryFormat)", "at::_ops::view::call(at::Tensor const&, "
    "c10::ArrayRef<c10::SymInt>)", "at::detail::empty_cpu(c10::ArrayRef<long>, c10::TensorOptions const&)",
    "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)",
    "c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, "
    "std::allocator<char> >)", "c10::TensorImpl::is_contiguous_custom(c10::MemoryFormat) const",
    "typeinfo for c10::Error", "vtable for c10::Error", "torch::Library::Library(torch::Library::Kind, "
    "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::optional<c10::DispatchKey>, "
    "char const*, unsigned int)",
]
HONEST_CPU = ["GOMP_parallel", "omp_get_num_threads", "omp_get_thread_num", "__kmpc_fork_call", "GOMP_barrier"]
HONEST_CUDA = ["cudaMalloc", "cudaFree", "cudaLaunchKernel", "cudaGetLastError", "cudaMemcpyAsync",
               "__cudaRegisterFunction", "__cudaRegisterFatBinary", "__nv_cudaEntityRegisterCallback",
               "cudaStreamSynchronize", "cuLaunchKernel", "c10::cuda::getCurrentCUDAStream(signed char)"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rule,symbol", [(rule, s) for rule, syms in ATTACKS.items() for s in syms])
def test_each_forbidden_import_is_named_by_its_rule(rule: str, symbol: str, backend: str) -> None:
    got = classify(symbol, backend, "strict")  # strict: no vendor library at all
    assert got is not None and got[0] == rule, (symbol, got)
    if symbol not in PAPER_ALLOWED_ON_CUDA or backend != "cuda":  # the `paper` profile refuses the rest too
        paper = classify(symbol, backend, "paper")
        assert paper is not None and paper[0] == rule, (symbol, paper)


PAPER_ALLOWED_ON_CUDA = {"cublasSgemm_v2", "cublasLtMatmul", "cudnnConvolutionForward"}


@pytest.mark.parametrize("symbol", sorted(PAPER_ALLOWED_ON_CUDA))
def test_the_paper_profile_allows_gemm_and_convolution_entry_points_on_cuda_only(symbol: str) -> None:
    assert classify(symbol, "cuda", "paper") is None
    assert classify(symbol, "cpu", "paper") is not None


@pytest.mark.parametrize("symbol", HONEST)
@pytest.mark.parametrize("backend", BACKENDS)
def test_honest_imports_are_allowed(symbol: str, backend: str) -> None:
    assert classify(symbol, backend) is None, classify(symbol, backend)


@pytest.mark.parametrize("symbol", HONEST_CPU)
def test_honest_cpu_runtime_imports(symbol: str) -> None:
    assert classify(symbol, "cpu") is None
    assert classify(symbol, "cuda") == ("symbol-not-allowed", classify(symbol, "cuda")[1])


@pytest.mark.parametrize("symbol", HONEST_CUDA)
def test_honest_cuda_runtime_imports(symbol: str) -> None:
    assert classify(symbol, "cuda") is None
    assert classify(symbol, "cpu")[0] == "symbol-not-allowed"


@pytest.mark.parametrize("symbol", ["cudaDeviceReset", "cudaThreadExit", "cuDevicePrimaryCtxReset_v2", "cuCtxDestroy_v2"])
def test_device_context_resets_are_refused(symbol: str) -> None:
    assert classify(symbol, "cuda") == ("symbol-not-allowed", "resets or destroys the device context")


@pytest.mark.parametrize("symbol", ["PyRun_SimpleString", "Py_Initialize", "PyEval_EvalCode", "lua_pcall",
                                    "some_library_function", "c10::cuda::CUDAStream::query() const",
                                    "at::TensorIteratorBase::build(at::TensorIteratorConfig&)"])
def test_anything_else_is_outside_the_allow_list(symbol: str) -> None:
    got = classify(symbol, "cpu")
    assert got is not None and got[0] in ("symbol-not-allowed", "aten-compute-in-cpp"), got


def test_std_names_other_than_threads_files_and_futures_stay_allowed() -> None:
    # the deny rules are anchored: a std:: name that merely contains "thread" or "file" is fine
    for ok in ("std::this_thread::yield()", "std::mutex::lock()", "std::condition_variable::notify_all()",
               "std::__detail::_Prime_rehash_policy::_M_need_rehash(unsigned long, unsigned long, unsigned long) const"):
        assert classify(ok, "cpu") is None, ok


# ---- raw system-call instructions in the library itself ------------------------------------
CC = shutil.which("cc") or shutil.which("gcc")


def _library(tmp_path: Path, name: str, body: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(body)
    lib = tmp_path / f"lib{name}.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True, capture_output=True)
    return lib


@pytest.mark.skipif(CC is None or shutil.which("objdump") is None, reason="no C compiler / objdump")
@pytest.mark.parametrize("insn", ["syscall", "int $0x80", "sysenter"])
def test_a_system_call_instruction_in_the_library_is_found(tmp_path: Path, insn: str) -> None:
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("x86-64 instructions")
    lib = _library(tmp_path, "raw", "long sneaky(long n) { long r; __asm__ volatile(\"" + insn +
                   "\" : \"=a\"(r) : \"a\"(n) : \"rcx\", \"r11\", \"memory\"); return r; }\n")
    found = [f for f in check_library(lib, "cpu") if f.rule == "raw-syscall"]
    assert found and "sneaky" in found[0].message, [f.message for f in check_library(lib, "cpu")]


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_syscall_bytes_inside_other_instructions_are_not_a_finding(tmp_path: Path) -> None:
    # 0x0f 0x05 as an immediate operand: the bytes are there, no syscall instruction is
    lib = _library(tmp_path, "honest", "unsigned honest(unsigned x) { return x * 3u + 0x050fu; }\n"
                                       "float scale(float x) { return x * 2.0f; }\n")
    assert check_library(lib, "cpu") == []


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_imported_threads_and_dlsym_in_a_real_library(tmp_path: Path) -> None:
    lib = _library(tmp_path, "threads", "#include <pthread.h>\n#include <dlfcn.h>\n"
                                        "static void* run(void* a) { return a; }\n"
                                        "void* go(void) { pthread_t t; pthread_create(&t, 0, run, 0); "
                                        "return dlsym(RTLD_DEFAULT, \"malloc\"); }\n")
    rules = sorted(f.rule for f in check_library(lib, "cpu"))
    assert rules == ["dynamic-loading", "thread-creation"], rules


CXX = shutil.which("g++") or shutil.which("c++")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_std_mutex_and_call_once_in_a_real_library_are_allowed(tmp_path: Path) -> None:
    # libstdc++ on glibc >= 2.34 calls pthread_mutex_lock / pthread_once directly: honest
    # locking in a binding was refused as "outside the allow-list" (the pattern read `__?pthread_`)
    src = tmp_path / "m.cpp"
    src.write_text("#include <mutex>\nstatic std::mutex m; static std::once_flag f; int x;\n"
                   "extern \"C\" int go() { std::lock_guard<std::mutex> g(m); std::call_once(f, []{ x = 1; }); "
                   "return x; }\n")
    lib = tmp_path / "libm.so"
    subprocess.run([CXX, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    assert check_library(lib, "cpu") == [], [f.message for f in check_library(lib, "cpu")]
