"""The C++ rules: `kernels/` as written and again after the real preprocessor (`check_preprocessed`);
a workspace's findings with the `model_new.py` grammar's (`check_workspace`), on the snapshot the build
will compile (`check_checked_bytes`). A first layer only, the runtime checks stay the backstop;
docs/guards.md ("Static rules") states the allow-lists below in prose."""

from __future__ import annotations

import bisect
import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ...backends import backend_class, get_backend
from ...isolation.paths import default_cache_dir
from ..model_new_rules import _SAFE_METHODS, _torch_facts, check_model_new
from ..records import RULES, Finding, dedupe
from ..snapshot import SnapshotError, record_checked, take_snapshot
from . import TEMPLATES_DIR
from .build import BuildError, Layout, _plan_units, ensure_pch, run_confined, unit_command
from .vendor import DEFAULT_RULES, LT_EPILOGUE, check_rules, header_allowed, vendor_allowed

_VENDOR_SCOPE = {"paper": "cuBLAS GEMM and cuDNN convolution only", "strict": "no vendor libraries"}


# ---- kernels/ policy ----------------------------------------------------------------------
_CPP_EXTS = frozenset(".cu .cuh .cpp .cc .cxx .c .h .hpp .hh .hxx .inl .inc".split())
_TOKENS = re.compile(r'//[^\n]*|/\*.*?(?:\*/|$)|R"([^()\\\s]{0,16})\(.*?\)\1"|"(?:\\.|[^"\\\n])*"'
                     r"|'(?:\\.|[^'\\\n])*'", re.S)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:<([^>\n]+)>|"([^"\n]+)"|(\S[^\n]*))', re.M)
_STD = frozenset(
    "algorithm any array atomic barrier bit bitset cassert ccomplex cctype cerrno cfenv cfloat charconv chrono "
    "cinttypes climits clocale cmath complex concepts condition_variable cstdarg cstddef cstdint cstdio cstdlib "
    "cstring ctime cwchar deque exception execution filesystem forward_list fstream functional future "
    "initializer_list iomanip ios iosfwd iostream istream iterator latch limits list map memory mutex new "
    "numbers numeric optional ostream queue random ranges ratio semaphore set shared_mutex source_location span "
    "sstream stack stdexcept streambuf string string_view system_error thread tuple type_traits typeindex "
    "typeinfo unordered_map unordered_set utility valarray variant vector version assert.h complex.h ctype.h "
    "errno.h fenv.h float.h inttypes.h limits.h math.h stdalign.h stdarg.h stdbool.h stddef.h stdint.h stdio.h "
    "stdlib.h string.h time.h omp.h immintrin.h x86intrin.h xmmintrin.h emmintrin.h pmmintrin.h tmmintrin.h "
    "smmintrin.h nmmintrin.h wmmintrin.h avxintrin.h avx2intrin.h avx512fintrin.h arm_neon.h arm_sve.h "
    "arm_fp16.h cpuid.h".split())
_HEAVY = frozenset("ATen/ATen.h ATen/Functions.h ATen/NativeFunctions.h ATen/CPUFunctions.h ATen/CUDAFunctions.h "
                   "ATen/CompositeImplicitAutogradFunctions.h ATen/CompositeExplicitAutogradFunctions.h".split())
_ALLOC_OPS = re.compile(r"ATen/ops/(empty|empty_like|empty_strided|zeros|zeros_like|ones|ones_like|full|"
                        r"full_like|from_blob)(_ops|_native)?\.h|ATen/ops/contiguous_ops\.h")
_QUAL = re.compile(r"(?<![\w:])(?:::\s*)?(at|torch)\s*::\s*((?:\w+\s*::\s*)*\w+)")
_AT_OK = frozenset(
    "Tensor TensorBase TensorOptions ScalarType IntArrayRef ArrayRef OptionalIntArrayRef SymIntArrayRef Device "
    "DeviceType DeviceGuard OptionalDeviceGuard Layout MemoryFormat Half BFloat16 Scalar optional nullopt "
    "TensorAccessor PackedTensorAccessor32 PackedTensorAccessor64 GenericPackedTensorAccessor RestrictPtrTraits "
    "DefaultPtrTraits empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob "
    "device dtype layout elementSize toString isFloatingType isComplexType isIntegralType isReducedFloatingType "
    "typeMetaToScalarType indexing".split())
