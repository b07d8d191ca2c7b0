"""Degenerate work: tasks that run, are finite and depend on their input, yet teach nothing.

Why a trace: the same degenerate chain has many spellings (`nn.Softmax()` then
`torch.special.softmax`), so the checks look at what forward actually calls, each call under its
canonical name (canonical.py). docs/data.md lists the reasons and their rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .canonical import canonical_name
from .ops import tensors

# Operators whose repetition is degenerate: idempotent (relu, abs, sort, norms) or collapsing
# (softmax of probabilities is nearly uniform).
REPEAT_DEGENERATE = frozenset("""relu relu6 hardtanh clamp abs sign sgn floor ceil round trunc softmax logsoftmax
softmin normalize layernorm rmsnorm groupnorm instancenorm batchnorm sort msort cummax cummin max min amax amin
hardsigmoid hardswish heaviside signbit isfinite isnan logical_not""".replace("_", "").split())
ATTENTION = frozenset({"sdpa", "multiheadattention"})
# Arithmetic steps are parts of composites (`variance + eps`): near-identity there is by design.
ARITHMETIC = frozenset({"add", "sub", "mul", "div", "pow", "neg", "floordiv", "remainder"})
# Target domains of losses that need one: (argument position of the target, domain)
LOSS_TARGETS: dict[str, tuple[int, str]] = {
    "multilabelsoftmarginloss": (1, "binary"), "bceloss": (1, "unit"), "bcewithlogitsloss": (1, "unit"),
    "hingeembeddingloss": (1, "sign"), "softmarginloss": (1, "sign"), "marginrankingloss": (2, "sign"),
    "cosineembeddingloss": (2, "sign"), "nllloss": (1, "index"), "multimarginloss": (1, "index"),
    "multilabelmarginloss": (1, "index"), "crossentropyloss": (1, "index_or_prob"), "kldivloss": (1, "prob"),
    "poissonnllloss": (1, "nonneg"), "ctcloss": (1, "index"),
}
OVERFLOW_ABS = 1e30
DOMAIN_GAIN_RATIO = 1e-2
CONSTANT_REL = 1e-3


@dataclass
class Step:
    op: str
    main_parent: int
    same_qk_2d: bool = False
    finding: tuple[str, str] | None = None


def trace_forward(model: Any, inputs: list[Any]) -> list[Step]:
    """Run forward once under a recording TorchFunctionMode; return the steps with findings."""
    import torch
    from torch.overrides import TorchFunctionMode

    steps: list[Step] = []
    producer: dict[int, int] = {}
    keep: list[Any] = []  # hold every traced tensor so ids are not reused during the call

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            ins = tensors(list(args)) + tensors(list(kwargs.values()))
            outs = tensors(out)
            name = canonical_name(getattr(func, "__name__", "") or "")
            keep.extend(outs)
            if not outs:
                return out
            first_in = producer.get(id(ins[0]), -1) if ins else -1
            if name is None:  # layout: the output stands for its input
                for t in outs:
                    producer.setdefault(id(t), first_in)
                return out
            step = Step(op=name, main_parent=first_in)
            if name in ATTENTION:
                q = kwargs.get("query", args[0] if len(args) > 0 else None)
                k = kwargs.get("key", args[1] if len(args) > 1 else None)
                step.same_qk_2d = q is not None and k is not None and (q is k or _same_tensor(q, k)) and q.dim() == 2
            try:
                step.finding = _judge_step(name, func, args, kwargs, ins, outs[0], steps, step)
            except Exception:  # noqa: BLE001 - a check must never crash the filter
                pass
            steps.append(step)
            for t in outs:
                producer[id(t)] = len(steps) - 1
            return out

    with torch.no_grad(), Recorder():
        model(*inputs)
    keep.clear()
    return steps


def findings(steps: list[Step], outputs: list[Any], atol: float, rtol: float) -> list[tuple[str, str]]:
    """Every problem found, as (reason, detail): the steps' own, then the final outputs'."""
    found = [s.finding for s in steps if s.finding is not None]
    for t in outputs:
        if not (t.is_floating_point() and t.numel() > 1):
            continue
        x = t.detach().double().flatten()
        mean, std = float(x.mean()), float(x.std())
        if std <= CONSTANT_REL * abs(mean):
            found.append(("near_constant", f"output std {std:.3g} is under {CONSTANT_REL:g} of its mean {mean:.3g}"))
            continue
        c = x.median()
        if bool(((x - c).abs() <= atol + rtol * c.abs()).all()):
            found.append(("near_constant", f"the constant {float(c):.4g} matches every output element within "
                                           f"atol {atol:g} / rtol {rtol:g} (output spread {std:.3g})"))
    return found


def _judge_step(name: str, func: Any, args: Any, kwargs: dict[str, Any], ins: list[Any], out: Any,
                steps: list[Step], step: Step) -> tuple[str, str] | None:
    import torch

    where = f"step {len(steps) + 1} ({name})"
    if step.same_qk_2d:
        return "self_attention", f"{where}: query and key are the same 2-D tensor"
    if name in LOSS_TARGETS:
        pos, domain = LOSS_TARGETS[name]
        target = kwargs.get("target", args[pos] if len(args) > pos else None)
        if isinstance(target, torch.Tensor) and not _in_domain(target, domain, kwargs):
            return "random_target", f"{where}: target is not {domain} ({_describe(target)})"
    if out.is_floating_point() or out.is_complex():
        finite = bool(out.isfinite().all())
        big = float(out.abs().max()) if out.numel() and finite else 0.0
        if not finite or big > OVERFLOW_ABS:
            return "overflow", f"{where}: output has {'non-finite values' if not finite else f'|x| up to {big:.3g}'}"
    parent = step.main_parent
    if parent >= 0 and steps[parent].op == name and name in REPEAT_DEGENERATE:
        return "redundant_op", f"{where} is applied to its own output"
    main = ins[0] if ins else None
    if main is None or not (main.is_floating_point() and out.is_floating_point()) or main.numel() < 2:
        return None
    if main.shape == out.shape and main.dtype == out.dtype and name not in ARITHMETIC:
        scale = float(main.abs().max())
        if torch.allclose(out, main, rtol=1e-4, atol=1e-6 * max(scale, 1e-30)):
            return "redundant_op", f"{where} returns its input unchanged"
    if parent >= 0:  # only ops fed by earlier ops can see a degenerate domain
        gain, ref_gain = _gains(func, args, kwargs, main, out)
        if ref_gain > 0 and gain < DOMAIN_GAIN_RATIO * ref_gain:
            return "degenerate_domain", (f"{where}: gain {gain:.3g} on its input vs {ref_gain:.3g} on a standard normal "
                                         f"input ({_describe(main)})")
    return None


def _gains(func: Any, args: Any, kwargs: dict[str, Any], main: Any, out: Any) -> tuple[float, float]:
    """Output spread / input spread, on the real input and on randn of the same shape."""
    import torch

    in_std = _spread(main)
    out_std = _spread(out)
    if in_std == 0:
        return 0.0, 1.0
    ref = torch.randn_like(main)
    new_args = list(args)
    for i, a in enumerate(new_args):
        if a is main:
            new_args[i] = ref
            break
    else:
        return out_std / in_std, 0.0
    with torch.random.fork_rng(devices=[main.device] if main.is_cuda else []):
        ref_out = func(*new_args, **kwargs)
    ref_t = ref_out if isinstance(ref_out, torch.Tensor) else next(
        (t for t in ref_out if isinstance(t, torch.Tensor)), None) if isinstance(ref_out, (tuple, list)) else None
    if ref_t is None or not ref_t.is_floating_point():
        return out_std / in_std, 0.0
    return out_std / in_std, _spread(ref_t) / _spread(ref)


def _spread(t: Any) -> float:
    """Robust spread (IQR / 1.349, the std of a normal): a few huge tails (erfcx of randn) must not
    make an op's standard-input gain look large. The std when over half the values are equal."""
    import torch

    x = t.detach()
    if x.is_complex():
        x = x.abs()
    if not x.is_floating_point() or x.numel() < 2:
        return 0.0
    x = x.double().flatten()
    x = x[x.isfinite()]
    if x.numel() > 1_000_000:
        x = x[:: x.numel() // 1_000_000 + 1]
    if x.numel() < 2:
        return 0.0
    q = torch.quantile(x, torch.tensor([0.25, 0.75], dtype=x.dtype, device=x.device))
    iqr = float(q[1] - q[0])
    return iqr / 1.349 if iqr > 0 else float(x.std())


def _same_tensor(a: Any, b: Any) -> bool:
    import torch

    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.data_ptr() == b.data_ptr())


def _in_domain(target: Any, domain: str, kwargs: dict[str, Any]) -> bool:
    import torch

    t = target.detach()
    if domain == "index":
        return not t.is_floating_point()
    if domain == "index_or_prob":
        if not t.is_floating_point():
            return True
        return bool((t >= 0).all()) and bool(torch.allclose(t.sum(1 if t.dim() > 1 else 0),
                                                            torch.ones((), dtype=t.dtype, device=t.device), atol=1e-3))
    if domain == "binary":
        return bool(((t == 0) | (t == 1)).all())
    if domain == "sign":
        return bool(((t == -1) | (t == 1)).all())
    if domain == "unit":
        return bool(((t >= 0) & (t <= 1)).all())
    if domain == "prob":
        return bool(kwargs.get("log_target", False)) or bool((t >= 0).all())
    if domain == "nonneg":
        return bool((t >= 0).all())
    return True


def _describe(t: Any) -> str:
    x = t.detach()
    if x.is_complex():
        x = x.abs()
    if not x.is_floating_point():
        return f"{x.dtype}, shape {tuple(x.shape)}"
    x = x.double()
    return f"values {float(x.min()):.3g}..{float(x.max()):.3g}, mean {float(x.mean()):.3g}, std {_spread(x):.3g}"
