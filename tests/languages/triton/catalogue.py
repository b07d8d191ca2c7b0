"""The Triton attack catalogue, shared by the static tests (CPU) and the GPU run.

Each static attack is a kernels/*.py file that computes swish but falls back to torch, keeps
outputs across calls, leaves the current stream or writes its inputs in a way the source
shows; each names the rule that must catch it. Runtime attacks pass the static allowlist (or
run with it switched off) and must be caught by the judge.
"""

from __future__ import annotations

HEADER = '''import torch
import triton
import triton.language as tl


@triton.jit
def _swish_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=mask)

'''

HONEST = HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    n = x.numel()
    _swish_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
'''

# name -> (rule that must fire, kernels/swish.py text)
STATIC_ATTACKS: dict[str, tuple[str, str]] = {
    "torch fallback in the launcher": ("torch-compute", HEADER + '''
def swish(x):
    return x * torch.sigmoid(x)
'''),
    "torch.nn.functional imported": ("forbidden-import", "import torch.nn.functional as F\n" + HEADER + '''
def swish(x):
    return F.silu(x)
'''),
    "tensor method fallback": ("tensor-method-compute", HEADER + '''
def swish(x):
    return x.sigmoid().mul(x)
'''),
    "operator on tensors": ("tensor-arithmetic", HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    return out * 0 + x / (1 + (-x).exp())
'''),
    "matmul operator": ("matmul-operator", HEADER + '''
def swish(x, w):
    return x @ w
'''),
    "torch.ops.aten": ("torch-compute", HEADER + '''
def swish(x):
    return torch.ops.aten.silu(x)
'''),
    "getattr trick": ("dynamic-code", HEADER + '''
def swish(x):
    return getattr(torch, "si" + "lu")(x)
'''),
    "dunder reach": ("dynamic-code", HEADER + '''
def swish(x):
    return x.__class__.sigmoid(x)
'''),
    "numpy": ("forbidden-import", "import numpy as np\n" + HEADER + '''
def swish(x):
    return torch.empty_like(x)
'''),
    "triton.language from the host": ("triton-host-language", HEADER + '''
def swish(x):
    return tl.sigmoid(x)
'''),
    "stale output: module-level cache": ("mutable-state", "_CACHE = {}\n" + HEADER + '''
def swish(x):
    key = x.data_ptr()
    out = torch.empty_like(x)
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    _CACHE[key] = out
    return out
'''),
    "stale output: mutable default": ("mutable-state", HEADER + '''
def swish(x, _memo=[]):
    out = torch.empty_like(x)
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''),
    "stale output: function attribute": ("mutable-state", HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    swish.last = out
    return out
'''),
    "stale output: global": ("global-state", HEADER + '''
_LAST = None


def swish(x):
    global _LAST
    out = torch.empty_like(x)
    return out
'''),
    "stale output: lru_cache": ("output-caching", "import functools\n" + HEADER + '''
@functools.lru_cache
def swish(x):
    return torch.empty_like(x)
'''),
    "another stream": ("stream-creation", HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    s = torch.cuda.Stream()
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''),
    "another stream through triton.runtime": ("stream-creation", HEADER + '''
def swish(x):
    stream = triton.runtime.driver.active.get_current_stream()
    return torch.empty_like(x)
'''),
    "writing the input: copy_": ("tensor-method-compute", HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    x.copy_(out)
    return x
'''),
    "writing the input: item assignment": ("mutable-state", HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    x[0] = 0
    return out
'''),
    "indexing a tensor": ("tensor-indexing", HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    return out[x > 0]
'''),
    "silent fallback": ("silent-fallback", HEADER + '''
def swish(x):
    out = torch.empty_like(x)
    try:
        _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    except RuntimeError:
        out = torch.empty_like(x)
    return out
'''),
    "torch inside the kernel": ("triton-device-call", '''import torch
import triton
import triton.language as tl


@triton.jit
def _swish_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, torch.sigmoid(x))


def swish(x):
    out = torch.empty_like(x)
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''),
    "heuristics lambda computing on tensors": ("tensor-method-compute", '''import torch
import triton
import triton.language as tl


@triton.heuristics({"SCALE": lambda args: args["x_ptr"].sum()})
@triton.jit
def _swish_kernel(x_ptr, out_ptr, n, SCALE, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * tl.sigmoid(x))


def swish(x):
    out = torch.empty_like(x)
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''),
    "__import__": ("dynamic-code", HEADER + '''
def swish(x):
    return __import__("torch").sigmoid(x)
'''),
    "a prebuilt library beside the kernels": ("forbidden-import", None),
}

# Runtime attacks for the GPU run: (what the judge must say, kernels/swish.py, static checks on?)
RUNTIME_ATTACKS: dict[str, tuple[str, str, bool]] = {
    # passes the allowlist (allocation only): the judge reads an output nobody wrote
    "stale output: never written": ("incorrect", HEADER + '''
def swish(x):
    return torch.empty_like(x)
''', True),
    # passes the allowlist: the kernel writes its result over the input and returns the input
    "writing the inputs from the kernel": ("input", HEADER + '''
def swish(x):
    n = x.numel()
    _swish_kernel[(triton.cdiv(n, 1024),)](x, x, n, BLOCK=1024)
    return x
''', True),
    # allowlist switched off: the dispatcher guard and per-call comparisons must still hold
    "torch fallback, static checks off": ("torch", HEADER + '''
def swish(x):
    return x * torch.sigmoid(x)
''', False),
    "stale output cached by address, static checks off": ("incorrect", "_CACHE = {}\n" + HEADER + '''
def swish(x):
    key = x.data_ptr()
    if key in _CACHE:
        return _CACHE[key]
    out = torch.empty_like(x)
    _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    _CACHE[key] = out
    return out
''', False),
    "another stream, static checks off": ("stream", HEADER + '''
_SIDE = []


def swish(x):
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    out = torch.empty_like(x)
    with torch.cuda.stream(_SIDE[0]):
        _swish_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
''', False),
}