_AT_CUDA_OK = frozenset(
    "getCurrentCUDAStream getDefaultCUDAStream CUDAGuard OptionalCUDAGuard CUDAStreamGuard CUDAStream "
    "getCurrentDeviceProperties getDeviceProperties current_device device_count warp_size".split())
_CPP_SAFE = _SAFE_METHODS | frozenset(
    "sizes strides mutable_data_ptr const_data_ptr options scalar_type dtype device is_cuda is_cpu defined "
    "itemsize nbytes layout slice index sym_sizes requires_grad accessor packed_accessor32 packed_accessor64 "
    "size data begin end empty fill swap at front back resize reserve insert erase find count clear get reset "
    "release load store value values str copy".split())
_NOT_AFTER = r"(?<![\w.])(?<!->)"
_CPP_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [(rule, re.compile(rx), msg) for rule, rx, msg in [
    ("stream-creation", r"\bcu(?:da)?StreamCreate\w*|\bcudaStreamPerThread\b|\bcudaStreamLegacy\b|"
     r"\bgetStreamFromPool\b|\bsetCurrentCUDAStream\b",
     "`{}`: launch on current_stream(); other streams escape the timer"),
    ("thread-creation", r"\bstd\s*::\s*(?:j?thread|async)\b|\bpthread_create\b|\bstd\s*::\s*execution\s*::\s*par"
     r"\w*|\bcudaLaunchHostFunc\b|\bcudaStreamAddCallback\b",
     "`{}`: work on other threads escapes the timer (OpenMP is fine)"),
    ("process-creation", _NOT_AFTER + r"\b(?:v?fork|system|popen|exec[lv]p?e?|execvpe|posix_spawnp?)\s*\(",
     "`{}`: kernels must not start processes"),
    ("io-in-kernel", _NOT_AFTER + r"\b(?:fopen|freopen|open|openat|creat|getenv|secure_getenv|setenv|putenv|socket|"
     r"connect|dlopen|dlsym|mmap|opendir|unlink|syscall|cuModuleLoad)\s*\(|\bstd\s*::\s*(?:[io]?fstream|"
     r"filesystem)\b", "`{}`: kernels must not touch files, the environment or the network"),
    ("l2-persistence", r"\baccessPolicyWindow\b|\baccess_property\s*::\s*persisting\b|\bapply_access_property\b|"
     r"\bcuda(?:Stream|Launch)AttributeAccessPolicyWindow\b|\bcudaLimitPersistingL2CacheSize\b|"
     r"\bcudaAccessPropertyPersisting\b|\bCU_LIMIT_PERSISTING_L2_CACHE_SIZE\b",
     "`{}`: L2 persistence keeps inputs warm across timed calls"),
    ("op-registration", r"\bTORCH_LIBRARY(?:_IMPL|_FRAGMENT)?\b|\bRegisterOperators\b|\bDispatcher\b|"
     r"\bcallBoxed\b|\bfindSchema\w*|\btorch\s*::\s*Library\b",
     "`{}`: register ops only with REGISTER_BINDING; overriding or dispatching torch ops is not allowed"),
    ("library-kernel", r"\bthrust\s*::\s*\w+|\bcub\s*::\s*Device\w+",
     "`{}` launches library kernels; write the kernel (CUB block/warp primitives are fine)"),
    ("aten-compute-in-cpp", r"\busing\s+namespace\s+(?:::\s*)?(?:at|torch)\b(?!\s*::\s*indexing)|"
     r"\bnamespace\s+\w+\s*=\s*(?:::\s*)?(?:at|torch)\b",
     "`{}` hides at::/torch:: calls; name them in full"),
]]
_SKIP_QUAL = re.compile(r"getStreamFromPool|setCurrentCUDAStream|Library|Dispatcher|RegisterOperators")
_METHOD_CALL = re.compile(r"(?:\.|->)\s*(\w+)\s*(?:<[^<>;(){}]*>\s*)?\(")
_PLAIN_CALL = re.compile(_NOT_AFTER + r"(?<!::)\b(\w+)\s*\(")
_DECLARED = re.compile(r"\b(?!return\b|else\b|case\b|throw\b|new\b|delete\b)\w+[\s*&>]+(\w+)\s*\(")
_LIBM = frozenset("abs fabs exp exp2 expm1 log log2 log10 log1p sqrt cbrt pow sin cos tan asin acos atan atan2 "
                  "sinh cosh tanh asinh acosh atanh floor ceil round trunc fmod remainder min max erf erfc lgamma "
                  "tgamma hypot fmax fmin copysign nextafter frexp ldexp isnan isinf isfinite signbit clamp swap "
                  "sort empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob "
                  "numel is_tensor".split())


