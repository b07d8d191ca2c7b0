"""The one curated table: how to fill an argument the probe cannot guess, keyed by its name.

Why by name: a signature says an argument is required, not what a sensible value is, and such
conventions (`in_features` = the input's last size) are shared by hundreds of operators. Which
operators a hint fits is decided by probing; no operator is listed here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

Shape = tuple[int, ...]

NICE_WIDTHS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class Hint:
    """One way to fill an argument from the shape of the tensor the operator receives.

    kind:
      const      the value itself
      dim        a size of the input (value = axis)
      width      a free output width near a size of the input (value = axis)
      divisor    a divisor of a size of the input, preferring 8, 4, 2 (value = axis)
      last_dims  the input's trailing sizes (value = how many)
      half_last  half the last size (adaptive pooling targets)
      merge_last a reshape target that merges the last two sizes (batch left free as -1)
      swap_last  a permutation of all axes with the last two swapped
      operand    a second tensor; its shape is found by probing (see OPERAND_SHAPES)
      reuse      the input itself (self-attention's key and value)
    """

    kind: str
    value: Any = None

    def fill(self, shape: Shape, rng: random.Random) -> Any:
        rank = len(shape)
        if self.kind == "const":
            return self.value
        if self.kind in ("dim", "width", "divisor"):
            if rank == 0 or not -rank <= self.value < rank:
                raise HintMismatch(f"no axis {self.value} in shape {shape}")
            size = shape[self.value]
            if self.kind == "dim":
                return size
            if self.kind == "width":
                near = [w for w in NICE_WIDTHS if size // 2 <= w <= size * 2] or [size]
                return rng.choice(near)
            for d in (8, 4, 2, 1):
                if size % d == 0:
                    return d
        if self.kind == "last_dims":
            return list(shape[-self.value:])
        if self.kind == "half_last":
            return max(1, shape[-1] // 2)
        if self.kind == "merge_last":
            if rank < 2:
                raise HintMismatch("nothing to merge in a rank-1 input")
            return [-1, *shape[1:-2], shape[-2] * shape[-1]] if rank > 2 else [-1]
        if self.kind == "swap_last":
            if rank < 2:
                raise HintMismatch("nothing to swap in a rank-1 input")
            return [*range(rank - 2), rank - 1, rank - 2]
        raise HintMismatch(f"hint kind {self.kind!r} has no direct value")


class HintMismatch(ValueError):
    """The hint does not apply to this input (e.g. no such axis)."""


def const(v: Any) -> Hint:
    return Hint("const", v)


OPERAND = Hint("operand")
REUSE = Hint("reuse")

# Argument name -> candidate fillers, tried in order. Values follow KernelBench's habits
# (kernel 3, factor 2, normalisation over the last axis) so composed tasks look like its tasks.
ARG_HINTS: dict[str, tuple[Hint, ...]] = {
    # sizes that must agree with the input
    **dict.fromkeys(("in_features", "input_size", "hidden_size", "embed_dim", "d_model", "dim_model"),
                    (Hint("dim", -1),)),
    **dict.fromkeys(("in_channels", "num_features", "num_channels", "channels"), (Hint("dim", 1),)),
    "normalized_shape": (Hint("last_dims", 1),),
    # free widths
    "out_features": (Hint("width", -1),),
    "out_channels": (Hint("width", 1),),
    # divisors
    **dict.fromkeys(("num_groups", "groups"), (Hint("divisor", 1),)),
    **dict.fromkeys(("num_heads", "nhead"), (Hint("divisor", -1),)),
    # small structural constants
    **dict.fromkeys(("upscale_factor", "downscale_factor", "chunks", "sections", "split_size",
                     "split_size_or_sections", "k", "n", "repeats", "ord", "decimals"), (const(2),)),
    "kernel_size": (const(3), const(2)),
    "scale_factor": (const(2.0),),
    "output_size": (Hint("half_last"),),
    **dict.fromkeys(("output_ratio", "q", "lambd"), (const(0.5),)),
    "pad": (const([1, 1]),),
    "p": (const(2.0),),
    "diagonal": (const(0),),
    # axes
    "dim": (const(-1), const([-1])),
    **dict.fromkeys(("axis", "dim1", "source"), (const(-1),)),
    "dim0": (const(-2),),
    "destination": (const(0),),
    "dims": (Hint("swap_last"), const([-1])),
    "shape": (Hint("merge_last"),),
    "size": (Hint("merge_last"), const(2)),
    "shifts": (const(1),),
    # scalar thresholds and bounds
    "threshold": (const(0.1),),
    "value": (const(0.0), REUSE),
    "min": (const(-1.0),),
    **dict.fromkeys(("max", "margin"), (const(1.0),)),
    "exponent": (const(2.0), OPERAND),
    # second tensors
    **dict.fromkeys(("other", "target", "input2", "x2", "mat2", "vec", "vec2", "tensor1", "tensor2", "weight",
                     "end", "positive", "negative"), (OPERAND,)),
    **dict.fromkeys(("key", "tgt", "memory", "hx"), (REUSE,)),
}

# Second-operand shapes tried in order, as functions of the first input's shape. `same` makes
# an extra forward input; the others become parameters created in `__init__`.
OPERAND_SHAPES: dict[str, Any] = {
    "same": lambda s: tuple(s),
    "row": lambda s: (s[-1],),
    "square": lambda s: (s[-1], s[-1]),
    "transposed": lambda s: (*s[:-2], s[-1], s[-2]) if len(s) >= 2 else None,
}


def operand_scale(rule: str, shape: Shape) -> float:
    """Matrix operands are scaled by 1/sqrt(fan-in) so a chain of products stays finite."""
    return float(shape[-2]) ** -0.5 if rule in ("square", "transposed") and len(shape) >= 2 else 1.0


# Realistic input sizes per rank (KernelBench-like), the batch axis scaled to the time window.
# Names become the module-level constants of a composed task.
DIM_NAMES: dict[int, tuple[str, ...]] = {
    1: ("size",),
    2: ("batch_size", "features"),
    3: ("batch_size", "channels", "length"),
    4: ("batch_size", "channels", "height", "width"),
    5: ("batch_size", "channels", "depth", "height", "width"),
}
SIZE_MENU: dict[int, tuple[tuple[int, ...], ...]] = {
    1: ((65536,), (262144,), (1048576,)),
    2: ((512,), (1024,), (2048,), (4096,), (8192,)),
    3: ((16, 256), (32, 512), (64, 1024), (128, 256), (256, 128), (32, 2048)),
    4: ((3, 64, 64), (8, 64, 64), (16, 32, 32), (32, 32, 32), (64, 16, 16), (16, 128, 128), (3, 224, 224)),
    5: ((3, 16, 32, 32), (8, 16, 16, 16), (16, 8, 32, 32), (4, 32, 32, 32)),
}
# Small shapes the catalogue probes with: distinct sizes, channels divisible by 2, 4 and 8.
PROBE_SHAPES: dict[int, Shape] = {1: (48,), 2: (6, 16), 3: (2, 8, 12), 4: (2, 8, 6, 6), 5: (2, 4, 4, 4, 6)}
