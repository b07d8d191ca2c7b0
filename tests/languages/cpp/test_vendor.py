"""The rules profile for vendor libraries (languages/cpp/vendor.py), from both sides: honest cuBLAS
GEMM and cuDNN convolution pass the source scan, the preprocessed scan and the symbol check
under `paper` and are refused under `strict`; everything else of those libraries is refused
under both."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from cuda_agent.evaluation import EvalConfig, EvalResult
from cuda_agent.evaluation.config import RULES_PROFILES as CONFIG_PROFILES
from cuda_agent.languages.cpp.source_rules import _scan_pp_line, check_kernel_source, check_preprocessed
from cuda_agent.languages.cpp.symbols import check_library, classify
from cuda_agent.languages.cpp.vendor import RULES_PROFILES, libraries_text, vendor_allowed

CUBLAS_GEMM = r"""
#include <cublas_v2.h>
#include <cuda_runtime.h>
extern "C" int gemm_launch(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
  static cublasHandle_t h = nullptr;
  if (!h && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return -1;
  cublasSetStream(h, s);
  cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  const float one = 1.f, zero = 0.f;
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);
  return (int)cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_32F, n, a, CUDA_R_32F, k, &zero,
                           c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
"""

CUDNN_CONV = r"""
#include <cudnn.h>
#include <cuda_runtime.h>
extern "C" int conv_launch(const float* x, const float* w, float* y, void* ws, size_t ws_bytes, cudaStream_t s) {
  static cudnnHandle_t h = nullptr;
  if (!h) cudnnCreate(&h);
  cudnnSetStream(h, s);
  cudnnTensorDescriptor_t xd, yd; cudnnFilterDescriptor_t wd; cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd); cudnnCreateTensorDescriptor(&yd);
  cudnnCreateFilterDescriptor(&wd); cudnnCreateConvolutionDescriptor(&cd);
  cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 8, 8);
  cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 3);
  cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 8, 8);
  cudnnConvolutionFwdAlgoPerf_t perf; int n = 0;
  cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 1, &n, &perf);
  const float one = 1.f, zero = 0.f;
  cudnnStatus_t st = cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, perf.algo, ws, ws_bytes, &zero, yd, y);
  cudnnConvolutionBackwardData(h, &one, wd, w, yd, y, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, ws, ws_bytes, &zero,
                               xd, (void*)x);  // ConvTranspose
  return (int)st;
}
"""

# (source, the call that must be refused under both profiles)
REFUSED_ALWAYS = {
    "cublas level-1 saxpy": ("#include <cublas_v2.h>\nvoid f(cublasHandle_t h, float* x, float* y) {\n"
                             "  const float a = 2.f; cublasSaxpy(h, 16, &a, x, 1, y, 1);\n}\n", 3),
    "cublas level-2 gemv": ("#include <cublas_v2.h>\nvoid f(cublasHandle_t h) {\n"
                            "  cublasSgemv(h, CUBLAS_OP_N, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1);\n}\n", 3),
    "cublas geam (elementwise add)": ("#include <cublas_v2.h>\nvoid f(cublasHandle_t h) {\n"
                                      "  cublasSgeam(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 0, 0, 1, 0, 0, 1, 0, 1);\n}\n", 3),
    "cudnn activation": ("#include <cudnn.h>\nvoid f(cudnnHandle_t h, cudnnActivationDescriptor_t a) {\n"
                         "  cudnnActivationForward(h, a, 0, 0, 0, 0, 0, 0);\n}\n", 3),
    "cudnn softmax": ("#include <cudnn.h>\nvoid f(cudnnHandle_t h) {\n"
                      "  cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, 0, 0, 0, 0, 0);\n}\n", 3),
    "cudnn add tensor (bias)": ("#include <cudnn.h>\nvoid f(cudnnHandle_t h) {\n"
                                "  cudnnAddTensor(h, 0, 0, 0, 0, 0, 0);\n}\n", 3),
    "cudnn conv + bias + activation": ("#include <cudnn.h>\nvoid f(cudnnHandle_t h) {\n"
                                       "  cudnnConvolutionBiasActivationForward(h, 0, 0, 0, 0, 0, 0, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "
                                       "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);\n}\n", 3),
    "cublasLt relu epilogue": ("#include <cublasLt.h>\nvoid f(cublasLtMatmulDesc_t d) {\n"
                               "  cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_RELU_BIAS;\n"
                               "  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));\n}\n", 3),
    "cusparse": ("#include <cusparse.h>\n", 1),
    "cufft": ("#include <cufft.h>\n", 1),
}


def _scan(src: str, rules: str, name: str = "kernels/k.cu") -> list:
    return check_kernel_source(textwrap.dedent(src), name, "cuda", rules=rules)


def test_profiles_are_one_list() -> None:
    assert RULES_PROFILES == CONFIG_PROFILES == ("paper", "strict")
    assert EvalConfig().rules == "paper" and EvalResult(task="t", task_hash="h", backend="cuda").rules == "paper"
    assert EvalConfig.from_options("cuda", rules="strict").rules == "strict"
    assert EvalConfig.from_options("cuda").rules == "paper"
    with pytest.raises(ValueError):
        EvalConfig(rules="lenient")
    with pytest.raises(ValueError):
        _scan(CUBLAS_GEMM, "lenient")


@pytest.mark.parametrize("src", [CUBLAS_GEMM, CUDNN_CONV], ids=["cublas-gemm", "cudnn-conv"])
def test_honest_vendor_use_passes_under_paper_and_not_strict(src: str) -> None:
    assert _scan(src, "paper") == []
    strict = _scan(src, "strict")
    assert strict and {f.rule for f in strict} == {"blas-fallback"}
    assert 2 in {f.line for f in strict}  # the #include itself


@pytest.mark.parametrize("name", sorted(REFUSED_ALWAYS))
@pytest.mark.parametrize("rules", ["paper", "strict"])
def test_other_vendor_calls_are_refused_under_both(name: str, rules: str) -> None:
    src, line = REFUSED_ALWAYS[name]
    found = _scan(src, rules)
    assert ("blas-fallback", line) in {(f.rule, f.line) for f in found}, found


def test_the_cpu_backend_never_reaches_cuda_libraries() -> None:
    assert not vendor_allowed("cublasSgemm_v2", "paper", "cpu")
    found = check_kernel_source("#include <cublas_v2.h>\n", "kernels/k.cpp", "cpu", rules="paper")
    assert [f.rule for f in found] == ["third-party-include"]
    got = classify("cublasSgemm_v2", "cpu", "paper")
    assert got is not None and got[0] == "blas-fallback"


# ---- the preprocessed text ------------------------------------------------------------------
def test_preprocessed_lines_follow_the_profile() -> None:
    honest = "cublasHandle_t h; cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1);"
    assert _scan_pp_line(honest, "kernels/k.cu", 3, True, rules="paper", backend="cuda") == []
    assert {f.rule for f in _scan_pp_line(honest, "kernels/k.cu", 3, True, rules="strict", backend="cuda")} == {
        "blas-fallback"}
    for bad in ("cublasSaxpy_v2(h, 1, 0, 0, 1, 0, 1);", "cudnnActivationForward(h, a, 0, 0, 0, 0, 0, 0);",
                "auto p = &cublasSscal_v2;", "d = CUBLASLT_EPILOGUE_GELU;"):
        for rules in RULES_PROFILES:
            found = _scan_pp_line(bad, "kernels/k.cu", 3, True, rules=rules, backend="cuda")
            assert {f.rule for f in found} == {"blas-fallback"}, (bad, rules)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the preprocessed scan of .cu files)")
def test_a_pasted_name_is_seen_after_the_preprocessor(tmp_path: Path) -> None:
    """No header needed: prototypes declared by hand, the forbidden call built by token pasting."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text(textwrap.dedent("""
        extern "C" int cublasSgemm_v2(void*, int, int, int, int, int, const float*, const float*, int,
                                      const float*, int, const float*, float*, int);
        extern "C" int cublasSaxpy_v2(void*, int, const float*, const float*, int, float*, int);
        #define BLAS(op) cublas##op##_v2
        extern "C" void launch(void* h, float* x, float* y) {
          const float a = 1.f;
          BLAS(Sgemm)(h, 0, 0, 1, 1, 1, &a, x, 1, x, 1, &a, y, 1);
          BLAS(Saxpy)(h, 1, &a, x, 1, y, 1);
        }
    """))
    paper = check_preprocessed(tmp_path, "cuda", rules="paper")
    assert {(f.rule, f.line) for f in paper} == {("blas-fallback", 4), ("blas-fallback", 9)}, paper  # decl + call
    strict = check_preprocessed(tmp_path, "cuda", rules="strict")
    assert {f.line for f in strict if f.rule == "blas-fallback"} >= {2, 4, 8, 9}, strict


# ---- the built library's imports --------------------------------------------------------------
LIBRARY = r"""
extern "C" {
int cublasCreate_v2(void**); int cublasSetStream_v2(void*, void*);
int cublasSgemm_v2(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                   const float*, float*, int);
int cudnnCreate(void**); int cudnnConvolutionForward(void*, ...); int cudnnConvolutionBackwardData(void*, ...);
int cudnnGetConvolutionForwardAlgorithm_v7(void*, ...);
%s
int launch(void* h, void* s, float* x) {
  const float a = 1.f;
  cublasCreate_v2(&h); cublasSetStream_v2(h, s);
  cublasSgemm_v2(h, 0, 0, 1, 1, 1, &a, x, 1, x, 1, &a, x, 1);
  cudnnCreate(&h); cudnnGetConvolutionForwardAlgorithm_v7(h);
  return cudnnConvolutionForward(h) + cudnnConvolutionBackwardData(h) %s;
}
}
"""


def _library(tmp_path: Path, extra_decl: str = "", extra_call: str = "") -> Path:
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    src = tmp_path / "lib.cpp"
    src.write_text(LIBRARY % (extra_decl, extra_call))
    out = tmp_path / "lib.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", str(src), "-o", str(out)], check=True, timeout=120)
    return out


def test_library_imports_follow_the_profile(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    assert check_library(lib, "cuda", rules="paper") == []
    strict = check_library(lib, "cuda", rules="strict")
    assert {f.rule for f in strict} == {"blas-fallback"} and len(strict) == 7, strict


@pytest.mark.parametrize("decl,call,name", [
    ("int cublasSaxpy_v2(void*, ...);", "+ cublasSaxpy_v2(h)", "cublasSaxpy_v2"),
    ("int cudnnActivationForward(void*, ...);", "+ cudnnActivationForward(h)", "cudnnActivationForward"),
    ("int cudnnSoftmaxForward(void*, ...);", "+ cudnnSoftmaxForward(h)", "cudnnSoftmaxForward"),
    ("int cublasLtMatrixTransform(void*, ...);", "+ cublasLtMatrixTransform(h)", "cublasLtMatrixTransform"),
    ("int curandGenerate(void*, ...);", "+ curandGenerate(h)", "curandGenerate"),
])
@pytest.mark.parametrize("rules", ["paper", "strict"])
def test_other_library_imports_are_refused_under_both(tmp_path: Path, decl: str, call: str, name: str,
                                                      rules: str) -> None:
    found = check_library(_library(tmp_path, decl, call), "cuda", rules=rules)
    assert any(f.rule == "blas-fallback" and f"`{name}`" in f.message for f in found), found


# ---- what the workspace says ------------------------------------------------------------------
@pytest.mark.parametrize("language", ["cpp", "paper"])
def test_skill_md_states_the_profile_in_force(tmp_path: Path, language: str) -> None:
    from cuda_agent.examples import get_example
    from cuda_agent.workspace import create_workspace

    task = get_example("gemm_bias_relu").task
    paper = create_workspace(task, tmp_path / "p", "cuda", language=language, cache_dir=tmp_path / "c")
    strict = create_workspace(task, tmp_path / "s", "cuda", language=language, rules="strict",
                              cache_dir=tmp_path / "c")
    p = (paper.root / "SKILL.md").read_text()
    s = (strict.root / "SKILL.md").read_text()
    assert "@LIBRARIES@" not in p + s
    assert libraries_text("paper", "cuda") in p and "cublasSgemm" in p and "cudnnConvolutionForward" in p
    assert libraries_text("strict", "cuda") in s and "No cuBLAS, cuDNN" in s


def test_example_variants_install(tmp_path: Path) -> None:
    from cuda_agent.examples import get_example
    from cuda_agent.workspace import create_workspace

    ex = get_example("gemm_bias_relu")
    assert "cuda_cublas" in ex.solution_variants() and "cuda" in ex.solution_variants()
    assert "cuda_cudnn" in get_example("conv2d_relu").solution_variants()
    ws = create_workspace(ex.task, tmp_path / "ws", "cuda", cache_dir=tmp_path / "c")
    ex.install_solution(ws.root, "cuda_cublas")
    assert "cublasSgemm" in (ws.root / "kernels" / "linear_relu.cu").read_text()