def _strip_cpp(text: str) -> tuple[str, str]:
    """(text without comments, text without comments or string contents): same offsets and lines."""
    def blank(s: str) -> str:
        return re.sub(r"[^\n]", " ", s)
    nc = _TOKENS.sub(lambda m: blank(m[0]) if m[0][0] == "/" else m[0], text)
    code = _TOKENS.sub(lambda m: blank(m[0]) if m[0][0] == "/" else m[0][0] + blank(m[0][1:-1]) + m[0][-1], text)
    return nc, code


def _include_problem(n: str, angle: bool, backend: str, local_files: frozenset[str] | None,
                     rules: str = DEFAULT_RULES) -> tuple[str, str] | None:
    """(rule, message) for one #include, or None when it is allowed."""
    be = backend_class(backend)
    name = f"<{n}>" if angle else f'"{n}"'
    if (n in _HEAVY or n.startswith("ATen/native/") or (n.startswith("ATen/ops/") and not _ALLOC_OPS.fullmatch(n))
            or (n.startswith("torch/") and n != "torch/library.h")):
        return "heavy-torch-include", (f"`#include {name}` pulls in the ATen compute API: include only "
                                       "\"binding_registry.h\" (allocation, checks, REGISTER_BINDING); "
                                       "torch/extension.h also costs ~40 s per build")
    if n.startswith(("ATen/", "c10/", "torch/")) or n == "binding_registry.h":
        return None
    if not angle and not n.startswith("/") and ".." not in Path(n).parts and (local_files is None or n in local_files):
        return None
    if angle and n in be.vendor_library_headers and not header_allowed(n, rules, backend):
        return "blas-fallback", (f"`#include {name}`: not allowed under the `{rules}` rules profile "
                                 f"({_VENDOR_SCOPE[rules]}); write the kernel")
    if angle and (n in _STD or n in be.runtime_headers or n.startswith(be.runtime_header_dirs)):
        return None
    why = "Thrust launches library kernels" if n.startswith("thrust/") else (
        "not a file in kernels/" if not angle else "not the standard library or CUDA's own headers")
    return "third-party-include", f"`#include {name}`: {why}; third-party libraries are not allowed"


@dataclass(frozen=True)
class Dialect:
    """What a language adds to the C++ rules: includes it allows that the rules would refuse
    (still counted as torch headers, so argument-dependent lookup into ATen is still caught),
    and patterns it refuses, matched with comments stripped and strings kept."""

    includes: re.Pattern[str] | None = None
    patterns: tuple[tuple[str, re.Pattern[str], str], ...] = ()  # (rule, pattern, message; {} = the match)


