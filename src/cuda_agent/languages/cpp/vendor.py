"""Rules profiles: which vendor-library calls (cuBLAS, cuDNN) a candidate may make.

`paper` (the default) is the CUDA Agent release's own rule: cuBLAS / cuBLASLt for GEMM and
cuDNN for convolution (forward, and backward-data for ConvTranspose), with only the handle,
stream, workspace, descriptor and algorithm calls those need. `strict` allows none of them:
the candidate writes every kernel. Everything else of those libraries (level-1/2 BLAS, geam,
cuDNN activation / softmax / op-tensor / add-tensor / pooling / normalisation, the cuDNN graph
API, cuBLASLt epilogues) and every other vendor library (cuSPARSE, cuFFT, cuRAND, cuSOLVER,
cuTENSOR, MKL, ...) is `blas-fallback` under both. The same table drives the source scan (as
written and after the preprocessor), the built library's undefined-symbol allow-list, the
headers a kernel may include and the SKILL.md paragraph: docs/guards.md ("Vendor libraries").
"""

from __future__ import annotations

import re

RULES_PROFILES = ("paper", "strict")
DEFAULT_RULES = "paper"

# ---- cuBLAS: GEMM and its setup ---------------------------------------------------------------
_CUBLAS_GEMM = [f"cublas{t}gemm{v}" for t in "SDHCZ" for v in ("", "Batched", "StridedBatched")] + [
    "cublasSgemmEx", "cublasCgemmEx", "cublasGemmEx", "cublasGemmBatchedEx", "cublasGemmStridedBatchedEx",
    "cublasSgemmGroupedBatched", "cublasDgemmGroupedBatched", "cublasGemmGroupedBatchedEx"]
_CUBLAS_SETUP = ["cublasCreate", "cublasDestroy", "cublasSetStream", "cublasGetStream", "cublasSetMathMode",
                 "cublasGetMathMode", "cublasSetWorkspace", "cublasSetPointerMode", "cublasGetPointerMode",
                 "cublasGetStatusString", "cublasGetStatusName", "cublasGetVersion", "cublasGetProperty"]
_CUBLASLT = ["cublasLtCreate", "cublasLtDestroy", "cublasLtMatmul", "cublasLtMatmulDescCreate",
             "cublasLtMatmulDescDestroy", "cublasLtMatmulDescSetAttribute", "cublasLtMatmulDescGetAttribute",
             "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy", "cublasLtMatrixLayoutSetAttribute",
             "cublasLtMatrixLayoutGetAttribute", "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceDestroy",
             "cublasLtMatmulPreferenceSetAttribute", "cublasLtMatmulPreferenceGetAttribute",
             "cublasLtMatmulAlgoGetHeuristic", "cublasLtGetStatusString", "cublasLtGetStatusName",
             "cublasLtGetVersion"]

# ---- cuDNN: convolution forward / backward-data and its setup --------------------------------
_CUDNN_CONV = ["cudnnConvolutionForward", "cudnnConvolutionBackwardData"]
_CUDNN_SETUP = [
    "cudnnCreate", "cudnnDestroy", "cudnnSetStream", "cudnnGetStream", "cudnnGetErrorString", "cudnnGetVersion",
    "cudnnGetCudartVersion", "cudnnGetLastErrorString",
    "cudnnCreateTensorDescriptor", "cudnnDestroyTensorDescriptor", "cudnnSetTensor4dDescriptor",
    "cudnnSetTensor4dDescriptorEx", "cudnnSetTensorNdDescriptor", "cudnnSetTensorNdDescriptorEx",
    "cudnnGetTensor4dDescriptor", "cudnnGetTensorNdDescriptor", "cudnnGetTensorSizeInBytes",
    "cudnnCreateFilterDescriptor", "cudnnDestroyFilterDescriptor", "cudnnSetFilter4dDescriptor",
    "cudnnSetFilterNdDescriptor", "cudnnGetFilter4dDescriptor", "cudnnGetFilterNdDescriptor",
    "cudnnCreateConvolutionDescriptor", "cudnnDestroyConvolutionDescriptor", "cudnnSetConvolution2dDescriptor",
    "cudnnSetConvolutionNdDescriptor", "cudnnGetConvolution2dDescriptor", "cudnnGetConvolutionNdDescriptor",
    "cudnnSetConvolutionGroupCount", "cudnnGetConvolutionGroupCount", "cudnnSetConvolutionMathType",
    "cudnnGetConvolutionMathType", "cudnnGetConvolution2dForwardOutputDim", "cudnnGetConvolutionNdForwardOutputDim",
    "cudnnGetConvolutionForwardAlgorithmMaxCount", "cudnnGetConvolutionForwardAlgorithm_v7",
    "cudnnFindConvolutionForwardAlgorithm", "cudnnFindConvolutionForwardAlgorithmEx",
    "cudnnGetConvolutionForwardWorkspaceSize",
    "cudnnGetConvolutionBackwardDataAlgorithmMaxCount", "cudnnGetConvolutionBackwardDataAlgorithm_v7",
    "cudnnFindConvolutionBackwardDataAlgorithm", "cudnnFindConvolutionBackwardDataAlgorithmEx",
    "cudnnGetConvolutionBackwardDataWorkspaceSize"]

