"""Swish (x * sigmoid(x)): one elementwise pass, 4096 elements per program."""
import torch
import triton
import triton.language as tl


@triton.jit
def _swish_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=mask)


def swish(x):
    out = torch.empty_like(x)
    n = x.numel()
    block = 4096
    _swish_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=8)
    return out
