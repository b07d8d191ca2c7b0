"""What every language's checks and build return: a `Finding` (one rule broken, and where), the
rule ids a finding may carry (`RULES`; docs/guards.md, "Static rules", says each in prose), and a
`BuildResult` (the artifact, or the log that says why there is none)."""

from __future__ import annotations

import ast
from typing import Callable

from pydantic import BaseModel, Field


class Finding(BaseModel):
    """One rule violation: where, which rule, and what a person should know about it."""

    file: str
    line: int
    rule: str
    message: str


def python_findings(text: str, filename: str, check: Callable[[ast.AST], list[Finding]]) -> list[Finding]:
    """`check` run on `text`'s syntax tree. Code that does not parse, or nests deeper than the
    parser or a checker can recurse (a 1,000-term sum: issue 24, round 4), is a finding, never
    an exception out of the checks."""
    try:
        return check(ast.parse(text, filename=filename))
    except SyntaxError as e:
        return [Finding(file=filename, line=e.lineno or 1, rule="syntax-error", message=f"does not parse: {e.msg}")]
    except RecursionError:
        return [Finding(file=filename, line=1, rule="syntax-error",
                        message="nests too deeply to be checked (an expression or statement nested hundreds of levels)")]


RULES: dict[str, str] = {
    "syntax-error": "model_new.py does not parse, so it cannot be checked",
    "forbidden-import": "model_new.py imports a module outside the allow-list (or the reference)",
    "torch-compute": "model_new.py calls or binds torch compute: torch.*, F.*, aten, _C, nn compute modules",
    "tensor-method-compute": "model_new.py calls a computing tensor method such as .softmax() or .sum()",
    "matmul-operator": "model_new.py uses the @ operator",
    "tensor-arithmetic": "model_new.py applies arithmetic, comparisons or numeric builtins to tensors",
    "dynamic-code": "eval/exec/__import__, computed getattr, frame or namespace introspection",
    "io-access": "model_new.py opens files or reads input",
    "monkeypatch": "model_new.py assigns to, deletes or setattr()s attributes of imported modules",
    "global-state": "model_new.py uses global or nonlocal",
    "silent-fallback": "a try/except in runtime code whose handler does more than raise",
    "output-caching": "a memoising decorator on a function that takes tensors",
    "tensor-subclass": "a torch.Tensor subclass or a __torch_function__/__torch_dispatch__ override",
    "stream-creation": "creates or selects a stream other than the current one",
    "aten-compute-in-cpp": "at::/torch:: compute (functions, Tensor methods) in kernels/",
    "heavy-torch-include": "a torch header that pulls in the ATen compute API (and ~40 s per build)",
    "third-party-include": "an #include outside the standard library, CUDA's own headers and kernels/",
    "library-kernel": "Thrust or CUB device-wide algorithms: kernels nobody in the workspace wrote",
    "thread-creation": "creates threads or host callbacks (OpenMP is fine)",
    "process-creation": "fork/exec/system/popen from a kernel file",
    "io-in-kernel": "files, environment variables, sockets or dlopen from a kernel file",
    "l2-persistence": "L2 persistence windows or limits that keep data warm across timed calls",
    "op-registration": "registers torch ops or uses the dispatcher outside REGISTER_BINDING",
    "file-outside-workspace": "model_new.py or a kernels/ entry is a link to outside the workspace",
    "workspace-file": "a kernels/ entry that cannot be a source: a FIFO, device or socket, or over the size bounds",
    "extension-access": "model_new.py reaches past an extension op (`ext.op.x`, private names, the loader's globals)",
    "decorator": "a decorator outside the allow-list (staticmethod, property, torch.no_grad, functools.wraps, ...)",
    "class-definition": "a class whose bases or metaclass are outside the allow-list",
    "class-body": "a class body doing more than defining methods and assigning names, or defining dunder hooks",
    "module-body": "module-level code outside imports, definitions, assignments and the __main__ block",
    "blas-fallback": "a vendor math library (BLAS, MKL, cuBLAS, cuDNN, ...) instead of a written kernel",
    "dynamic-loading": "dlopen/dlsym, driver entry-point lookup or run-time code loading",
    "raw-syscall": "syscall() or a system-call instruction in kernels/ or the built library",
    "inline-asm": "host inline asm other than a compiler barrier (device PTX is fine)",
    "preprocess-bound": "a kernels/ unit whose preprocessing takes longer, or expands larger, than honest code's does",
    "symbol-not-allowed": "the built library imports a symbol outside the allow-list",
    "triton-host-language": "triton.language (tl.*) used in host code: it only means something inside @triton.jit",
    "triton-device-call": "a @triton.jit function calls or names something other than tl.*, libdevice or jit functions",
    "tensor-indexing": "a Triton launcher indexes or slices a tensor (torch compute on the host)",
    "mutable-state": "a Triton launcher keeps state across calls: attribute/item assignment, mutable defaults or globals",
}


def dedupe(found: list[Finding]) -> list[Finding]:
    """One finding per file, line and rule: the first says enough."""
    first: dict[tuple, Finding] = {}
    for f in found:
        first.setdefault((f.file, f.line, f.rule), f)
    return list(first.values())


class BuildResult(BaseModel):
    ok: bool
    library: str | None = Field(default=None, description="path of the linked extension")
    log: str = Field(default="", description="compiler output trimmed to what fixes the error")
    seconds: float = 0.0
    compiled_units: int = 0
    cached_units: int = 0
    timed_out: bool = False
