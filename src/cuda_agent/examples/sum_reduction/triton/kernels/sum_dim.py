"""Sum over one dimension (keepdim): the tensor seen as (outer, reduced, inner); each program
sums a strip of inner columns over the reduced dimension."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sum_kernel(x_ptr, out_ptr, n_reduce, n_inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    outer = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_mask = cols < n_inner
    acc = tl.zeros((BLOCK_I,), dtype=tl.float32)
    base = x_ptr + outer * n_reduce * n_inner
    for start in range(0, n_reduce, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < n_reduce) & col_mask[None, :]
        tile = tl.load(base + rows[:, None] * n_inner + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=0)
    tl.store(out_ptr + outer * n_inner + cols, acc, mask=col_mask)


def sum_dim(x, dim: int):
    d = dim % x.ndim
    shape = x.shape
    n_reduce = shape[d]
    n_outer = 1
    for i in range(d):
        n_outer = n_outer * shape[i]
    n_inner = x.numel() // (n_outer * n_reduce)
    out_shape = shape[:d] + (1,) + shape[d + 1:]
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    block_i = min(triton.next_power_of_2(n_inner), 128)
    grid = (n_outer, triton.cdiv(n_inner, block_i))
    _sum_kernel[grid](x, out, n_reduce, n_inner, BLOCK_R=32, BLOCK_I=block_i, num_warps=4)
    return out
