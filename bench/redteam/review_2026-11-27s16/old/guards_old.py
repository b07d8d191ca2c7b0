"""Runtime guards that run inside the worker around every call of the candidate.

The dispatcher guard sees every ATen op the candidate's forward reaches, whatever the
Python spelling (`torch.relu`, `F.gelu` bound early, `x.softmax()`, `@`, `nn.Linear`,
`torch.ops.aten.*`) or C++ (`at::matmul` in a binding): the extension's own ops are
composite, so only the allocations, copies and views inside them reach the dispatcher.
Anything else is recorded before it raises, so a candidate that catches the error and
falls back is still caught.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

# allocation, initialisation, copies, views and metadata: what kernels need around them
ALLOWED_ATEN = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "scalar_tensor",
    "arange", "lift_fresh", "lift_fresh_copy", "resize_", "zero_", "fill_",
    "clone", "copy_", "_to_copy", "contiguous", "detach", "alias", "_local_scalar_dense",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "permute", "transpose",
    "t", "unsqueeze", "squeeze", "select", "slice", "split", "split_with_sizes", "unbind", "narrow",
    "chunk", "flatten", "unflatten", "view_as", "expand_as", "movedim", "unfold",
    "is_contiguous", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride",
})


class GuardViolation(RuntimeError):
    pass


class ComputeGuard(TorchDispatchMode):
    """Blocks torch compute while active; remembers every violation."""

    def __init__(self) -> None:
        super().__init__()
        self.violations: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func.overloadpacket.__name__
        if name not in ALLOWED_ATEN:
            self.violations.append(f"aten.{name}")
            raise GuardViolation(f"torch compute at runtime: aten.{name}")
        return func(*args, **(kwargs or {}))


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run under a fresh ComputeGuard; raises GuardViolation on any torch compute, even
    if the candidate swallowed the first error, or if it removed the guard."""

    def call(*args: Any) -> Any:
        guard = ComputeGuard()
        with guard:
            out = fn(*args)
            still_on = _get_current_dispatch_mode() is guard
        if guard.violations:
            ops = ", ".join(sorted(set(guard.violations)))
            raise GuardViolation(f"torch compute at runtime: {ops} (ModelNew.forward may only call the "
                                 "extension's ops, allocate, copy and take views)")
        if not still_on:
            raise GuardViolation("the runtime guard was removed while the candidate ran")
        return out

    return call


def inputs_changed(before: list[Any], after: list[Any]) -> str | None:
    """Which argument the call modified, compared with what it should look like (a slab at a
    time: a 6 GiB input must not cost the judge three more of temporaries)."""
    from .verify import _slabs

    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor):
            if b.shape != a.shape or b.dtype != a.dtype:
                return f"argument {i}"
            for bb, aa in _slabs(b, a):
                same = torch.equal(bb, aa) if not bb.dtype.is_floating_point else bool(
                    torch.allclose(bb, aa, atol=1e-5, rtol=1e-5, equal_nan=True))
                if not same:
                    return f"argument {i}"
    return None
