"""Discover, by running it on small tensors, what an operator accepts and how it behaves.

Runs inside the data worker: probing calls hundreds of operators with guessed arguments, and a
few crash, hang or touch global state. Nothing here names an operator.
"""

from __future__ import annotations

import itertools
import random
import time
import warnings
from typing import Any

from .catalogue import OpSpec, RankVariant, Verdict
from .hints import PROBE_SHAPES
from .ops import ArgChoice, Instance, Kind, Param, candidate_choices, first_tensor, instantiate, resolve, \
    same_values, signature_params

MAX_ATTEMPTS = 24  # argument fillings tried per rank


def probe_op(name: str, kind: Kind, library: str) -> OpSpec:
    """Probe one operator at every rank; never raises (a failure is the spec's `reason`)."""
    import torch

    t0 = time.perf_counter()
    spec = OpSpec(name=name, kind=kind, library=library)
    try:
        obj = resolve(name)
        ctor, call = signature_params(name, obj, kind)
    except Exception as exc:  # noqa: BLE001 - any import or signature failure is a verdict
        return spec.rejected(f"cannot read its signature: {_short(exc)}")
    torch.set_grad_enabled(False)
    torch.manual_seed(0)
    verdicts: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rank, shape in PROBE_SHAPES.items():
            try:
                variant, verdict = _probe_rank(name, obj, kind, ctor, call, rank, shape)
            except Exception as exc:  # noqa: BLE001 - whatever breaks, it is this rank's verdict
                variant, verdict = None, f"fails: {_short(exc)}"
            if variant is not None:
                spec.variants.append(variant)
            verdicts.append(verdict)
    spec.probe_ms = (time.perf_counter() - t0) * 1000
    return spec.finish(verdicts, has_parameters=_has_parameters(obj, kind, spec))


def _probe_rank(name: str, obj: Any, kind: Kind, ctor: list[Param], call: list[Param], rank: int,
                shape: tuple[int, ...]) -> tuple[RankVariant | None, str]:
    """The first filling that runs at this rank, with its measured behaviour, and a verdict."""
    last_error = "no argument filling runs"
    found: tuple[RankVariant | None, str] | None = None
    for choices in _fillings(ctor, call):
        for positive in (False, True):
            x = _input(shape, positive, seed=0)
            try:
                inst = instantiate(name, obj, kind, choices, shape, random.Random(0))
                out, index = first_tensor(inst(x.clone()))
            except Exception as exc:  # noqa: BLE001 - a failed filling is expected; try the next
                last_error = _short(exc)
                break
            if out is None:
                return None, "returns no tensor"
            if out.is_floating_point() and not bool(out.isfinite().all()):
                last_error = "non-finite output"  # try positive inputs next
                continue
            inst.out_index = index
            try:
                result = _measure(inst, choices, rank, shape, positive, out)
            except Exception as exc:  # noqa: BLE001 - e.g. fails in train mode only
                result = None, f"fails: while measuring: {_short(exc)}"
            # Keep looking when this filling is usable but poor, remembering it: a full reduction
            # to a scalar when an axis argument exists, or a module leaving a parameter unused
            # (RNN cells without `hx` never read `weight_hh`).
            poor = (out.dim() == 0 and rank > 1 and result[1] == Verdict.OK) or result[1] == Verdict.UNUSED_PARAMETER
            if poor:
                found = found or result
                break
            if found is not None and result[1] != Verdict.OK:
                break
            return result
    if found is not None:
        return found
    unfillable = [p.name for p in (*ctor, *call) if p.required and not candidate_choices(p, "call", False)]
    if unfillable:
        return None, f"no hint for required argument {unfillable[0]!r}"
    return None, f"fails: {last_error}"


def _fillings(ctor: list[Param], call: list[Param]) -> Any:
    """Argument fillings in order: required arguments only, then one optional hinted one too."""
    required = [candidate_choices(p, "ctor" if p in ctor else "call", False)
                for p in (*ctor, *call) if p.required]
    if any(not c for c in required):
        return
    base = list(itertools.islice(itertools.product(*required), MAX_ATTEMPTS))
    yield from (list(c) for c in base)
    optional = [p for p in (*ctor, *call) if not p.required]
    budget = MAX_ATTEMPTS
    for p in optional:
        for extra in candidate_choices(p, "ctor" if p in ctor else "call", True):
            for combo in base[:2]:
                budget -= 1
                if budget < 0:
                    return
                yield [*combo, extra]


