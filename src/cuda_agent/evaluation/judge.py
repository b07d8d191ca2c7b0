"""The judge (`python -m cuda_agent.evaluation.judge`): one trusted process per device, kept warm.

It never loads candidate code: no `model_new.py`, no candidate library. It makes the inputs,
runs the reference, times eager and `torch.compile`, keeps reference outputs on the device,
and decides the reward. The candidate runs in a sandboxed client process (candidate.py) that
maps the judge's input arena and says where its outputs are; the judge reads them from
outside that process and compares them on the device, for every call, verified or timed.

Timing is the judge's own clock around a batch of calls, the same way for every model: for
eager and compile around the judge's own calls, for the candidate from the command it sends
to the answer it gets plus a device-idle probe (work the candidate left running shows as a
slow probe, and is inside the interval). While the judge times its own models the candidate
is frozen (SIGSTOP), and its CPU time is read from /proc around every interval.

Requests and answers are JSON lines on the judge's own pipes, which no candidate holds.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

IDLE_PROBE_SLACK_MS = 0.5   # a probe this much slower than its calibration: the device was busy
IDLE_VIOLATIONS = 3         # ... on this many intervals: work left running on the device
CPU_IDLE_ALLOWANCE_MS = 5.0  # candidate CPU while frozen / between its calls, per interval
SPARES = 2  # warm client processes: the baselines' and the candidate's
PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class JudgeError(Exception):
    """The task itself (the trusted side) failed: not the candidate's fault."""


class Verdict(Exception):
    """Ends an evaluation with reward -1 at `stage` for `reason`."""

    def __init__(self, stage: str, reason: str, load_step: str | None = None):
        super().__init__(reason)
        self.stage, self.reason, self.load_step = stage, reason, load_step


# ---- the trusted side of a task, kept warm between evaluations --------------------------
@dataclass
class TaskState:
    key: str
    module: types.ModuleType
    reference: Any
    init_args: list[Any]
    trial_inputs: list[list[Any]]
    trial_refs: list[Any]
    inputs_after: list[list[Any] | None]  # where the reference mutates its inputs
    ref_varies: bool
    work: dict[str, float]
    eager_ms: float
    stacks: dict[int, Any] = field(default_factory=dict)