def check_kernel_source(text: str, filename: str, backend: str, *, local_files: frozenset[str] | None = None,
                        torch_visible: bool | None = None, dialect: Dialect = Dialect(),
                        rules: str = DEFAULT_RULES) -> list[Finding]:
    """Check one file from kernels/. `local_files`: names a quoted #include may use (None: any plain
    name); `torch_visible`: whether it is a binding or a header a binding includes (None: guess);
    `rules`: the rules profile deciding which cuBLAS / cuDNN calls are allowed (vendor.py)."""
    check_rules(rules)
    nc, code = _strip_cpp(text)
    starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    found: list[Finding] = []

    def add(pos: int, rule: str, message: str) -> None:
        found.append(Finding(file=filename, line=bisect.bisect_right(starts, pos), rule=rule, message=message))
    heavy = torch_inc = False
    for m in _INCLUDE.finditer(nc):
        if m[3] is not None:
            add(m.start(), "third-party-include", f"`#include {m[3].strip()}`: computed includes cannot be checked")
            continue
        name = (m[1] or m[2]).strip()
        torch_inc |= name.startswith(("torch/", "ATen/", "c10/")) or name == "binding_registry.h"
        problem = _include_problem(name, bool(m[1]), backend, local_files, rules)
        if problem:
            heavy |= problem[0] == "heavy-torch-include"
            if not (dialect.includes and problem[0] in ("heavy-torch-include", "third-party-include")
                    and dialect.includes.match(name)):
                add(m.start(), *problem)
    if torch_visible is None:
        torch_visible = filename.endswith("_binding.cpp") or torch_inc
    for rule, rx, msg in _CPP_PATTERNS:
        for m in rx.finditer(code):
            add(m.start(), rule, msg.format(" ".join(m[0].split()).rstrip("( ")))
    for rule, rx, msg in dialect.patterns:
        for m in rx.finditer(nc):
            add(m.start(), rule, msg.format(m[0].strip()))
    for m in re.finditer(r"\.incbin\b", nc, re.IGNORECASE):
        add(m.start(), "io-in-kernel", "`.incbin` embeds a file from outside the sources")
    for m in _QUAL.finditer(code):
        parts = [p.strip() for p in m[2].split("::")]
        if _SKIP_QUAL.fullmatch(parts[-1]) or _qualified_ok(parts):
            continue
        add(m.start(), "aten-compute-in-cpp", f"`{m[1]}::{'::'.join(parts)}` is ATen compute: bindings may only "
            "allocate (empty, zeros, ...), check, and pass data_ptr()s, sizes and strides to your kernels")
    for m in re.finditer(r"\b(cublas\w*|cudnn\w*|cblas_\w+|mkl_\w+|openblas_\w+)\s*\(", code):
        if not vendor_allowed(m[1], rules, backend):
            add(m.start(), "blas-fallback", f"`{m[1]}` is a vendor math library call that the `{rules}` rules "
                f"profile does not allow ({_VENDOR_SCOPE[rules]}): the kernel must be written")
    for m in LT_EPILOGUE.finditer(code):
        add(m.start(), "blas-fallback", f"`{m[0]}`: cuBLASLt epilogues and output reductions (bias, activation, "
            "amax) are compute outside the GEMM; write them as your own kernel")
    if torch_visible:
        compute = _torch_facts()[0] - _CPP_SAFE
        for m in _METHOD_CALL.finditer(code):
            if m[1] in compute:
                add(m.start(), "aten-compute-in-cpp", f"`.{m[1]}(...)` is a computing Tensor method: bindings "
                    "may only allocate, check and pass pointers to your kernels")
    if heavy:
        declared = set(_DECLARED.findall(code))
        adl = _torch_facts()[2] - _LIBM - declared
        for m in _PLAIN_CALL.finditer(code):
            if m[1] in adl:
                add(m.start(), "aten-compute-in-cpp", f"`{m[1]}(...)` resolves to at::{m[1]} by argument-"
                    "dependent lookup: ATen compute in a binding")
    return dedupe(found)


def _qualified_ok(parts: list[str]) -> bool:
    head = parts[0]
    if head in ("ScalarType", "MemoryFormat", "DeviceType", "Layout", "indexing") or re.fullmatch(r"k[A-Z]\w*", head):
        return True
    if head == "Tensor":
        return len(parts) == 1 or parts[1] in _CPP_SAFE
    if head == "cuda":
        return len(parts) >= 2 and parts[1] in _AT_CUDA_OK
    return len(parts) == 1 and head in _AT_OK