def _measure(inst: Instance, choices: list[ArgChoice], rank: int, shape: tuple[int, ...], positive: bool,
             out: Any) -> tuple[RankVariant, str]:
    """Behaviour of a working filling; the verdict is 'ok' or why it is unusable."""
    import torch

    x = _input(shape, positive, seed=0)
    x_other = _input(shape, positive, seed=1)
    before = x.clone()
    out1 = _tensor(inst(x))
    variant = RankVariant(rank=rank, args=choices, out_rank=out.dim(), out_dtype=str(out.dtype).removeprefix("torch."),
                          out_index=inst.out_index, positive_input=positive,
                          preserves_shape=tuple(out.shape) == shape)
    if not torch.equal(x, before):
        return variant, Verdict.MUTATES_INPUT
    out_again = _tensor(inst(x.clone()))
    if out_again.shape != out1.shape or not same_values(out1, out_again):
        return variant, _stochastic_or_nondeterministic(inst, x)
    if _differs_by_seed(inst, x):
        return variant, Verdict.STOCHASTIC
    out2 = _tensor(inst(x_other))
    if out2.shape != out1.shape:
        return variant, Verdict.DATA_DEPENDENT_SHAPE
    if same_values(out1, out2):
        return variant, Verdict.INPUT_INSENSITIVE
    if out1.numel() > 1 and bool((out1 == out1.reshape(-1)[0]).all()):
        return variant, Verdict.CONSTANT
    if out1.shape == x.shape and out1.dtype == x.dtype and torch.allclose(out1, x, rtol=1e-4, atol=1e-5):
        return variant, Verdict.IDENTITY
    if inst.module is not None and _unused_parameter(inst, x, out1):
        return variant, Verdict.UNUSED_PARAMETER
    if out1.is_floating_point():
        variant.nonneg_output = bool(out1.min() >= 0) and bool(out2.min() >= 0)
    variant.elementwise = variant.preserves_shape and _elementwise(inst, x, out1)
    variant.numel_ratio = out1.numel() / x.numel()
    return variant, Verdict.OK


def _unused_parameter(inst: Instance, x: Any, out: Any) -> bool:
    """Some parameter of the module does not change the output when perturbed."""
    import torch

    for p in inst.module.parameters():
        saved = p.detach().clone()
        p.add_(torch.randn_like(p) + 0.5)
        same = same_values(_tensor(inst(x.clone())), out)
        p.copy_(saved)
        if same:
            return True
    return False


def _stochastic_or_nondeterministic(inst: Instance, x: Any) -> str:
    """Same input, different output: stochastic if reseeding makes it repeat, else nondeterministic."""
    import torch

    torch.manual_seed(3)
    a = _tensor(inst(x.clone()))
    torch.manual_seed(3)
    b = _tensor(inst(x.clone()))
    return Verdict.STOCHASTIC if a.shape == b.shape and same_values(a, b) else Verdict.NONDETERMINISTIC


def _differs_by_seed(inst: Instance, x: Any) -> bool:
    """Stochastic ops (dropout, rrelu) change with the RNG state; modules are tried in train mode too."""
    import torch

    modes = [False, True] if inst.module is not None else [False]
    for train in modes:
        if inst.module is not None:
            inst.module.train(train)
        outs = []
        for seed in (1, 2):
            torch.manual_seed(seed)
            outs.append(_tensor(inst(x.clone())))
        if inst.module is not None:
            inst.module.eval()
        if outs[0].shape != outs[1].shape or not same_values(outs[0], outs[1]):
            return True
    return False


def _elementwise(inst: Instance, x: Any, out: Any) -> bool:
    """Changing one input element changes no output element but that one, and at one of three
    positions at least does change it."""
    n = x.numel()
    changed_any = False
    for k in (n // 3, n // 2 + 1, n - 2):
        x2 = x.clone()
        x2.reshape(-1)[k] = x2.reshape(-1)[k].abs() + 0.5  # into the positive range: ReLU-like ops react
        changed = (_tensor(inst(x2)) != out).reshape(-1)
        if int(changed.sum()) > int(changed[k]):
            return False
        changed_any = changed_any or bool(changed[k])
    return changed_any


def _has_parameters(obj: Any, kind: Kind, spec: OpSpec) -> bool:
    if kind != "module" or not spec.variants:
        return False
    v = spec.variants[0]
    try:
        inst = instantiate(spec.name, obj, kind, v.args, PROBE_SHAPES[v.rank], random.Random(0))
    except Exception:  # noqa: BLE001
        return False
    return any(True for _ in inst.module.parameters())


def _input(shape: tuple[int, ...], positive: bool, seed: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed)
    if positive:
        return torch.rand(shape, generator=g) * 0.9 + 0.05
    return torch.randn(shape, generator=g)


def _tensor(out: Any) -> Any:
    t, _ = first_tensor(out)
    if t is None:
        raise TypeError("output is not a tensor")
    return t


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
