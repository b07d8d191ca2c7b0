"""Interleaved timing inside the worker, and the noise-aware 'faster' decision.

Why interleave: run-to-run drift (clocks, neighbours, thermals) moves medians of separate
runs by several percent, enough to call identical code 5% faster. Timing every model once
per round, in a shuffled order (a cyclic order makes one model always follow another, a
bias measured at 5-8% on H100) and on a rotating input set, with the device idle and the
cache flushed before each trial, makes the per-round ratios paired samples; the decision then asks whether the whole confidence interval of the median ratio
clears the margin, not whether one point estimate does.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Callable, Sequence

from ..backends import Backend
from .config import TimingConfig


def time_interleaved(
    backend: Backend,
    models: dict[str, Callable[..., Any]],
    input_sets: dict[str, Sequence[Sequence[Any]]],
    cfg: TimingConfig,
    check_round: Callable[[dict[str, Any]], None] | None = None,
    fresh_inputs: frozenset[str] = frozenset(),
    check_every: int = 8,
    checked_models: dict[str, Callable[..., Any]] | None = None,
    vary: Callable[[Sequence[Any], int], list[Any]] | None = None,
) -> dict[str, list[float]]:
    """Per-round times (ms) for each model. `input_sets[name][k]` is model `name`'s copy of
    input set k, so a model that mutates its inputs cannot disturb the others. Models in
    `fresh_inputs` get new tensor objects every trial (cloned outside the timed region), so
    caching by pointer does not pay; give every model the same treatment, since a fresh
    copy sits in cache where the device has none flushed (CPU); `check_round` sees every `check_every`-th round's
    outputs (and the last), so skipped or cached work is caught while being timed. On those
    check rounds the models in `checked_models` (e.g. the candidate under the runtime guard)
    replace the plain ones, and the round is not timed, so the guard's overhead never
    reaches a sample. `vary(set, round)` gives every round new input values (all models see
    the same ones), so caching by content fingerprint does not pay either."""
    names = list(models)
    n_sets = min(len(s) for s in input_sets.values())
    per_call = {n: _warm_up(backend, models[n], input_sets[n], cfg.warmup_ms) for n in names}
    round_ms = sum(per_call.values()) + 0.05 * len(names)
    rounds = int(cfg.budget_s * 1000 / max(round_ms, 1e-3))
    rounds = max(cfg.floor_trials, min(cfg.max_trials, max(rounds, cfg.min_trials)))
    if check_round is not None:
        rounds += rounds // check_every + 1  # check rounds are not timed: keep the timed count
    wall_cap = time.monotonic() + 4 * cfg.budget_s + 10 * round_ms / 1000
    samples: dict[str, list[float]] = {n: [] for n in names}
    order_rng = random.Random(len(names) * 7919 + rounds)
    for r in range(rounds):
        order = names[:]
        order_rng.shuffle(order)  # no model always follows another (a cyclic order does that)
        k = r % n_sets
        last = r + 1 == rounds or (r + 1 >= cfg.floor_trials and time.monotonic() > wall_cap)
        keep = check_round is not None and (r % check_every == 0 or last)
        outs: dict[str, Any] = {}
        varied = vary(input_sets[names[0]][k], r) if vary is not None else None
        for name in order:
            args = input_sets[name][k] if varied is None else varied
            if name in fresh_inputs or varied is not None:
                args = [a.clone() if hasattr(a, "clone") else a for a in args]
            backend.synchronize()  # every trial starts on an idle device: no backlog, no gaps
            backend.flush_cache()
            timer = backend.new_timer()
            timer.start()
            fn = (checked_models or {}).get(name, models[name]) if keep else models[name]
            out = fn(*args)
            timer.stop()
            backend.synchronize()
            if not keep:
                samples[name].append(timer.elapsed_ms())
            if keep:
                outs[name] = out
            del out
        if keep:
            check_round(outs)
        if last:
            break
    return samples


def time_host_clock(backend: Backend, models: dict[str, Callable[..., Any]],
                    input_sets: dict[str, Sequence[Sequence[Any]]], trials: int) -> dict[str, list[float]]:
    """Per-call times (ms) on the host clock around a full device synchronisation, with no
    launch cushion: everything the call caused (work on another stream, or still running
    when it returned) is inside. The cross-check for what the device timer may not see."""
    clock = time.perf_counter_ns
    names = list(models)
    n_sets = min(len(s) for s in input_sets.values())
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(trials):
        for name in (names if r % 2 == 0 else names[::-1]):
            args = [a.clone() if hasattr(a, "clone") else a for a in input_sets[name][r % n_sets]]
            backend.synchronize()
            backend.flush_cache(cushion=False)
            backend.synchronize()
            t0 = clock()
            result = models[name](*args)
            backend.synchronize()
            out[name].append((clock() - t0) / 1e6)
            del result
    return out


def _warm_up(backend: Backend, fn: Callable[..., Any], inputs: Sequence[Sequence[Any]], warmup_ms: float) -> float:
    """Run until warm; return the estimated per-call time in ms."""
    calls, t0 = 0, time.perf_counter()
    while True:
        fn(*inputs[calls % len(inputs)])
        calls += 1
        backend.synchronize()
        elapsed = (time.perf_counter() - t0) * 1000
        if calls >= 3 and elapsed >= warmup_ms:
            return elapsed / calls
        if calls >= 3 and elapsed / calls > warmup_ms:  # a slow model: three calls are enough
            return elapsed / calls


def median_interval(xs: Sequence[float], confidence: float) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (binomial order statistics)."""
    s = sorted(xs)
    n = len(s)
    if n < 3:
        return s[0], s[-1]
    alpha = 1 - confidence
    # largest j with P(Bin(n, 1/2) < j) <= alpha/2, computed in log space for large n
    cdf, j = 0.0, 0
    log_half_n = n * math.log(0.5)
    for i in range(n + 1):
        p = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
        if cdf + p > alpha / 2:
            break
        cdf += p
        j = i + 1
    lo = max(0, j - 1)
    hi = min(n - 1, n - j)
    return s[lo], s[hi]


def clearly_faster(ratios: Sequence[float], margin: float, confidence: float) -> bool:
    """True if even the upper confidence bound of the median time ratio (candidate / base)
    is below 1 - margin: faster by more than the margin, beyond the measured noise."""
    if not ratios:
        return False
    _, upper = median_interval(ratios, confidence)
    return upper < 1 - margin