def module_from_source(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    sys.modules[name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def _clone(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in inputs]


def _cast(inputs: list[Any], dtype: Any) -> list[Any]:
    import torch

    if dtype is None:
        return inputs
    return [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _identical(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Judge:
    """Everything trusted about evaluations on one device."""

    def __init__(self, backend_name: str) -> None:
        import torch

        from ..backends import get_backend

        self.torch = torch
        self.backend = get_backend(backend_name)
        if not self.backend.is_available():
            raise JudgeError(f"backend {backend_name} is not available on this machine")
        self.device = torch.device(self.backend.torch_device)
        torch.empty(1, device=self.device)
        self.state: TaskState | None = None
        self.spares: list[Any] = []
        self._unit_cache: dict[int, tuple[Any, bool]] = {}  # fresh_inputs: stacked input id -> lies in [0, 1]
        self.probe_ms = self._calibrate_probe()

    # ---- the trusted phase -------------------------------------------------------------
    def task_state(self, req: dict[str, Any], cfg: Any) -> TaskState:
        """Reference, inputs and reference outputs for the request's task; reused while the
        same task (and seeds) comes back, so a warm re-evaluation skips all of it."""
        torch = self.torch
        from .guards import inputs_changed

        dtype = getattr(torch, PRECISIONS[req["precision"]]) if req.get("precision") else None
        key = json.dumps([req["task_hash"], cfg.seed, cfg.trials, req.get("precision")])
        if self.state is not None and self.state.key == key:
            return self.state
        self.state = None
        module = module_from_source("reference_task", req["task_source"])
        torch.manual_seed(cfg.seed)
        init_args = list(module.get_init_inputs())
        reference = module.Model(*init_args)
        if dtype is not None:
            reference = reference.to(dtype)
        reference = reference.to(self.device).eval()
        trial_inputs, refs, after = [], [], []
        with torch.no_grad():
            for seed in cfg.trial_seeds():
                torch.manual_seed(seed)
                with self.device:
                    inputs = list(module.get_inputs())
                inputs = _cast([x.to(self.device).contiguous() if isinstance(x, torch.Tensor) else x
                                for x in inputs], dtype)
                args = _clone(inputs)
                refs.append(reference(*args))
                self.backend.synchronize()
                after.append(args if inputs_changed(inputs, args) else None)
                trial_inputs.append(inputs)
            t0 = time.perf_counter()
            for _ in range(3):
                reference(*_clone(trial_inputs[0]))
            self.backend.synchronize()
        eager_ms = (time.perf_counter() - t0) * 1000 / 3
        varies = any(not _identical(refs[0], r) for r in refs[1:])
        self.state = TaskState(key=key, module=module, reference=reference, init_args=init_args,
                               trial_inputs=trial_inputs, trial_refs=refs, inputs_after=after,
                               ref_varies=varies, work=self._work_of(reference, trial_inputs[0]), eager_ms=eager_ms)
        return self.state

    def _work_of(self, reference: Any, inputs: list[Any]) -> dict[str, float]:
        """Least bytes any implementation must move and the flops the reference performs."""
        torch = self.torch
        from torch.utils.flop_counter import FlopCounterMode

        flops = 0
        try:
            counter = FlopCounterMode(display=False)
            with torch.no_grad(), counter:
                out = reference(*_clone(inputs))
            flops = int(counter.get_total_flops())
        except Exception:  # counting is best effort; bytes alone still bound the time
            with torch.no_grad():
                out = reference(*_clone(inputs))
        peaks = self.backend.peak_rates() or (0.0, 0.0)
        return {"bytes": float(_nbytes(torch, inputs) + _nbytes(torch, out)), "flops": float(flops),
                "peak_bytes_per_s": float(peaks[0]), "peak_flops": float(peaks[1])}

    def _calibrate_probe(self) -> float:
        """The idle probe's latency on an idle device (median of 30)."""
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            self.backend.idle_probe()
            times.append((time.perf_counter() - t0) * 1000)
        return median(times)

    # ---- one evaluation --------------------------------------------------------------------
    def evaluate(self, req: dict[str, Any]) -> dict[str, Any]:
        from .baselines import BaselineCache

        from .config import EvalConfig

        cfg = EvalConfig.model_validate(req["config"])
        out: dict[str, Any] = {"device": self.backend.device_name(), "phases": {}, "flags": [], "trials": []}
        clock = _PhaseClock(out["phases"])
        try:
            state = self.task_state(req, cfg)
        except Exception as exc:
            raise JudgeError(f"the reference task failed: {type(exc).__name__}: {exc}") from exc
        clock.mark("reference")
        cache = BaselineCache(Path(req["cache_dir"])) if req.get("cache_dir") else None
        cached = cache.get(req["baseline_key"]) if (cache and cfg.use_baseline_cache and cfg.measure) else None
        req["measure_compile"] = cfg.measure and cfg.compile_mode is not None and cached is None
        out["cached_baseline"] = cached.model_dump() if cached else None
        out["work"] = state.work
        if req.get("baselines_only"):
            req["measure_compile"] = cfg.compile_mode is not None
        base = cand = None
        try:
            if cfg.measure or req.get("baselines_only"):
                base = _CandidateSession(self, self._take_candidate(req), state, cfg, req, out, clock, role="baseline")
                base.start()
            if req.get("baselines_only"):
                out.update(self._time(state, cfg, base, None, clock))
                self._store_baseline(cache, req, out)
                return out
            cand = _CandidateSession(self, self._take_candidate(req), state, cfg, req, out, clock)
            cand.start()
            cand.verify()
            clock.mark("verify")
            out["correct"] = True
            if base is not None:
                self._measure(state, cfg, base, cand, out, clock)
                self._store_baseline(cache, req, out)
        except Verdict as v:
            out.update(stage=v.stage, reason=v.reason, correct=False, load_step=v.load_step)
        finally:
            if cand is not None:
                out["candidate_log"] = cand.link.log_tail()
            for session in (cand, base):
                if session is not None:
                    session.close()
            if cfg.prespawn_worker:
                self._spawn_spare(req)
        return out

    def _measure(self, state: TaskState, cfg: Any, base: "_CandidateSession", cand: "_CandidateSession",
                 out: dict[str, Any], clock: "_PhaseClock") -> None:
        """Timing, re-measured once when the candidate beats the speed of light; the device
        left busy by the candidate (after it answered, or while frozen) ends it with -1."""
        timing = self._time(state, cfg, base, cand, clock)
        bound = _speed_of_light_ms(state.work) / cfg.guards.peak_scale if cfg.guards.speed_of_light else 0.0
        if timing["samples"]["candidate"] and median(timing["samples"]["candidate"]) < bound:
            out["flags"].append(f"speed of light: {median(timing['samples']['candidate']):.4g} ms is below the "
                                f"{bound:.4g} ms the device's peak rates allow; re-measured")
            out["speed_of_light_ms"] = bound
            timing = self._time(state, cfg, base, cand, clock)
        out["samples"], out["batch"] = timing["samples"], timing["batch"]
        if cand.busy_while_frozen >= IDLE_VIOLATIONS:
            raise Verdict("guard", f"work left running on the device: on {cand.busy_while_frozen} of the baselines' "
                                   "timed intervals the device was busy while the candidate was frozen (it would "
                                   "slow the baselines)")
        if cand.busy_probes >= IDLE_VIOLATIONS:
            raise Verdict("guard", f"work left running on the device: on {cand.busy_probes} timed intervals the "
                                   "device was still busy after the candidate reported done")

    def _store_baseline(self, cache: Any, req: dict[str, Any], out: dict[str, Any]) -> None:
        """Only the judge writes baselines: measured here, never by a candidate's process."""
        from .baselines import Baseline
        from .records import TimingStats

        samples = out.get("samples") or {}
        if cache is not None and req.get("measure_compile") and samples.get("compile") and samples.get("eager"):
            cache.put(req["baseline_key"], Baseline(eager=TimingStats.of(samples["eager"]),
                                                    compile=TimingStats.of(samples["compile"])))

    def _take_candidate(self, req: dict[str, Any]) -> Any:
        from .candidate_link import CandidateLink

        wanted = _isolation(req)
        while self.spares:
            spare = self.spares.pop()
            if spare.alive() and (spare.isolate, spare.confine_writes) == wanted:
                return spare
            spare.close()
        return CandidateLink(self.backend.name, _candidate_env(), *wanted)

    def _spawn_spare(self, req: dict[str, Any]) -> None:
        from .candidate_link import CandidateLink

        self.spares = [sp for sp in self.spares if sp.alive()]
        while len(self.spares) < SPARES:
            self.spares.append(CandidateLink(self.backend.name, _candidate_env(), *_isolation(req)))

    # ---- timing ------------------------------------------------------------------------------
    def batch_size(self, state: TaskState, cfg: Any) -> int:
        """Calls per timed interval: enough that the interval is long next to the cost of
        talking to the candidate, few enough that every call's inputs and outputs fit."""
        per_set = sum(x.numel() * x.element_size() for x in state.trial_inputs[0] if isinstance(x, self.torch.Tensor))
        out_bytes = _nbytes(self.torch, state.trial_refs[0])
        # two arenas (baseline client, candidate), eager's outputs, the candidate's, their copies
        cap = cfg.timing.input_set_bytes // max(2 * per_set + 3 * out_bytes, 1)
        want = math.ceil(cfg.timing.interval_ms / max(state.eager_ms, 1e-3))
        return int(max(1, min(want, cap, cfg.timing.max_batch)))

    def input_stack(self, state: TaskState, m: int) -> list[Any]:
        """Per input position, the base values of m calls stacked (rotating the trial sets)."""
        if m not in state.stacks:
            torch = self.torch
            stacks = []
            for pos, x in enumerate(state.trial_inputs[0]):
                if isinstance(x, torch.Tensor):
                    stacks.append(torch.stack([state.trial_inputs[i % len(state.trial_inputs)][pos] for i in range(m)]))
                else:
                    stacks.append(x)
            state.stacks = {m: stacks}
        return state.stacks[m]

    def _unit_interval(self, x: Any) -> bool:
        """Whether a stacked input lies in [0, 1]; the stack is fixed per batch size, so this is
        decided once (two reductions and syncs), not every round."""
        import weakref

        hit = self._unit_cache.get(id(x))
        if hit is None or hit[0]() is not x:  # weak: a stack the task state dropped is not kept alive
            self._unit_cache = {k: v for k, v in self._unit_cache.items() if v[0]() is not None}
            hit = self._unit_cache[id(x)] = (weakref.ref(x), bool(x.min() >= 0) and bool(x.max() <= 1))
        return hit[1]

    def fresh_inputs(self, stack: list[Any], seed: int, vary: bool) -> list[Any]:
        """New values for every call of a round: floating inputs scaled elementwise by a factor
        in [0.8, 1.2] ([0.8, 1.0] for inputs that lie in [0, 1], e.g. probabilities), signs and
        zeros kept. 20% is far outside any tolerance, so an output cached from an earlier round
        is wrong; `seed` is drawn from os.urandom per evaluation, so the values cannot be
        predicted from inside the candidate."""
        torch = self.torch
        if not vary:
            return [x.clone() if isinstance(x, torch.Tensor) else x for x in stack]
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        out = []
        for x in stack:
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
                unit = self._unit_interval(x)
                scale = torch.rand(x.shape, generator=gen, device=self.device, dtype=torch.float32)
                scale = scale.mul_(0.2).add_(0.8) if unit else scale.mul_(0.4).add_(0.8)
                out.append((x.float() * scale).to(x.dtype))
            else:
                out.append(x.clone() if isinstance(x, torch.Tensor) else x)
        return out

    def _time(self, state: TaskState, cfg: Any, base: "_CandidateSession", cand: "_CandidateSession | None",
              clock: "_PhaseClock") -> dict[str, Any]:
        """Interleaved rounds of eager, torch.compile (both in the baseline client: the task's
        own code, trusted) and the candidate, each a timed batch through the same harness on the
        judge's clock; every candidate output compared with eager's for the same values.
        Returns {"samples": {model: per-call ms, one per round}, "batch": calls per interval}."""
        torch = self.torch
        m = base.m
        stack = self.input_stack(state, m)
        positions = [i for i, x in enumerate(stack) if isinstance(x, torch.Tensor)]
        names = ["eager"] + (["compile"] if base.compiles else []) + (["candidate"] if cand else [])
        owner = {"eager": base, "compile": base, "candidate": cand}
        warm = self.fresh_inputs(stack, cfg.seed, False)
        for name in names:  # warm up (outside any timed region): compile, caches, first calls
            owner[name].stage_inputs(warm, positions)
            spent, batches = 0.0, 0
            while batches < 2 or spent < cfg.timing.warmup_ms:
                spent += owner[name].timed_batch(m, name)
                batches += 1
        clock.mark("warmup")
        if cand is not None:  # what first calls did (compilation, lazy starts) is not held against it
            cand.busy_probes = cand.busy_while_frozen = 0
        round_ms = sum(owner[n].last_ms for n in names)
        rounds = int(cfg.timing.budget_s * 1000 / max(round_ms, 1e-3))
        rounds = max(cfg.timing.floor_trials, min(cfg.timing.max_trials, max(rounds, cfg.timing.min_trials)))
        wall_cap = time.monotonic() + 4 * cfg.timing.budget_s + 10 * round_ms / 1000
        samples: dict[str, list[float]] = {n: [] for n in names}
        rng = random.Random(rounds * 7919 + m)
        secret = int.from_bytes(os.urandom(6), "little")  # round values nobody can precompute
        for r in range(rounds):
            values = self.fresh_inputs(stack, secret + r, cfg.guards.fresh_values)
            order = names[:]
            rng.shuffle(order)
            eager_outs = None
            for name in order:
                session = owner[name]
                session.stage_inputs(values, positions)  # each interval starts from the round's values
                if cand is not None and session is base:
                    cand.before_own_interval()
                samples[name].append(session.timed_batch(m, name) / m)
                if cand is not None and session is base:
                    cand.after_own_interval()
                    if session.probe_slow:
                        cand.busy_while_frozen += 1
                if name == "eager":
                    eager_outs = session.pending
            if cand is not None:
                cand.check_round(eager_outs, r)
                cand.check_inputs_untouched(values, positions, r)
            if r + 1 >= cfg.timing.floor_trials and time.monotonic() > wall_cap:
                break
        clock.mark("time")
        return {"samples": samples, "batch": m}

    def probe_was_slow(self, ms: float) -> bool:
        return ms > self.probe_ms + IDLE_PROBE_SLACK_MS


class _PhaseClock:
    def __init__(self, phases: dict[str, float]) -> None:
        self.phases, self.last = phases, time.monotonic()

    def mark(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now


def _nbytes(torch: Any, obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(torch, o) for o in obj)
    if isinstance(obj, dict):
        return sum(_nbytes(torch, o) for o in obj.values())
    return 0


def _isolation(req: dict[str, Any]) -> tuple[bool, bool]:
    """What a client process is started with, and a spare must match: (namespaces, writes confined)."""
    return bool(req.get("namespaces")), bool(req.get("filesystem", True))


def _candidate_env() -> dict[str, str]:
    from ..isolation.processes import child_environment

    env = child_environment()
    # one allocator policy for both clients: freed memory is kept and reused (no trimming, no
    # threshold that moves with the heap's history), else whether a client's outputs fault in
    # fresh pages on every call depends on its heap layout: measured 44 vs 105 us for one op
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(1 << 40))
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 << 20))
    return env


# ---- the candidate side of one evaluation, seen from the judge -----------------------------
class _CandidateSession:
    """One client process seen from the judge: the candidate, or the baseline client that runs
    the task's own Model through the very same harness (so both pay the same process boundary)."""

    def __init__(self, judge: Judge, link: Any, state: TaskState, cfg: Any, req: dict[str, Any],
                 out: dict[str, Any], clock: _PhaseClock, role: str = "candidate") -> None:
        self.role = role
        self.compiles = role == "baseline" and bool(req.get("measure_compile"))
        self.probe_slow = False
        self.judge, self.link, self.state, self.cfg, self.req, self.out, self.clock = (
            judge, link, state, cfg, req, out, clock)
        self.torch = judge.torch
        self.tol = _tolerance(req, cfg)
        self.reader: Any = None
        self.arena: Any = None
        self.last_ms = 0.0
        self.busy_probes = 0
        self.busy_while_frozen = 0
        self.pending: list[Any] = []
        self.deadline = time.monotonic() + cfg.worker_timeout_s

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()  # unmap the candidate's memory while it still exists
        self.link.close()
        if self.arena is not None:
            self.arena.close()

    def limit(self, stage: str) -> float:
        if self.role == "baseline":  # trusted code (torch.compile's first call may take minutes)
            return self.deadline
        stage_s = getattr(self.cfg.timeouts, f"{stage}_s", self.cfg.worker_timeout_s)
        return min(time.monotonic() + stage_s, self.deadline)

    def receive(self, stage: str, started: float) -> dict[str, Any]:
        if self.role == "baseline":  # the task's own code failed: not the candidate's doing
            try:
                return self._receive(stage, started)
            except Verdict as v:
                raise JudgeError(f"the baseline client failed: {v.reason}") from None
        return self._receive(stage, started)

    def _receive(self, stage: str, started: float) -> dict[str, Any]:
        from .candidate_link import CandidateDied

        stage_s = getattr(self.cfg.timeouts, f"{stage}_s", self.cfg.worker_timeout_s)
        try:
            msg = self.link.receive(self.limit(stage), "")
        except CandidateDied as exc:
            if exc.reason:
                raise Verdict(stage if not exc.reason.startswith("forbidden") else "guard",
                              f"{stage} failed: {exc.reason}") from None
            waited = time.monotonic() - started
            limit = min(stage_s, self.cfg.worker_timeout_s)
            raise Verdict(stage, f"{stage} timed out: the candidate did not answer for {waited:.0f} s "
                                 f"(the {stage} stage's limit is {limit:.0f} s; the whole evaluation's "
                                 f"{self.cfg.worker_timeout_s:.0f} s)") from None
        if msg.get("type") == "error":
            st = str(msg.get("stage", stage))
            label = {"load": "failed to load the candidate", "verify": "the candidate raised",
                     "time": "the candidate failed while being timed", "guard": "forbidden"}.get(st, "candidate error")
            from .records import LOAD_STEPS

            step = msg.get("step") if st == "load" and msg.get("step") in LOAD_STEPS else None
            raise Verdict(st if st in ("load", "verify", "time", "guard") else "worker",
                          f"{label}: {str(msg.get('message', ''))[:3000]}", step)
        return msg

    # ---- start --------------------------------------------------------------------------------
    def start(self) -> None:
        """Lay out the arena, start the client, wait for it to load."""
        cfg = self.cfg
        self.m = self.judge.batch_size(self.state, cfg) if (cfg.measure or self.role == "baseline") else 1
        self.layout(self.m)
        started = time.monotonic()
        self.link.memory_limit = int(cfg.memory_limit_gb * 2**30)
        self.link.send({"type": "start", **self.start_request}, fds=self.arena.fds)
        msg = self.receive("load", started)
        if msg.get("type") != "ready":
            raise Verdict("worker", "the candidate process broke the protocol")
        if self.role == "candidate":
            self.out["sandbox"] = dict(msg.get("sandbox") or {}, namespaces=self.link.namespaces)
            if self.start_request.get("syscalls"):
                self.check_syscall_filter()
        self.reader = self.judge.backend.output_reader(self.link.pid())
        if cfg.guards.no_processes and self.role == "candidate":
            self.link.watch_processes()
        self.freeze()
        self.clock.mark("load")

    def freeze(self) -> None:
        if not self.link.freeze():
            raise Verdict("guard", "the candidate kept running after it was stopped: a thread or process of it "
                                   "escaped the freeze (it would work while the judge reads or times)")

    def check_still_frozen(self) -> None:
        """Nothing of the candidate ran since it was seen stopped (a stopped thread runs only if
        something resumed it: its outputs could change while the judge reads them)."""
        if self.role == "candidate" and not self.link.still_frozen():
            raise Verdict("guard", "the candidate ran while it was frozen: something resumed it (SIGCONT) "
                                   "after the judge had stopped it")

    def check_syscall_filter(self) -> None:
        """Corroborate from /proc that every thread of the loaded candidate runs under the
        syscall filter: a language that spawns compilers while loading has the strict filter
        stacked by the candidate process itself, after its code ran, so that is a claim."""
        from ..isolation.sandbox import seccomp_supported
        from ..languages import language_for_artifact

        if not seccomp_supported():
            return
        lang = language_for_artifact(self.req["library"]) if self.req.get("library") else None
        want = 2 if lang is not None and lang.spawns_while_loading else 1
        threads = self.link.syscall_filters()
        short = [tid for tid, mode, count in threads if mode != 2 or (count is not None and count < want)]
        if not threads or short:
            raise Verdict("guard", f"forbidden: syscall filter missing: {len(short) or 'all'} thread(s) of the "
                                   f"candidate process run without the {want} seccomp filter(s) it must have after "
                                   "loading (read from /proc)")

    def layout(self, m: int) -> None:
        """The arena: weights, init tensors, and m input slots (one per call of a batch)."""
        from ..backends.sharing import aligned, describe_tensor

        torch = self.torch
        state = self.state
        weights = dict(state.reference.state_dict())
        entries: list[tuple[str, Any]] = [(f"w:{k}", v) for k, v in weights.items()]
        entries += [(f"i:{j}", x) for j, x in enumerate(state.init_args) if isinstance(x, torch.Tensor)]
        base = state.trial_inputs[0]
        for s in range(m):
            entries += [(f"s:{s}:{p}", x) for p, x in enumerate(base) if isinstance(x, torch.Tensor)]
        offsets, total = {}, 0
        for name, t in entries:
            offsets[name] = total
            total += aligned(t.numel() * t.element_size())
        self.arena = self.judge.backend.make_arena(total)
        self.views: dict[str, Any] = {}
        specs: dict[str, Any] = {}
        for name, t in entries:
            view = _view(torch, self.arena.raw, offsets[name], t)
            self.views[name] = view
            specs[name] = {"offset": offsets[name], "layout": describe_tensor(view)}
            if not name.startswith("s:"):
                view.copy_(t)

        def arg(prefix: str, j: int, x: Any) -> dict[str, Any]:
            if isinstance(x, torch.Tensor):
                return specs[f"{prefix}{j}"]
            try:
                json.dumps(x)
            except (TypeError, ValueError):
                raise JudgeError(f"an input of type {type(x).__name__} cannot be given to the candidate") from None
            return {"value": x}

        self.start_request = {
            "workspace": self.req["workspace"], "library": self.req["library"], "extension": self.req["extension"],
            "reference_source": self.req["task_source"] if self.role == "baseline" else None,
            "compile_mode": self.cfg.compile_mode if self.compiles else None,
            "seed": self.cfg.seed, "dtype": PRECISIONS.get(self.req.get("precision") or ""), "arena": self.arena.describe(),
            "weights": {k[2:]: specs[k] for k, _ in entries if k.startswith("w:")},
            "init_args": [arg("i:", j, x) for j, x in enumerate(state.init_args)],
            "slots": [[arg(f"s:{s}:", p, x) for p, x in enumerate(base)] for s in range(m)],
            "limits": self.req.get("limits", {}), "address_space_limit": self.req.get("address_space_limit"),
            "filesystem": self.cfg.guards.filesystem,
            # the baseline client runs trusted code; torch.compile there starts the C++ compiler
            "syscalls": self.cfg.guards.syscalls and self.role == "candidate",
        }

    def slot(self, s: int) -> list[Any]:
        return [self.views.get(f"s:{s}:{p}") for p in range(len(self.state.trial_inputs[0]))]

    def put(self, s: int, inputs: list[Any]) -> None:
        for p, x in enumerate(inputs):
            view = self.views.get(f"s:{s}:{p}")
            if view is not None:
                view.copy_(x)

    # ---- correctness ----------------------------------------------------------------------------
    def call(self, slots: list[int], stage: str, guard: bool) -> list[Any]:
        """Run the candidate on `slots`; its outputs, read from outside its process."""
        started = time.monotonic()
        self.link.thaw()
        self.link.send({"type": "run", "slots": slots, "stage": stage, "guard": guard})
        msg = self.receive(stage, started)
        self.judge.backend.idle_probe()
        self.freeze()
        outs = self.collect(msg, len(slots), stage)
        self.check_still_frozen()
        self.release(stage)
        return outs

    def release(self, stage: str) -> None:
        """Let the candidate free the outputs the judge has copied, outside any timed interval
        (freeing hundreds of outputs takes milliseconds the judge's own models never pay)."""
        started = time.monotonic()
        self.link.thaw()
        self.link.send({"type": "release"})
        if self.receive(stage, started).get("type") != "released":
            raise Verdict("worker", "the candidate process broke the protocol")
        self.freeze()

    def collect(self, msg: dict[str, Any], n: int, stage: str) -> list[Any]:
        from ..backends.sharing import SharingError

        outs = msg.get("outputs")
        if msg.get("type") != "done" or not isinstance(outs, list) or len(outs) != n:
            raise Verdict("worker", "the candidate process broke the protocol")
        try:
            return [self.materialise(o) for o in outs]
        except (SharingError, KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise Verdict(stage, f"incorrect: the candidate's output could not be read: {exc}") from None

    def materialise(self, d: Any) -> Any:
        if not isinstance(d, dict):
            raise ValueError("malformed output description")
        if "tensor" in d:
            if d.get("device") != self.judge.device.type:
                raise ValueError(f"output on {d.get('device')!r}, expected {self.judge.device.type!r}")
            return self.reader.read(d["where"], d["tensor"]).to(self.judge.device)
        if "tuple" in d:
            return tuple(self.materialise(x) for x in d["tuple"])
        if "list" in d:
            return [self.materialise(x) for x in d["list"]]
        if "dict" in d:
            return {str(k): self.materialise(v) for k, v in d["dict"]}
        return d.get("value")

    def verify(self) -> None:
        from .records import TrialCheck
        from .verify import compare_outputs

        torch = self.torch
        state, cfg = self.state, self.cfg
        first: Any = None
        constant = True
        for i, inputs in enumerate(state.trial_inputs):
            self.put(0, inputs)
            self.judge.backend.synchronize()
            (got,) = self.call([0], "verify", cfg.guards.torch_compute)
            cmp = compare_outputs(state.trial_refs[i], got, self.tol)
            seed = cfg.trial_seeds()[i]
            self.out["trials"].append(TrialCheck(trial=i, seed=seed, ok=cmp.ok, message=cmp.message,
                                                 max_abs_diff=cmp.max_abs_diff).model_dump())
            if not cmp.ok:
                raise Verdict("verify", f"incorrect: trial {i} (seed {seed}): {cmp.message}")
            if cfg.guards.input_mutation:
                expected = state.inputs_after[i] or inputs
                from .guards import inputs_changed

                changed = inputs_changed(expected, self.slot(0))
                if changed:
                    raise Verdict("guard", f"input mutation: the candidate modified its inputs ({changed}) "
                                           "where the reference did not")
            if i == 0:  # already the judge's own copy: the readers copy out of the candidate's memory
                first = got
            else:
                constant = constant and _identical(first, got)
        if cfg.guards.constant_output and state.ref_varies and constant and cfg.trials > 1:
            raise Verdict("verify", "incorrect: constant output: the candidate returned the same output for every "
                                    "input while the reference's changed (it passed only through the tolerance)")
        del torch

    # ---- timing, seen from the judge ---------------------------------------------------------
    def stage_inputs(self, values: list[Any], positions: list[int]) -> None:
        for s in range(self.m):
            for p in positions:
                self.views[f"s:{s}:{p}"].copy_(values[p][s])
        self.judge.backend.synchronize()

    def before_own_interval(self) -> None:
        self.cpu_before = self.link.cpu_ns()

    def after_own_interval(self) -> None:
        """The candidate was frozen while the judge timed its own model: any CPU it used
        meanwhile is work hidden from its own intervals (or aimed at the baselines')."""
        self.check_still_frozen()
        used = (self.link.cpu_ns() - self.cpu_before) / 1e6
        if used > CPU_IDLE_ALLOWANCE_MS:
            raise Verdict("guard", f"work outside its timed calls: the candidate used {used:.1f} ms of CPU while "
                                   "it was frozen and the judge timed the baselines")

    def timed_batch(self, m: int, model: str = "candidate") -> float:
        """One timed interval of m candidate calls, on the judge's clock, ended by an idle
        probe: work the candidate left running on the device is inside, and counted."""
        self.judge.backend.flush_cache(cushion=False)
        self.judge.backend.synchronize()
        self.link.thaw()
        started = time.monotonic()
        t0 = time.perf_counter()
        self.link.send({"type": "run", "slots": list(range(m)), "stage": "time", "guard": False, "model": model})
        msg = self.receive("time", started)
        tp = time.perf_counter()
        self.judge.backend.idle_probe()
        t1 = time.perf_counter()
        self.freeze()
        self.probe_slow = self.judge.probe_was_slow((t1 - tp) * 1000)
        if self.probe_slow and self.role == "candidate":
            self.busy_probes += 1
        self.pending = self.collect(msg, m, "time")  # read while it is frozen
        self.check_still_frozen()
        self.release("time")
        self.last_ms = (t1 - t0) * 1000
        return self.last_ms

    def check_inputs_untouched(self, values: list[Any], positions: list[int], r: int) -> None:
        """While timed too: the candidate's input slots still hold the round's values (a
        kernel that writes its output into its input saves the allocation the baseline pays)."""
        if not self.cfg.guards.input_mutation or any(a is not None for a in self.state.inputs_after):
            return
        for p in positions:
            for s in range(self.m):
                if not bool(self.torch.equal(self.views[f"s:{s}:{p}"], values[p][s])):
                    raise Verdict("guard", f"input mutation while being timed (round {r}, call {s}, argument {p}): "
                                           "the candidate modified its inputs where the reference did not")

    def check_round(self, eager_outs: list[Any] | None, r: int) -> None:
        """Every timed call's output, compared with the reference's for the same values."""
        from .verify import compare_outputs

        if eager_outs is None:
            return
        torch = self.torch
        same = (all(isinstance(o, torch.Tensor) for o in eager_outs) and all(isinstance(o, torch.Tensor) for o in self.pending)
                and len({(o.shape, o.dtype) for o in [*eager_outs, *self.pending]}) == 1 and len(eager_outs) > 1)
        if same and compare_outputs(torch.stack(eager_outs), torch.stack(self.pending), self.tol).ok:
            self.pending = []
            return
        for i, (ref, got) in enumerate(zip(eager_outs, self.pending)):
            cmp = compare_outputs(ref, got, self.tol)
            if not cmp.ok:
                raise Verdict("guard", f"output produced while being timed is wrong (round {r}, call {i}: "
                                       f"{cmp.message}): cached or skipped work")
        self.pending = []


def _speed_of_light_ms(work: dict[str, float]) -> float:
    """The least time the task's bytes and flops need at the device's (generous) peak rates."""
    bw, fl = work.get("peak_bytes_per_s", 0.0), work.get("peak_flops", 0.0)
    t = max(work.get("bytes", 0.0) / bw if bw > 0 else 0.0, work.get("flops", 0.0) / fl if fl > 0 else 0.0)
    return t * 1000.0


def _view(torch: Any, raw: Any, offset: int, like: Any) -> Any:
    n = like.numel() * like.element_size()
    return raw[offset:offset + n].view(like.dtype).view(like.shape)


def _tolerance(req: dict[str, Any], cfg: Any) -> Any:
    from .verify import tolerance_for

    return tolerance_for(cfg.tolerance, req.get("precision"), req.get("atol"), req.get("rtol"), cfg.atol, cfg.rtol)


# ---- the process ---------------------------------------------------------------------------
def main() -> None:
    """Serve requests (JSON lines on fd argv[1]) with answers (JSON lines on fd argv[2])."""
    in_fd, out_fd, backend_name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    inp = os.fdopen(in_fd, "r")
    outp = os.fdopen(out_fd, "w")

    def answer(msg: dict[str, Any]) -> None:
        outp.write(json.dumps(msg) + "\n")
        outp.flush()

    try:
        judge = Judge(backend_name)
    except BaseException as exc:
        answer({"type": "fatal", "message": f"{type(exc).__name__}: {exc}"})
        return
    answer({"type": "ready", "device": judge.backend.device_name()})
    for line in inp:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            answer({"type": "result", **judge.evaluate(req)})
        except JudgeError as exc:
            answer({"type": "fault", "message": str(exc)})
        except Exception as exc:  # a bug on the trusted side: say so, keep serving
            import traceback

            answer({"type": "fault", "message": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]})
    for spare in judge.spares:
        spare.close()


if __name__ == "__main__":
    main()