# ---- the workspace ------------------------------------------------------------------------
def check_workspace(root: Path, backend: str, extension_name: str, *,
                    disabled_rules: frozenset[str] = frozenset(), preprocess: bool = True,
                    cache_dir: Path | None = None, dialect: Dialect = Dialect(),
                    rules: str = DEFAULT_RULES) -> list[Finding]:
    """All findings for model_new.py and kernels/ (as written and as preprocessed), minus the
    rules switched off. `cache_dir`: the build cache holding the bindings' precompiled header;
    `rules`: the rules profile (`paper` / `strict`, vendor.py)."""
    check_rules(rules)
    unknown = set(disabled_rules) - RULES.keys()
    if unknown:
        raise ValueError(f"unknown static-check rules: {sorted(unknown)} (known: {sorted(RULES)})")
    root = Path(root)
    real_root = root.resolve()
    kdir = root / "kernels"
    files = sorted(p for p in kdir.rglob("*") if p.is_file() or p.is_symlink()) if kdir.is_dir() else []
    found: list[Finding] = []
    for p in [root / "model_new.py", *files]:
        if p.is_symlink() and not p.resolve().is_relative_to(real_root):
            found.append(Finding(file=p.relative_to(root).as_posix(), line=1, rule="file-outside-workspace",
                                 message=f"{p.name} links to {os.readlink(p)}, outside the workspace"))
    model_new = root / "model_new.py"
    if model_new.is_file():
        found += check_model_new(model_new.read_text(errors="replace"), extension_name)
    sources = {p: p.read_text(errors="replace") for p in files if p.suffix in _CPP_EXTS and p.is_file()}
    visible = {p for p in sources if p.name.endswith("_binding.cpp")}
    todo = list(visible)
    while todo:  # headers a binding includes see ATen too
        p = todo.pop()
        for m in _INCLUDE.finditer(_strip_cpp(sources[p])[0]):
            q = (p.parent / m[2]) if m[2] else None
            if q in sources and q not in visible:
                visible.add(q)
                todo.append(q)
    for p, text in sources.items():
        local = frozenset(os.path.relpath(q, p.parent) for q in files)
        found += check_kernel_source(text, p.relative_to(root).as_posix(), backend, local_files=local,
                                     torch_visible=p in visible, dialect=dialect, rules=rules)
    if preprocess and sources:
        found += check_preprocessed(root, backend, cache_dir=cache_dir, rules=rules)
    return sorted((f for f in dedupe(found) if f.rule not in disabled_rules), key=lambda f: (f.file, f.line))


def check_checked_bytes(root: Path, backend: str, extension_name: str, templates: Path, *,
                        disabled_rules: frozenset[str] = frozenset(), cache_dir: Path | None = None,
                        preprocess: bool = True, dialect: Dialect = Dialect(),
                        rules: str = DEFAULT_RULES) -> list[Finding]:
    """`check_workspace` on a snapshot of the workspace (`snapshot.py`), recorded as what the
    next build of this workspace must compile: the build refuses any other bytes."""
    cache = (cache_dir or default_cache_dir()).resolve()
    try:
        snap = take_snapshot(root, cache, templates)
    except SnapshotError as exc:
        found = [Finding(file=exc.file, line=1, rule=exc.rule, message=exc.message)]
        return [f for f in found if f.rule not in disabled_rules]
    found = check_workspace(snap.root, backend, extension_name, disabled_rules=disabled_rules,
                            preprocess=preprocess, cache_dir=cache, dialect=dialect, rules=rules)
    record_checked(root, snap)
    return found


