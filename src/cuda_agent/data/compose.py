"""Turn a plan into a task: run its operators on a real input (shapes are checked by running),
size the input so the eager runtime lands in the window, and render KernelBench-format source
in which every size and argument is the value the operators actually ran with.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .hints import DIM_NAMES, operand_scale
from .ops import Instance, first_tensor, instantiate, resolve
from .plan import Plan

RANK1_START = 1024  # smallest size tried for a rank-1 input (rank >= 2 start at batch 1)


class ComposeError(RuntimeError):
    """A plan that does not run as a chain (shape mismatch, non-finite values, too large)."""


@dataclass
class Realized:
    """A plan run at one input size: the instances, every shape, and the largest tensor."""

    plan: Plan
    dim0: int
    input_shape: tuple[int, ...]
    steps: list[Instance] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)  # output shape per step
    max_bytes: int = 0

    def run(self, x: Any) -> Any:
        for inst in self.steps:
            x = inst(x)
        return x


def input_shape(plan: Plan, dim0: int) -> tuple[int, ...]:
    return (dim0,) if plan.rank == 1 else (dim0, *plan.feature_dims)


def make_input(plan: Plan, shape: tuple[int, ...], device: Any) -> Any:
    import torch

    return torch.rand(shape, device=device) * 0.9 + 0.05 if plan.positive_input else torch.randn(shape, device=device)


def realize(plan: Plan, dim0: int, device: Any = "cpu", max_bytes: int | None = None) -> Realized:
    """Run the plan's operators in sequence on an input with first axis `dim0`."""
    import torch

    shape = input_shape(plan, dim0)
    real = Realized(plan=plan, dim0=dim0, input_shape=shape)
    x = make_input(plan, shape, device)
    real.max_bytes = x.numel() * x.element_size()
    with torch.no_grad():
        for j, step in enumerate(plan.steps):
            if max_bytes is not None:
                _check_size_on_meta(plan, j, tuple(x.shape), max_bytes)
            try:
                inst = instantiate(step.op, resolve(step.op), step.kind, step.args, tuple(x.shape), plan.rng(j),
                                   device, step.out_index)
                out, _ = first_tensor(inst(x))
            except Exception as exc:  # noqa: BLE001 - any failure means this plan does not compose
                raise ComposeError(f"step {j + 1} ({step.op}) on shape {tuple(x.shape)}: "
                                   f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            if out is None:
                raise ComposeError(f"step {j + 1} ({step.op}) returned no tensor")
            if out.is_floating_point() and not bool(out.isfinite().all()):
                raise ComposeError(f"step {j + 1} ({step.op}) produced non-finite values")
            real.steps.append(inst)
            real.shapes.append(tuple(out.shape))
            real.max_bytes = max(real.max_bytes, out.numel() * out.element_size())
            if max_bytes is not None and real.max_bytes > max_bytes:
                raise ComposeError(f"step {j + 1} ({step.op}) makes a tensor of {real.max_bytes / 2**20:.0f} MiB, "
                                   f"over the {max_bytes / 2**20:.0f} MiB cap")
            x = out
    return real


def _check_size_on_meta(plan: Plan, j: int, shape: tuple[int, ...], max_bytes: int) -> None:
    """Shape the step on the meta device first (no memory), so an operator whose output grows
    with the square of its input (diagflat, kron, outer) is refused before it allocates."""
    import torch

    step = plan.steps[j]
    try:
        inst = instantiate(step.op, resolve(step.op), step.kind, step.args, shape, plan.rng(j), "meta",
                           step.out_index)
        out, _ = first_tensor(inst(torch.empty(shape, device="meta")))
    except Exception:  # noqa: BLE001 - no meta kernel: the real run below decides
        return
    if out is not None and out.numel() * out.element_size() > max_bytes:
        raise ComposeError(f"step {j + 1} ({step.op}) would make a tensor of "
                           f"{out.numel() * out.element_size() / 2**20:.0f} MiB, over the {max_bytes / 2**20:.0f} MiB cap")


def size_plan(plan: Plan, device: Any, time_ms: Callable[[Realized], float], window: tuple[float, float],
              cap_bytes: int, max_steps: int,
              device_work: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
              ) -> tuple[Realized, float]:
    """Grow the first axis until the eager runtime reaches the plan's target: by the measured
    shortfall (runtime is flat while launch-bound, then linear), ×2 to ×16 a step, never past the
    memory cap. `device_work` wraps building each size, so a worker sharing the device can hold it
    off a timer. Returns the size closest (in log time) to the target in the window, else the last."""
    lo, hi = window
    dim0 = 1 if plan.rank > 1 else RANK1_START
    tried: list[tuple[float, Realized]] = []
    for _ in range(max_steps):
        with device_work():
            real = realize(plan, dim0, device, max_bytes=cap_bytes)
        ms = time_ms(real)
        tried.append((ms, real))
        if ms >= plan.target_ms:
            break
        factor = 2 ** min(4, max(1, math.ceil(math.log2(plan.target_ms / max(ms, 1e-4)))))
        grown = real.max_bytes * factor
        while factor > 1 and grown > cap_bytes:
            factor //= 2
            grown = real.max_bytes * factor
        if factor == 1:
            break
        dim0 *= factor
    if tried[-1][0] > hi and tried[-1][1].dim0 > 1 and len(tried) < max_steps + 2:
        with device_work():
            real = realize(plan, max(1, tried[-1][1].dim0 // 2), device, max_bytes=cap_bytes)
        tried.append((time_ms(real), real))
    inside = [(ms, r) for ms, r in tried if lo <= ms <= hi]
    if inside:
        return min(inside, key=lambda t: abs(math.log(t[0] / plan.target_ms)))[::-1]
    return tried[-1][1], tried[-1][0]


# ---- rendering ---------------------------------------------------------------------------------
class _Names:
    """Unique identifiers; the first use of a name keeps it, later ones get _2, _3..."""

    def __init__(self, reserved: tuple[str, ...] = ("x", "self", "torch", "nn", "F", "Model")) -> None:
        self.used = set(reserved)

    def take(self, name: str) -> str:
        name = re.sub(r"\W", "_", name) or "v"
        candidate, n = name, 2
        while candidate in self.used:
            candidate, n = f"{name}_{n}", n + 1
        self.used.add(candidate)
        return candidate


def render(real: Realized) -> str:
    """KernelBench-format source for a realized plan."""
    plan = real.plan
    names = _Names()
    constants: list[tuple[str, Any]] = []
    dims = []
    for dim_name, value in zip(DIM_NAMES[plan.rank], real.input_shape):
        dims.append(names.take(dim_name))
        constants.append((dims[-1], value))
    init_params: list[str] = []
    init_lines: list[str] = []
    forward_params = ["x"]
    inputs = [f"torch.{'rand' if plan.positive_input else 'randn'}({', '.join(dims)})"]
    body: list[str] = []
    imports: dict[str, None] = {}

    def shape_expr(shape: tuple[int, ...]) -> str:
        parts = [dims[0] if i == 0 and plan.rank > 1 and v == real.dim0 else repr(v) for i, v in enumerate(shape)]
        return ", ".join(parts)

    for step, inst in zip(plan.steps, real.steps):
        call_args: list[str] = []
        ctor_args: list[str] = []
        for choice in step.args:
            if choice.operand == "reuse":
                text = "x"
            elif choice.operand == "same":
                text = names.take(choice.name)
                forward_params.append(text)
                inputs.append(f"torch.randn({shape_expr(inst.operands[choice.name][1])})")
            elif choice.operand is not None:
                rule, op_shape = inst.operands[choice.name]
                attr = names.take(choice.name)
                shape_const = names.take(f"{attr}_shape")
                constants.append((shape_const, tuple(op_shape)))
                init_params.append(shape_const)
                scale = operand_scale(rule, op_shape)
                scaled = f" * {scale!r}" if scale != 1.0 else ""
                init_lines.append(f"self.{attr} = nn.Parameter(torch.randn({shape_const}){scaled})")
                text = f"self.{attr}"
            elif choice.where == "ctor":
                const = names.take(choice.name)
                constants.append((const, inst.values[choice.name]))
                init_params.append(const)
                text = const
            else:
                text = repr(inst.values[choice.name])
            arg = f"{choice.name}={text}" if choice.keyword else text
            (ctor_args if choice.where == "ctor" else call_args).append(arg)
        index = "" if step.out_index is None else f"[{step.out_index}]"
        callee, import_line = _callee(step.op, step.kind)
        if import_line:
            imports[import_line] = None
        if step.kind == "module":
            attr = names.take(_snake(step.op.rsplit(".", 1)[-1]))
            init_lines.append(f"self.{attr} = {callee}({', '.join(ctor_args)})")
            body.append(f"x = self.{attr}({', '.join(['x', *call_args])}){index}")
        elif step.kind == "method":
            body.append(f"x = x.{step.op.rsplit('.', 1)[-1]}({', '.join(call_args)}){index}")
        else:
            body.append(f"x = {callee}({', '.join(['x', *call_args])}){index}")
    uses_f = any("F." in line for line in body)
    header = ["import torch", "import torch.nn as nn", *(["import torch.nn.functional as F"] if uses_f else []),
              *imports]
    summary = " -> ".join(_short(s.op) for s in plan.steps)
    lines = [*header, "", "", "class Model(nn.Module):", f'    """{summary}."""', "",
             f"    def __init__(self{''.join(', ' + p for p in init_params)}):", "        super().__init__()"]
    lines += [f"        {line}" for line in init_lines]
    lines += ["", f"    def forward(self, {', '.join(forward_params)}):"]
    lines += [f"        {line}" for line in body]
    lines += ["        return x", "", ""]
    lines += [f"{name} = {value!r}" for name, value in constants]
    lines += ["", "", "def get_inputs():", f"    return [{', '.join(inputs)}]", "", "",
              "def get_init_inputs():", f"    return [{', '.join(init_params)}]", ""]
    return "\n".join(lines)


def _callee(op: str, kind: str) -> tuple[str, str | None]:
    """How the rendered code names the operator, and the import it needs (if any)."""
    if op.startswith("torch.nn.functional."):
        return "F." + op.removeprefix("torch.nn.functional."), None
    if op.startswith("torch.nn.") and kind == "module":
        return "nn." + op.removeprefix("torch.nn."), None
    if op.startswith("torch."):
        return op, None
    module, name = op.rsplit(".", 1)
    return name, f"from {module} import {name}"


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


def _short(op: str) -> str:
    return _callee(op, "module" if op.rsplit(".", 1)[-1][:1].isupper() else "function")[0]
