"""Operators by public name: resolving them, reading their arguments, and calling them with
arguments filled from `hints` for a given input shape.

Shared by the catalogue probe (which tries fillings until one works) and composition (which
replays the filling the probe recorded, at the task's real shapes).
"""

from __future__ import annotations

import importlib
import inspect
import random
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Callable, Literal

from pydantic import BaseModel

from .hints import ARG_HINTS, OPERAND_SHAPES, Hint, HintMismatch, Shape, operand_scale

Kind = Literal["module", "function", "method"]
Where = Literal["ctor", "call"]


class ArgChoice(BaseModel):
    """How one argument is filled: the hint candidate that worked, or an operand shape rule."""

    name: str
    where: Where
    keyword: bool = False  # optional arguments are passed by keyword, required ones by position
    hint: int = -1  # index into ARG_HINTS[name]; -1 = a tensor found from the signature's types
    operand: str | None = None  # OPERAND_SHAPES key, or "reuse" for the input itself


@dataclass(frozen=True)
class Param:
    name: str
    required: bool
    default: Any = None
    tensor: bool = False  # the schema says this argument is a Tensor


def resolve(name: str) -> Any:
    """`torch.nn.functional.gelu` -> the function; `torch.Tensor.view` -> the method."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot resolve {name!r}")


def signature_params(name: str, obj: Any, kind: Kind) -> tuple[list[Param], list[Param]]:
    """(constructor params, call params after the input). Why the override table: torch's
    builtins have no Python signature; `torch.overrides` keeps one for every public op."""
    if kind == "module":
        ctor = _params(inspect.signature(obj.__init__), skip=1, schema=None)
        call = _params(inspect.signature(obj.forward), skip=2, schema=None)
        return ctor, call
    sig = _override_signatures().get(obj)
    if sig is None:
        sig = inspect.signature(obj)
    return [], _params(sig, skip=1, schema=_schema_tensor_args(name))


def _params(sig: inspect.Signature, skip: int, schema: frozenset[str] | None) -> list[Param]:
    out = []
    for p in list(sig.parameters.values())[skip:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in ("out", "inplace", "_stacklevel"):
            continue
        required = p.default is inspect.Parameter.empty
        annotated = "Tensor" in str(p.annotation) and "Optional" not in str(p.annotation)
        tensor = annotated or (schema is not None and p.name in schema)
        out.append(Param(p.name, required, None if required else p.default, tensor))
    return out


@cache
def _override_signatures() -> dict[Any, inspect.Signature]:
    from torch.overrides import get_testing_overrides

    sigs = {}
    for fn, fake in get_testing_overrides().items():
        try:
            sigs[fn] = inspect.signature(fake)
        except (TypeError, ValueError):
            continue
    return sigs


def _schema_tensor_args(name: str) -> frozenset[str]:
    """Arguments typed `Tensor` in any ATen overload of this op (`self` is the input)."""
    import torch

    base = name.rsplit(".", 1)[-1]
    prefix = {"torch.special": "special_", "torch.linalg": "linalg_", "torch.fft": "fft_"}
    for ns, pre in prefix.items():
        if name.startswith(ns + "."):
            base = pre + base
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{base}")
    except RuntimeError:
        return frozenset()
    return frozenset(a.name for s in schemas for a in s.arguments if str(a.type) == "Tensor")


def candidate_choices(param: Param, where: Where, keyword: bool) -> list[ArgChoice]:
    """Every way the table (or the schema's types) offers to fill `param`."""
    hints = ARG_HINTS.get(param.name, ())
    out: list[ArgChoice] = []
    for i, hint in enumerate(hints):
        if hint.kind == "operand":
            out += [ArgChoice(name=param.name, where=where, keyword=keyword, hint=i, operand=r) for r in OPERAND_SHAPES]
        elif hint.kind == "reuse":
            out.append(ArgChoice(name=param.name, where=where, keyword=keyword, hint=i, operand="reuse"))
        else:
            out.append(ArgChoice(name=param.name, where=where, keyword=keyword, hint=i))
    if not hints and param.tensor:
        out += [ArgChoice(name=param.name, where=where, keyword=keyword, operand=r) for r in OPERAND_SHAPES]
    return out


# ---- calling an operator with filled arguments -------------------------------------------------
class _Reuse:
    """Marker: pass the operator's input again (self-attention's key)."""


REUSED = _Reuse()


@dataclass
class Instance:
    """One operator made callable for one input shape, remembering every value it was given."""

    name: str
    kind: Kind
    fn: Callable[..., Any]
    module: Any = None
    values: dict[str, Any] = field(default_factory=dict)  # filled non-tensor arguments
    operands: dict[str, tuple[str, Shape]] = field(default_factory=dict)  # name -> (rule, shape)
    call_pos: list[Any] = field(default_factory=list)
    call_kw: dict[str, Any] = field(default_factory=dict)
    out_index: int | None = None

    def __call__(self, x: Any) -> Any:
        pos = [x if v is REUSED else v for v in self.call_pos]
        kw = {k: (x if v is REUSED else v) for k, v in self.call_kw.items()}
        if self.kind == "module":
            out = self.module(x, *pos, **kw)
        elif self.kind == "method":
            out = getattr(x, self.name.rsplit(".", 1)[-1])(*pos, **kw)
        else:
            out = self.fn(x, *pos, **kw)
        if self.out_index is not None:
            out = out[self.out_index]
        return out


def instantiate(name: str, obj: Any, kind: Kind, choices: list[ArgChoice], shape: Shape,
                rng: random.Random, device: Any = "cpu", out_index: int | None = None) -> Instance:
    """Fill every chosen argument for an input of `shape` and construct the module, if any."""
    import torch

    inst = Instance(name=name, kind=kind, fn=obj, out_index=out_index)
    ctor_pos: list[Any] = []
    ctor_kw: dict[str, Any] = {}
    for choice in choices:
        if choice.operand == "reuse":
            value: Any = REUSED
        elif choice.operand is not None:
            op_shape = OPERAND_SHAPES[choice.operand](shape)
            if op_shape is None:
                raise HintMismatch(f"operand rule {choice.operand} does not fit shape {shape}")
            inst.operands[choice.name] = (choice.operand, tuple(op_shape))
            value = torch.randn(op_shape, device=device) * operand_scale(choice.operand, tuple(op_shape))
        else:
            hint: Hint = ARG_HINTS[choice.name][choice.hint]
            value = hint.fill(shape, rng)
            inst.values[choice.name] = value
        if choice.where == "ctor":
            (ctor_kw.__setitem__(choice.name, value) if choice.keyword else ctor_pos.append(value))
        else:
            (inst.call_kw.__setitem__(choice.name, value) if choice.keyword else inst.call_pos.append(value))
    if kind == "module":
        inst.module = obj(*ctor_pos, **ctor_kw).to(device).eval()
    return inst


def tensors(out: Any) -> list[Any]:
    """Every tensor in an output, nested lists, tuples and dicts included, in order."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in tensors(o)]
    return []


def same_values(a: Any, b: Any) -> bool:
    """Equal, NaNs in the same places counting as equal (a deterministic op may return NaN)."""
    import torch

    if not isinstance(a, torch.Tensor):
        return a == b
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or (
        (a.is_floating_point() or a.is_complex()) and torch.equal(a.isnan(), b.isnan())
        and torch.equal(a.nan_to_num(), b.nan_to_num())))


def first_tensor(out: Any) -> tuple[Any, int | None]:
    """The output itself if it is a tensor, else the first element of a tuple output."""
    import torch

    if isinstance(out, torch.Tensor):
        return out, None
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0], 0
    return None, None