# ---- kernels/ after the real preprocessor ---------------------------------------------------
# The raw-source rules above read what was written; these read what the compiler will see, so a
# macro, token paste or system-header helper (`__CONCAT`) cannot hide a call. Only lines the
# line markers attribute to files in kernels/ are scanned (macro expansions land on the line
# that uses the macro); the same flags as the build are used, nvcc's own host-side preprocessing
# command for .cu files (taken from `nvcc --dryrun`; device code cannot call the OS), and the
# build's precompiled header for bindings (`-fpch-preprocess`: 70 ms instead of 650 ms).
_PP_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [(rule, re.compile(rx), msg) for rule, rx, msg in [
    ("dynamic-loading", r"\b(?:dlopen|dlmopen|dlsym|dlvsym|dlinfo|_dl_\w+|__libc_dl\w+|cuGetProcAddress\w*"
     r"|cudaGetDriverEntryPoint\w*|cu(?:da)?GetExportTable|cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*"
     r"|nvrtc\w+|nvJitLink\w+)\b", "looks up or loads code by name at run time"),
    ("raw-syscall", r"\b(?:syscall|__syscall\w*|__libc_syscall)\b", "makes raw system calls"),
    ("process-creation", _NOT_AFTER + r"\b(?:fork|vfork|_Fork|execl|execle|execlp|execv|execve|execvp|execvpe"
     r"|execveat|fexecve|posix_spawnp?|popen|system|wordexp|daemon|ptrace)\b", "starts or controls processes"),
    ("thread-creation", r"\b(?:pthread_create|thrd_create|cudaLaunchHostFunc|cudaStreamAddCallback)\b"
     r"|\bstd\s*::\s*(?:j?thread|async)\b", "starts threads or host callbacks"),
    ("blas-fallback", r"\b(?:cblas_\w+|cublas\w*|cudnn\w*|cusparse\w*|cusolver\w*|cufft\w*|mkl_\w+|openblas_\w+"
     r"|[sdcz](?:gemm|gemv|axpy|dot|scal|syrk|trsm|trmm|symm|ger)_)\b",
     "is a vendor math library (BLAS / cuBLAS / cuDNN / ...): write the kernel"),
    ("aten-compute-in-cpp", r"\bat\s*::\s*(?:native|cpu|_ops|compositeexplicitautograd\w*|compositeimplicitautograd\w*)"
     r"\s*::\s*\w+|\b(?:Dispatcher|OperatorHandle|callBoxed|findSchema\w*)\b|\btorch\s*::\s*Library\s*::\s*IMPL\b"
     r"|\bc10\s*::\s*impl\s*::\s*tls_\w+", "is ATen compute or the dispatcher"),
    ("inline-asm", r"^\s*#\s*pragma\s+(?:redefine_extname|weak)\b|\.symver\b", "renames or aliases a symbol"),
]]
_PP_ALLOC_OPS = re.compile(r"at\s*::\s*_ops\s*::\s*(?:empty\w*|zeros\w*|ones\w*|full\w*|contiguous)\b")
_PP_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"')
_PP_ASM = re.compile(r'\b(?:asm|__asm__|__asm)\b\s*(?:(?:volatile|__volatile__|goto|inline)\s*)*\(\s*'
                     r'((?:"(?:\\.|[^"\\])*"\s*)+)')
# (the assembler reads directives in any case: `.INCBIN` is `.incbin`)
_PP_SYSCALL_ASM = re.compile(r"\b(?:syscall|sysenter|svc)\b|\bint\s*\$?\s*0x80\b|\.byte\b|\.incbin\b|\.symver\b",
                             re.IGNORECASE)
# a section name is pasted into the assembler's input as it is: one with a newline or a quote in
# it is a line of assembler directives (`.incbin` of a host file: issue 24, round 4)
_PP_SECTION = re.compile(r'\b(?:__)?section(?:__)?\s*\(\s*((?:"(?:\\.|[^"\\])*"\s*)+)')
_PLAIN_SECTION = re.compile(r"[\w.$]+")


def _own_lines(text: str, kdir: Path) -> dict[str, dict[int, list[str]]]:
    """{file in kernels/: {line: [preprocessed text]}} from `-E` output with line markers."""
    out: dict[str, dict[int, list[str]]] = {}
    cur, line, own = "", 0, False
    cache: dict[str, bool] = {}
    for raw in text.splitlines():
        m = _PP_MARKER.match(raw)
        if m:
            cur, line = m[2], int(m[1])
            if cur not in cache:
                p = Path(cur)
                cache[cur] = not cur.startswith("<") and p.resolve().is_relative_to(kdir)
            own = cache[cur]
            continue
        if own and raw.strip():
            out.setdefault(cur, {}).setdefault(line, []).append(raw)
        line += 1
    return out