_LIBRARIES = {  # the header that says a backend ships the library -> the names it may call under `paper`
    "cublas_v2.h": frozenset(_CUBLAS_GEMM + _CUBLAS_SETUP + _CUBLASLT),
    "cudnn.h": frozenset(_CUDNN_CONV + _CUDNN_SETUP),
}
_FAMILY = re.compile(r"(cublas|cudnn)\w*")
# cublas_v2.h renames the handle API to *_v2; the ILP64 API adds *_64
_SUFFIX = re.compile(r"(?:_v2)?(?:_64)?$")
# headers each library may be included through under `paper` (cudnn.h pulls in every part of cuDNN;
# only the names above may be called, whatever is declared)
PAPER_HEADERS = {"cublas_v2.h": frozenset("cublas_v2.h cublas_api.h cublasLt.h".split()),
                 "cudnn.h": frozenset(["cudnn.h"])}

# cuBLASLt epilogues and output reductions run bias / activation / amax compute inside the GEMM:
# refused by name under `paper` (a numeric attribute value is not seen here: docs/guards.md)
LT_EPILOGUE = re.compile(r"\b(?:CUBLASLT_EPILOGUE_(?!DEFAULT\b)\w+|CUBLASLT_MATMUL_DESC_(?:EPILOGUE|BIAS|AMAX)\w*)\b")


def check_rules(rules: str) -> str:
    if rules not in RULES_PROFILES:
        raise ValueError(f"unknown rules profile {rules!r}; choose one of {', '.join(RULES_PROFILES)}")
    return rules


def _shipped(backend: str) -> list[str]:
    from ...backends import backend_class

    return [h for h in _LIBRARIES if h in backend_class(backend).runtime_headers]


def vendor_allowed(name: str, rules: str, backend: str) -> bool:
    """Whether a cuBLAS / cuDNN identifier (as written, after the preprocessor, or as an
    undefined symbol of the built library) is allowed under `rules` on `backend`. Type names
    (`cublasHandle_t`, `cudnnTensorDescriptor_t`, ...) of a library in use are allowed; calls
    only when they are in the table above."""
    if check_rules(rules) == "strict" or not _FAMILY.fullmatch(name):
        return False
    shipped = _shipped(backend)
    lib = "cudnn.h" if name.startswith("cudnn") else "cublas_v2.h"
    if lib not in shipped:
        return False
    return name.endswith("_t") or _SUFFIX.sub("", name) in _LIBRARIES[lib] or name in _LIBRARIES[lib]


def header_allowed(header: str, rules: str, backend: str) -> bool:
    """Whether `#include <header>` of a vendor library is allowed under `rules` on `backend`."""
    return check_rules(rules) == "paper" and any(header in PAPER_HEADERS[h] for h in _shipped(backend))


def libraries_text(rules: str, backend: str) -> str:
    """The SKILL.md paragraph on libraries for the profile in force."""
    if check_rules(rules) == "strict" or not _shipped(backend):
        return ("- Libraries: the CUDA runtime and driver only (rules profile `strict`). No cuBLAS, cuDNN or other "
                "vendor/third-party libraries: write the GEMM or convolution yourself (the built library's imports "
                "are checked).")
    return ("- Libraries (rules profile `paper`, the CUDA Agent paper's rule): besides the CUDA runtime and driver, "
            "cuBLAS / cuBLASLt for GEMM only (`#include <cublas_v2.h>` or `<cublasLt.h>`: `cublasSgemm`, "
            "`cublasHgemm`, `cublasGemmEx`, the `...StridedBatched` / `...Batched` forms, `cublasLtMatmul` without "
            "epilogues, plus the handle, stream, math-mode, workspace, descriptor and heuristic calls) and cuDNN "
            "for convolution only (`#include <cudnn.h>`: `cudnnConvolutionForward`, `cudnnConvolutionBackwardData` "
            "for ConvTranspose, plus the handle, stream, tensor / filter / convolution descriptor, workspace-size "
            "and get / find-algorithm calls). Everything else of those libraries (level-1/2 BLAS, `cublasSgeam`, "
            "cuBLASLt epilogues, `cudnnActivationForward`, `cudnnSoftmaxForward`, `cudnnAddTensor`, "
            "`cudnnOpTensor`, pooling, normalisation, the cuDNN graph API) and every other library (cuSPARSE, "
            "cuFFT, cuRAND, ...) is refused: bias, activation and every other op are your kernels. Set the "
            "current stream on the handle (`cublasSetStream` / `cudnnSetStream`) before each call. The built library's imports are "
            "checked.")
