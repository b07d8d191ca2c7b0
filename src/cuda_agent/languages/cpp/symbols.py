"""What a built extension library imports, checked against an allow-list.

The source scan reads what the agent wrote; this reads what the linker produced, so no macro,
token paste, asm label or `#pragma redefine_extname` can hide a call. What is allowed, and which
rule names each fallback: docs/guards.md ("What the built library may import"). A pointer
computed at run time can still reach anything: the candidate's sandbox holds then.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from ...backends import backend_class
from ..records import Finding
from .vendor import DEFAULT_RULES, check_rules, vendor_allowed

# ---- denied, with a reason ------------------------------------------------------------------
_DENY: list[tuple[str, re.Pattern[str], str]] = [(rule, re.compile(rx), why) for rule, rx, why in [
    ("dynamic-loading", r"(dlopen|dlmopen|dlsym|dlvsym|dladdr1?|dlinfo|dlerror|dl_iterate_phdr|_dl_\w+|__libc_dl\w+"
     r"|cuGetProcAddress\w*|cudaGetDriverEntryPoint\w*|cu(da)?GetExportTable|cuModuleLoad\w*|cuLibraryLoad\w*"
     r"|cudaLibraryLoad\w*|cuLink\w+|nvrtc\w+|nvJitLink\w+|nvPTXCompiler\w+)",
     "looks up or loads code by name at run time"),
    ("raw-syscall", r"(syscall|__syscall\w*|__libc_syscall)", "makes raw system calls"),
    ("process-creation", r"(fork|vfork|_Fork|__fork|clone|clone3|__clone\w*|execl|execle|execlp|execv|execve|execvp"
     r"|execvpe|execveat|fexecve|posix_spawnp?|system|popen|pclose|wordexp|daemon|kill|raise|ptrace)",
     "starts or signals processes"),
    ("thread-creation", r"(pthread_create|thrd_create|std::thread::\w+|std::jthread::\w+|std::__future_base::\w+.*"
     r"|std::async|cudaLaunchHostFunc|cudaStreamAddCallback|cuLaunchHostFunc|cuStreamAddCallback)",
     "starts threads or host callbacks"),
    # (c10::cuda's stream pool is not here: torch's CUDA guard headers instantiate it in every
    # binding; work on another stream is counted anyway, the judge's interval ends on an idle device)
    ("stream-creation", r"(cu(da)?StreamCreate\w*)", "creates streams"),
    ("io-in-kernel", r"(fopen(64)?|freopen(64)?|fdopen|open(64)?|__open\w*|openat(64)?|creat(64)?|socket|socketpair"
     r"|connect|bind|listen|accept4?|getenv|secure_getenv|setenv|putenv|unsetenv|opendir|unlink(at)?|remove|rename"
     r"|mkdir|chmod|chdir|read|write|pread(64)?|pwrite(64)?|send\w*|recv\w*|ioctl|mmap(64)?|mprotect|munmap"
     r"|mremap|shm_open|memfd_create|std::basic_[io]?fstream.*|std::basic_filebuf.*|std::__basic_file.*"
     r"|std::(__fs::)?filesystem::.*|std::random_device::.*|cu(da)?Ipc\w+|cuMem(Pool)?(Export|Import)\w*"
     r"|cudaMemPool(Export|Import)\w*)", "touches files, sockets, memory mappings or other processes"),
    ("blas-fallback", r"(cblas_\w+|[sdcz](gemm|gemm3m|gemv|symm|syrk|syr2k|trmm|trsm|axpy|axpby|dotu?|dotc|scal"
     r"|copy|swap|nrm2|asum|ger[uc]?|trmv|trsv|symv|hemm|herk|her2k|hemv)_?|mkl_\w+|MKL_\w+|openblas_\w+"
     r"|goto_\w+|bli_\w+|dnnl_\w+|cublas\w*|cudnn\w*|cusparse\w*|cusolver\w*|cufft\w*|curand\w*|cutensor\w*"
     r"|at::native::cpublas::.*|at::cuda::blas::.*|at::cuda::getCurrentCUDABlas\w*|at::cuda::getCUDABlas\w*)",
     "is a vendor math library (BLAS / cuBLAS / cuDNN / ...) outside what the rules profile allows "
     "(`paper`: cuBLAS GEMM and cuDNN convolution; `strict`: none): write the kernel"),
    ("aten-compute-in-cpp", r"(at::(native|cpu|cuda|meta|mps|compositeexplicitautograd\w*|compositeimplicitautograd\w*"
     r"|_ops)::.*|at::Tensor::.*|at::\w+|torch::.*|c10::Dispatcher::.*|c10::OperatorHandle::.*|c10::impl::"
     r"(OperatorEntry|tls_\w+|ExcludeDispatchKeyGuard|IncludeDispatchKeyGuard|TorchDispatchModeTLS|PythonDispatcherTLS)"
     r".*|c10::KernelFunction::.*|at::globalContext|at::Context::.*|c10::SetAllocator|c10::SetCPUAllocator)",
     "is ATen compute, the dispatcher or global torch state: bindings may only allocate, check and "
     "pass pointers to your kernels"),
]]

# ---- allowed ------------------------------------------------------------------------------
_LIBM = (r"(a?sin|a?cos|a?tan|atan2|sinh|cosh|tanh|asinh|acosh|atanh|exp|exp2|expm1|exp10|log|log2|log10|log1p|logb"
         r"|pow|sqrt|cbrt|hypot|erfc?|lgamma|tgamma|floor|ceil|round|l?lround|trunc|l?lrint|rint|nearbyint|fmod"
         r"|remainder|remquo|fmax|fmin|fdim|fma|fabs|copysign|nextafter|nexttoward|frexp|ldexp|scalbl?n|modf|ilogb"
         r"|nan|sincos)[fl]?")
_COMMON = [
    _LIBM, rf"__{_LIBM}_finite", r"__(isnan|isinf|finite|fpclassify|signbit)[fl]?",
    r"mem(cpy|move|set|cmp|chr|rchr)|str(len|nlen|cmp|ncmp|cpy|ncpy|cat|ncat|chr|rchr|str|error|dup|ndup|spn|cspn)"
    r"|__(mem|str)\w+_chk|__(v?s?n?printf|v?fprintf)_chk|v?s?n?printf|v?fprintf|puts|putchar|fputs|fputc|fflush"
    r"|fwrite|stdout|stderr|strto(l|ll|ul|ull|d|f|ld)|__isoc\d+_strto\w+|ato[ifl]|qsort|bsearch|l?labs|abs|div",
    r"malloc|calloc|realloc|free|posix_memalign|aligned_alloc|memalign|abort|exit|atexit|__cxa_\w+|__assert_fail"
    r"|__stack_chk_fail|__errno_location|__tls_get_addr|__libc_single_threaded|__gmon_start__|_ITM_\w+"
    r"|__gxx_personality_v0|_Unwind_\w+|__once_proxy|__dso_handle|sched_yield"
    # libstdc++'s inline <locale> / iostream code pulls in glibc's locale and wide-char helpers
    r"|__(dup|new|free|use)locale|uselocale|newlocale|freelocale|duplocale|__ctype_\w+|__nl_langinfo_l"
    r"|nl_langinfo|setlocale|localeconv|__(str|wcs)(coll|xfrm|ftime)_l|__(to|is)w?\w+_l|__wctype_l|wc\w+|mb\w+"
    r"|btowc|wctob|getwc|putwc|ungetwc|getc|ungetc|strcoll|strxfrm|strftime|wmem\w+|__wmem\w+_chk|iconv\w*"
    r"|(__)?pthread_(mutex|once|key|getspecific|setspecific|cond|rwlock|spin|self|equal)\w*",  # std::mutex, call_once
    r"__\w+(di|ti|sf|df|tf|xf|hf|bf)\d",  # libgcc arithmetic helpers
    r"operator (new|delete)(\[\])?|__cxxabiv1::.*",
    r"std::.*",  # libstdc++ (its threads, files, clocks and futures are denied above)
    r"c10::detail::(torchCheckFail|torchInternalAssertFail|torchCheckMsgImpl|maybe_wrap_dim_slow|infer_schema::\w+"
    r"|_str_wrapper\w*|deprecated\w*)",
    r"c10::(Error|ValueError|TypeError|IndexError|NotImplementedError|LinAlgError|OutOfMemoryError|AcceleratorError"
    r"|EnforceFiniteError|Warning|WarningHandler|WarningUtils|SourceLocation)(::.*)?|c10::(warn|get_backtrace"
    r"|GetExceptionString|ThrowEnforceNotMet|ThrowEnforceFiniteNotMet|toString|operator<<|typeKindToString"
    r"|throwNullDataPtrError|warnDeprecatedDataPtr)",  # data_ptr<T>() on torch 2.11: a null check and a warning
    r"c10::(SymInt|SymBool|SymFloat|SymNodeImpl|SymbolicShapeMeta|TensorImpl|UndefinedTensorImpl|StorageImpl|Storage"
    r"|Device|Stream|Scalar|TensorOptions|intrusive_ptr_target|IValue|FunctionSchema|Argument|OperatorName|AliasInfo"
    r"|Symbol|Type|DataPtr|Allocator)(::.*)?|c10::\w+Type::\w+|c10::(GetAllocator|GetCPUAllocator)"
    r"|c10::impl::(device_guard_impl_registry|getDeviceGuardImpl|cow::\w+|VirtualGuardImpl::\w+)|caffe2::.*",
    r"at::TensorBase::.*|at::Tensor::(print|toString)|at::TensorMaker::make_tensor|at::detail::empty_\w+|at::print"
    r"|at::_ops::(empty\w*|zeros\w*|ones\w*|full\w*|new_(empty\w*|zeros|ones|full)|contiguous|view\w*|reshape"
    r"|_reshape_alias\w*|as_strided\w*|slice\w*|select\w*|narrow\w*|transpose\w*|permute|unsqueeze\w*|squeeze\w*"
    r"|expand\w*|flatten\w*|unflatten\w*|t|alias|detach\w*|clone|copy_|to|to_dtype\w*|to_device|to_other|_to_copy"
    r"|fill_|zero_|split\w*|chunk|unbind\w*|movedim\w*|swapaxes|swapdims|unfold|_unsafe_view|resize_)::(call|redispatch)",
    r"torch::Library::(Library|_def|~Library|reset)|torch::CppFunction::.*|torch::jit::parseSchema(OrName)?",
]


@functools.cache
def _allowed(backend: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in _COMMON + list(backend_class(backend).runtime_symbols)))


@functools.cache
def _denied(backend: str) -> re.Pattern[str] | None:
    rx = backend_class(backend).denied_runtime_symbols
    return re.compile(rx) if rx else None


def classify(symbol: str, backend: str, rules: str = DEFAULT_RULES) -> tuple[str, str] | None:
    """(rule, reason) for one demangled undefined symbol, or None when it is allowed. `rules`:
    the rules profile; under `paper` the cuBLAS GEMM / cuDNN convolution entry points and their
    setup calls are allowed (vendor.py), under `strict` no vendor library is."""
    name = qualname(symbol)
    if vendor_allowed(name, rules, backend):
        return None
    for rule, rx, why in _DENY:
        if rx.fullmatch(name) and not (rule == "aten-compute-in-cpp" and _allowed(backend).fullmatch(name)):
            return rule, why
    denied = _denied(backend)
    if denied is not None and denied.fullmatch(name):
        return "symbol-not-allowed", "resets or destroys the device context"
    if _allowed(backend).fullmatch(name):
        return None
    return "symbol-not-allowed", ("is outside the allow-list (libc memory/math, the C++ runtime, tensor "
                                  f"allocation and metadata, {backend_class(backend).runtime_title})")


_SPECIAL = re.compile(r"^(?:(?:construction )?vtable for |VTT for |typeinfo (?:name )?for |guard variable for "
                      r"|(?:non-virtual |virtual |covariant return )thunk to |TLS (?:init|wrapper) function for "
                      r"|reference temporary #\d+ for )")
_OPS = re.compile(r"operator(<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|<|>|\(\)|\[\])")


def qualname(demangled: str) -> str:
    """`float* at::TensorBase::data_ptr<float>() const` -> `at::TensorBase::data_ptr`; the
    qualified name without return type, template arguments, parameters or version."""
    s = demangled.split("@")[0].strip()
    s = _SPECIAL.sub("", s).replace("(anonymous namespace)", "{anon}")
    ops: list[str] = []
    s = _OPS.sub(lambda m: (ops.append(m[0]), f"operator\x00{len(ops) - 1}\x00")[1], s)
    prev = None
    while prev != s:
        prev, s = s, re.sub(r"<[^<>]*>", "", s)
    s = s.split("(")[0].strip()
    i = s.find("operator")
    if i >= 0 and (i == 0 or s[i - 1] in " :"):  # keep `operator new`, `c10::Half::operator float`
        s = s[s.rfind(" ", 0, i) + 1:]
    else:
        s = s.rsplit(" ", 1)[-1]
    return re.sub(r"operator\x00(\d+)\x00", lambda m: ops[int(m[1])], s)


def _demangle(names: list[str]) -> list[str]:
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return names
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30).stdout
    lines = out.splitlines()
    return lines if len(lines) == len(names) else names


# ---- raw system-call instructions ---------------------------------------------------------
_X86_SYSCALL = re.compile(rb"\x0f\x05|\x0f\x34|\xcd\x80")
_X86_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(syscall|sysenter|int\s+\$0x80)\b", re.M)
_FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:", re.M)


def _raw_syscalls(elf: ELFFile, library: Path) -> list[str]:
    """`function+offset: insn` for each system-call instruction in an executable section."""
    hits: list[str] = []
    for sec in elf.iter_sections():
        if not sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR or sec["sh_type"] == "SHT_NOBITS":
            continue
        data = sec.data()
        if elf["e_machine"] == "EM_AARCH64":
            for off in range(0, len(data) - 3, 4):
                insn = int.from_bytes(data[off:off + 4], "little")
                if insn & 0xFFE0001F == 0xD4000001:  # svc #imm
                    hits.append(f"{sec.name}+{off:#x}: svc")
        elif _X86_SYSCALL.search(data):  # bytes can sit inside other instructions: disassemble to be sure
            hits += _disassembled_syscalls(library, sec.name)
    return hits


def _disassembled_syscalls(library: Path, section: str) -> list[str]:
    tool = shutil.which("objdump")
    if tool is None:
        return [f"{section}: syscall bytes (objdump missing, cannot confirm)"]
    text = subprocess.run([tool, "-d", "--no-show-raw-insn", "-j", section, str(library)],
                          capture_output=True, text=True, timeout=60).stdout
    funcs = [(int(m[1], 16), m[2]) for m in _FUNC.finditer(text)]
    out = []
    for m in _X86_INSN.finditer(text):
        addr = int(m[1], 16)
        owner = max((f for f in funcs if f[0] <= addr), default=(addr, section))
        out.append(f"{owner[1]}+{addr - owner[0]:#x}: {' '.join(m[2].split())}")
    return out


# ---- the library --------------------------------------------------------------------------
def undefined_symbols(library: str | Path) -> list[str]:
    """Names (mangled) of the undefined dynamic symbols of an ELF shared library."""
    with open(library, "rb") as fh:
        elf = ELFFile(fh)
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is None:
            return []
        return sorted({s.name for s in dynsym.iter_symbols() if s.name and s["st_shndx"] == "SHN_UNDEF"})


def check_library(library: str | Path, backend: str, *, workspace: str | Path | None = None,
                  rules: str = DEFAULT_RULES) -> list[Finding]:
    """Findings for a built extension library: every undefined symbol outside the allow-list
    for `backend` and the rules profile `rules`, and every raw system-call instruction.
    `workspace`, when given, lets a finding point at the kernels/ file and line that names the symbol."""
    check_rules(rules)
    library = Path(library)
    try:
        with open(library, "rb") as fh:
            elf = ELFFile(fh)
            raw = _raw_syscalls(elf, library)
    except (OSError, ValueError) as e:
        raise ValueError(f"symbols: cannot read {library}: {e}") from None
    names = undefined_symbols(library)
    found: list[Finding] = []
    for mangled, shown in zip(names, _demangle(names)):
        verdict = classify(shown, backend, rules)
        if verdict:
            file, line = _where(qualname(shown), workspace, library)
            found.append(Finding(file=file, line=line, rule=verdict[0],
                                 message=f"{library.name} imports `{shown}` ({mangled}), which {verdict[1]}"))
    for hit in raw:
        found.append(Finding(file=library.name, line=1, rule="raw-syscall",
                             message=f"{library.name} contains a system-call instruction at {hit}: kernels "
                                     "must not talk to the OS directly"))
    return found


def _where(name: str, workspace: str | Path | None, library: Path) -> tuple[str, int]:
    """The first kernels/ file and line naming the symbol's last component, else the library."""
    if workspace is not None:
        short = re.split(r"::", name)[-1]
        word = re.compile(rf"\b{re.escape(short)}\b")
        root = Path(workspace)
        for p in sorted((root / "kernels").glob("*")):
            if p.is_file():
                for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                    if word.search(line):
                        return p.relative_to(root).as_posix(), i
    return library.name, 1