# Bounds on the scan's preprocessing, far above honest code's (red team round 5, k1: a macro
# chain of 2^20 terms passed the scan and spent the build's whole 300 s; g++'s front end is
# quadratic in such an expression: 2^14 terms 17 s, 2^16 over 200 s). Measured on the 2-core CPU
# box (bench/preprocess_scan_bench.py): the bundled examples' units preprocess in <= 0.3 s to
# <= 0.3 MiB (the PCH is one marker line), a .cu unit including cuda_runtime, cub and thrust in
# ~2 s to ~6 MiB; the candidate's own lines expand a few hundred bytes at most.
SCAN_TIME_S = float(os.environ.get("CUDA_AGENT_SCAN_TIME_S", 60))  # per preprocessor command, wall
SCAN_OUTPUT_BYTES = int(os.environ.get("CUDA_AGENT_SCAN_OUTPUT_MB", 64)) << 20  # its text, per command
SCAN_MEMORY_BYTES = int(os.environ.get("CUDA_AGENT_SCAN_MEMORY_MB", 2048)) << 20  # its address space
_OUT_OF_MEMORY = re.compile(r"out of memory|memory exhausted|Cannot allocate memory|bad_alloc")
LINE_EXPANSION_BYTES = 64 << 10  # what one line of the candidate's may expand to, above 16x its own code
LINE_EXPANSION_RATIO = 16


def check_preprocessed(root: Path, backend: str, *, cache_dir: Path | None = None,
                       rules: str = DEFAULT_RULES) -> list[Finding]:
    """Findings in the preprocessed text of every translation unit in kernels/: the snapshot the
    build compiles (`root` itself when it is one), each unit through `build.unit_command` run by
    `build.run_confined`: the build's own command, working directory, include paths and
    confinement, so `__has_include` and friends show the scan exactly what the build sees."""
    be = get_backend(backend)
    cache = (cache_dir or default_cache_dir()).resolve()
    try:
        snap = take_snapshot(root, cache, TEMPLATES_DIR)
    except SnapshotError:
        return []  # reported by the workspace check and refused by the build
    if not snap.kernels.is_dir():
        return []
    layout = Layout()
    try:
        units = [u for u in _plan_units(snap, be, layout, strict=False) if u.kind != "fixed"]
    except BuildError:
        return []  # the build refuses it, with the reason
    try:
        pch_dir: Path | None = ensure_pch(be, cache, time.monotonic() + 300)
    except (BuildError, OSError):
        pch_dir = None
    cmds = [(u, c) for u in units for c in unit_command(u, be, layout, pch_dir, snap, None)]
    (cache / "tmp").mkdir(parents=True, exist_ok=True)

    found: list[Finding] = []

    def run(item: tuple) -> tuple[Path, str]:
        unit, cmd = item
        rel = unit.source.relative_to(snap.root).as_posix()
        with tempfile.TemporaryDirectory(dir=cache / "tmp") as tmp:
            out = Path(tmp) / "pp.ii"
            try:
                run_confined(cmd, time.monotonic() + SCAN_TIME_S, snap, Path(tmp), stdout_to=out,
                             reads=[*unit.reads, *([pch_dir] if pch_dir else [])],
                             limits={"file_bytes": SCAN_OUTPUT_BYTES, "memory_bytes": SCAN_MEMORY_BYTES})
            except BuildError as exc:
                if exc.timed_out:
                    what = f"took over {SCAN_TIME_S:g} s"
                elif out.exists() and out.stat().st_size >= SCAN_OUTPUT_BYTES - (64 << 10):
                    what = f"expands past {SCAN_OUTPUT_BYTES >> 10} KiB"
                elif _OUT_OF_MEMORY.search(exc.log):  # cpp holds a line's whole expansion before writing it
                    what = f"needs over {SCAN_MEMORY_BYTES >> 20} MiB of memory"
                else:
                    what = ""
                if what:  # a verdict now, not the build's whole time limit spent on it later
                    found.append(Finding(file=rel, line=1, rule="preprocess-bound", message=(
                        f"preprocessing this unit {what}: far beyond honest code (a macro expansion this "
                        "large would not compile within the build's time limit)")))
                return unit.source, ""  # otherwise a failure fails the build too, with the compiler's log
            return unit.source, out.read_text(errors="replace")

    with ThreadPoolExecutor(min(4, max(1, len(cmds)))) as pool:
        outputs = list(pool.map(run, cmds))
    kdir = snap.kernels.resolve()
    for unit, text in outputs:
        host = not be.device_source(unit)
        for fname, lines in _own_lines(text, kdir).items():
            rel = Path(fname).resolve().relative_to(snap.root.resolve()).as_posix()
            found += _expansion_bound(Path(fname), rel, lines)
            for line, chunks in lines.items():
                found += _scan_pp_line("\n".join(chunks), rel, line, host, rules=rules, backend=backend)
    return dedupe(found)


def _expansion_bound(source: Path, rel: str, lines: dict[int, list[str]]) -> list[Finding]:
    """A line of the candidate's whose preprocessed text is over `LINE_EXPANSION_BYTES` and over
    `LINE_EXPANSION_RATIO` times its own code (comments aside): a macro bomb. A long line of
    literal data (a table) expands to itself and passes."""
    big = {line: sum(len(c) + 1 for c in chunks) for line, chunks in lines.items()}
    big = {line: n for line, n in big.items() if n > LINE_EXPANSION_BYTES}
    if not big:
        return []
    try:
        code = _strip_cpp(source.read_text(errors="replace"))[0].splitlines()
    except OSError:
        code = []
    out = []
    for line, n in sorted(big.items()):
        own = len(code[line - 1].strip()) if 0 < line <= len(code) else 0
        if n > LINE_EXPANSION_RATIO * max(own, 1):
            out.append(Finding(file=rel, line=line, rule="preprocess-bound", message=(
                f"this line expands to {n >> 10} KiB after preprocessing ({own} bytes as written): a macro "
                "expansion this large would spend the build's whole time limit")))
    return out


def _string_value(literals: str) -> str:
    """What adjacent C string literals ("a" "b\\n") say, escapes decoded: what the assembler reads."""
    return "".join(bytes(s, "utf-8").decode("unicode_escape", "replace")
                   for s in re.findall(r'"((?:\\.|[^"\\])*)"', literals))


def _scan_pp_line(text: str, rel: str, line: int, host: bool, *, backend: str,
                  rules: str = DEFAULT_RULES) -> list[Finding]:
    out = []
    for m in _PP_SECTION.finditer(text):
        name = _string_value(m[1])
        if not _PLAIN_SECTION.fullmatch(name):
            out.append(Finding(file=rel, line=line, rule="inline-asm",
                               message=f"section name {name[:40]!r} is not a plain name: the assembler would read "
                               "the rest as its own directives"))
    for m in _PP_ASM.finditer(text):
        template = _string_value(m[1])
        if _PP_SYSCALL_ASM.search(template):
            out.append(Finding(file=rel, line=line, rule="raw-syscall",
                               message=f"inline asm `{template.strip()[:40]}` talks to the OS or emits raw bytes"))
        elif template.strip() and (host or re.fullmatch(r"\s*[A-Za-z_.$][\w.$@]*\s*", template)):
            out.append(Finding(file=rel, line=line, rule="inline-asm",
                               message=f"inline asm `{template.strip()[:40]}` in host code (or an asm label "
                               "renaming a symbol): only empty compiler barriers are allowed there"))
    _, code = _strip_cpp(text)
    for rule, rx, why in _PP_PATTERNS:
        for m in rx.finditer(text if rule == "inline-asm" else code):
            if rule == "aten-compute-in-cpp" and _PP_ALLOC_OPS.match(m[0]):
                continue
            if rule == "blas-fallback" and vendor_allowed(m[0], rules, backend):
                continue
            out.append(Finding(file=rel, line=line, rule=rule,
                               message=f"`{' '.join(m[0].split())}` (after preprocessing) {why}"))
    for m in LT_EPILOGUE.finditer(code):
        out.append(Finding(file=rel, line=line, rule="blas-fallback",
                           message=f"`{m[0]}` (after preprocessing): a cuBLASLt epilogue or output reduction is "
                                   "compute outside the GEMM"))
    return out
