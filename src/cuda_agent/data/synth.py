"""`synthesize()`: generate an Ops-6K-style data set, resumably, with every reject explained.

Candidate i: plan (a pure function of seed and i) -> the worker composes it small -> the parent
screens similarity -> the worker sizes it and runs the filters -> the parent re-checks
near-duplicates against tasks accepted meanwhile and records it (docs/data.md, Pipeline).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import device_lock
from .canonical import canonical_form
from .catalogue import Catalogue, build_catalogue
from .config import FilterConfig, SynthConfig
from .filters import Reason, TaskCheck
from .plan import Plan, PlanError, Planner
from .screen import AST_SIMILARITY, EvalSet, Kept
from .similarity import SimilarityError, fingerprint
from .store import DatasetStore

MAX_WORKER_FAILURES = 25  # then the environment is broken (e.g. no device), not the candidates
ProgressFn = Callable[["SynthStats"], None]
Screen = tuple[tuple[str, str] | None, dict[str, Any]]


@dataclass
class SynthStats:
    """Running totals of a synthesis run (also its final summary)."""

    wanted: int
    accepted: int = 0
    candidates: int = 0
    resumed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.time)
    elapsed_s: float = 0.0

    @property
    def accepted_per_hour(self) -> float:
        return self.accepted / self.elapsed_s * 3600 if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        done = max(self.candidates, 1)
        return {"wanted": self.wanted, "accepted": self.accepted, "candidates": self.candidates,
                "resumed_candidates": self.resumed, "elapsed_s": round(self.elapsed_s, 1),
                "accepted_per_hour": round(self.accepted_per_hour, 1),
                "accept_rate": round(self.accepted / done, 4),
                "reject_rate_by_reason": {r: round(n / done, 4) for r, n in self.reasons.most_common()},
                "rejects_by_reason": dict(self.reasons.most_common())}


def synthesize(out_dir: str | Path, config: SynthConfig, *, catalogue: Catalogue | None = None,
               progress: ProgressFn | None = None, policy: Any = None) -> SynthStats:
    """Generate tasks into `out_dir` until `config.count` are accepted (or a limit is hit),
    resuming a run already there (same settings); holds `out_dir/.lock` against a second run.
    `policy` is needed only for `generator="llm"` (see llm.py)."""
    from ..isolation.processes import RunLock

    with RunLock(out_dir, "data run"):
        return _synthesize(out_dir, config, catalogue=catalogue, progress=progress, policy=policy)


def _synthesize(out_dir: str | Path, config: SynthConfig, *, catalogue: Catalogue | None = None,
                progress: ProgressFn | None = None, policy: Any = None) -> SynthStats:
    import torch

    from ..backends import default_backend_name

    backend = config.backend or default_backend_name()
    window = config.filters.window(backend)
    catalogue = catalogue or build_catalogue(include_transformers=config.compose.include_transformers)
    planner = Planner(catalogue, config.compose, window)
    versions = {"torch": torch.__version__, "catalogue": catalogue.key,
                "transformers": catalogue.transformers_version, "backend": backend}
    store = DatasetStore(out_dir, config, versions)
    evals = EvalSet(config.eval_sets, config.contamination_verdicts)
    kept = Kept()
    for row in store.tasks:
        kept.add(row["name"], row["code"], canonical_form(row["code"]))
    filters = filters_by_device(config.filters, config.workers, config.devices, Path(out_dir) / ".timing.lock")
    stats = SynthStats(wanted=config.count, accepted=len(store.tasks), resumed=len(store.candidates))
    for c in store.candidates:
        stats.candidates += 1
        if c.get("status") != "accepted":
            stats.reasons[c.get("reason", "unknown")] += 1
    done = store.done()
    lock = threading.Lock()
    parquet_lock = threading.Lock()
    deadline = time.time() + config.time_budget_s if config.time_budget_s else None
    t_start = time.time()
    prior_elapsed = max((float(c.get("elapsed_s", 0.0)) for c in store.candidates), default=0.0)

    def indices() -> Iterator[int]:  # run_jobs draws them one at a time
        i = 0
        while True:
            with lock:
                if stats.accepted >= config.count or (deadline and time.time() > deadline):
                    return
            while i in done:
                i += 1
            if config.max_candidates is not None and i >= config.max_candidates:
                return
            yield i
            i += 1

    def record(index: int, plan: Plan | None, check: TaskCheck, code: str | None, extra: dict[str, Any]) -> None:
        task_row = None
        with lock:
            form = canonical_form(code) if code is not None else None
            if check.ok and code is not None:
                dup = kept.duplicate(code, config.similarity_threshold) or (
                    kept.same_ops(form) if config.semantic_dedup else None)
                if dup:
                    check = check.model_copy(update={"ok": False, "reason": Reason.NEAR_DUPLICATE, "detail": dup})
            if check.ok and code is not None and plan is not None:  # in-flight ones past `count` are kept too
                name = f"synth-{config.seed}-{index:06d}"
                task_row = _task_row(name, index, plan, code, check, config, backend, extra)
                kept.add(name, code, form)
                stats.accepted += 1
            stats.candidates += 1
            if not check.ok:
                stats.reasons[check.reason or "unknown"] += 1
            stats.elapsed_s = prior_elapsed + time.time() - t_start
            candidate = {"index": index, "ops": plan.ops if plan else [], "data_source": plan.data_source if plan else "",
                         "status": "accepted" if task_row else "rejected", "reason": check.reason,
                         "detail": check.detail[:2000], "runtime_ms": check.runtime_ms, "code": code,
                         "first_call_ms": check.first_call_ms, "warm_call_ms": check.warm_call_ms,
                         "worker_task": check.worker_task,
                         "filters": [f.model_dump() for f in check.filters], "seconds": round(check.seconds, 3),
                         "elapsed_s": round(stats.elapsed_s, 2), **extra}
            rewrite = task_row is not None and stats.accepted % config.parquet_every == 0
        # the disk outside the run's lock (the store has its own): an fsync held under it held up
        # every other worker's screen and dispatch for as long as the disk took
        store.add_candidate(candidate, task_row)
        if rewrite and parquet_lock.acquire(blocking=False):  # one rewrite at a time; the last one is at the end
            try:
                store.write_parquet()
            finally:
                parquet_lock.release()
        if progress:
            progress(stats)

    def screen(code: str) -> Screen:
        """Similarity before execution: the rejection (reason, detail) if any, and the scores."""
        try:
            fp = fingerprint(code)
        except SimilarityError as exc:
            return (Reason.LOAD_ERROR, str(exc)), {}
        form = canonical_form(code)
        meta: dict[str, Any] = {"canonical_ops": list(form.ops) if form else None}
        verdict = evals.screen(fp, form, config.similarity_threshold)
        meta.update(verdict.meta())
        if verdict.flagged:
            reason = Reason.SIMILAR_TO_EVAL if verdict.rule == AST_SIMILARITY else Reason.EQUIVALENT_TO_EVAL
            return (reason, verdict.detail), meta
        if hit := kept.duplicate(fp, config.similarity_threshold, meta):
            return (Reason.NEAR_DUPLICATE, hit), meta
        if config.semantic_dedup:
            with lock:
                hit = kept.same_ops(form)
            if hit:
                return (Reason.NEAR_DUPLICATE, hit), meta
        return None, meta

    from .data_worker import run_jobs

    runner = _CandidateRunner(config, backend, filters, planner, screen, record, policy)
    run_jobs(indices(), config.workers, runner.start, runner.run)
    stats.elapsed_s = prior_elapsed + time.time() - t_start
    if runner.errors:
        raise RuntimeError(f"synthesis stopped: {runner.errors[0]}")
    store.write_parquet()
    summary = {**stats.as_dict(), "versions": versions, "catalogue": catalogue.summary() | {"stochastic": None}}
    (Path(out_dir) / "summary.json").write_text(json.dumps(summary, indent=1))
    return stats


class _CandidateRunner:
    """Runs candidates on the worker processes (`run_jobs` gives it one at a time per worker)."""

    def __init__(self, config: SynthConfig, backend: str, filters: dict[int | None, FilterConfig], planner: Planner,
                 screen: Callable[[str], Screen],
                 record: Callable[..., None], policy: Any):
        self.config, self.backend, self.filters, self.planner = config, backend, filters, planner
        self.screen, self.record, self.policy = screen, record, policy
        self.errors: list[str] = []
        self.worker_failures = 0  # consecutive candidates lost to the worker, not to a filter

    def start(self, slot: int) -> Any:
        return start_worker(self.backend, self.config.workers, device_of(slot, self.config.devices))

    def run(self, slot: int, worker: Any, index: int) -> bool:
        try:
            self._one(index, worker, self.filters[device_of(slot, self.config.devices)])
        except Exception as exc:  # noqa: BLE001 - a bug here must stop the run, loudly
            self.errors.append(f"candidate {index}: {type(exc).__name__}: {exc}")
            return False
        return True

    def _one(self, index: int, worker: Any, filters: FilterConfig) -> None:
        from .data_worker import WorkerDied, WorkerError

        try:
            plan = self.planner.plan(self.config.seed, index)
        except PlanError as exc:
            self.record(index, None, TaskCheck(ok=False, reason=Reason.COMPOSE_ERROR, detail=str(exc)), None, {})
            return
        code: str | None = None
        extra: dict[str, Any] = {}
        try:
            if self.config.generator == "llm":
                from .llm import llm_candidate

                check, code, extra = llm_candidate(plan, worker, self.policy, filters, self.screen,
                                                   self.config.candidate_timeout_s)
            else:
                check, code, extra = self._catalogue_candidate(plan, worker, filters)
        except (WorkerDied, WorkerError) as exc:
            check = failed_check(exc)
        lost = check.reason in (Reason.TIMEOUT, Reason.CRASHED) or (check.reason == Reason.RUNTIME_ERROR
                                                                     and not check.filters)
        self.worker_failures = self.worker_failures + 1 if lost else 0
        if self.worker_failures >= MAX_WORKER_FAILURES:
            raise RuntimeError(f"{MAX_WORKER_FAILURES} candidates in a row failed inside the worker itself "
                               f"(not in a filter); the last said: {check.detail[-600:]}")
        self.record(index, plan, check, code, extra)

    def _catalogue_candidate(self, plan: Plan, worker: Any,
                             filters: FilterConfig) -> tuple[TaskCheck, str | None, dict[str, Any]]:
        request = {"op": "synth", "plan": plan.model_dump(mode="json"),
                   "compose": self.config.compose.model_dump(mode="json"),
                   "filters": filters.model_dump(mode="json")}
        worker.requests += 1
        worker.send(request)
        reply = worker.receive(self.config.candidate_timeout_s)
        if reply["type"] == "result":  # composition failed
            return TaskCheck.model_validate(reply["check"]), None, {}
        rejected, meta = self.screen(reply["code"])
        if rejected is not None:
            worker.send("stop")
            return TaskCheck(ok=False, reason=rejected[0], detail=rejected[1]), reply["code"], meta
        worker.send("proceed")
        result = worker.receive(self.config.candidate_timeout_s)
        meta.update(sized_ms=result.get("sized_ms"), compose_s=result.get("compose_s"),
                    compose_phases=result.get("compose_phases"))
        return TaskCheck.model_validate(result["check"]), result.get("code"), meta


def device_of(slot: int, devices: list[int] | None) -> int | None:
    """The GPU worker `slot` runs on: spread round-robin over `devices` (None = the default one)."""
    return devices[slot % len(devices)] if devices else None


def start_worker(backend: str, workers: int, device: int | None) -> Any:
    """A data worker with its share of the cores, pinned to GPU `device` (as numbered in this
    process: `device_slots` maps it through an inherited CUDA_VISIBLE_DEVICES)."""
    from ..backends import PRIMARY_BACKEND
    from ..backends.devices import device_slots
    from .data_worker import DataWorker

    env = device_slots(PRIMARY_BACKEND, [device])[0].env if device is not None else None
    return DataWorker(backend, threads=max(1, (os.cpu_count() or 1) // workers), extra_env=env)


def failed_check(exc: Exception) -> TaskCheck:
    """The verdict on a task its worker lost: a timeout, a crash, or an error outside the filters."""
    from .data_worker import WorkerDied

    if isinstance(exc, WorkerDied):
        reason = Reason.TIMEOUT if "timed out" in exc.reason else Reason.CRASHED
        return TaskCheck(ok=False, reason=reason, detail=exc.reason)
    return TaskCheck(ok=False, reason=Reason.RUNTIME_ERROR, detail=exc.message)  # type: ignore[attr-defined]


def filters_by_device(filters: FilterConfig, workers: int, devices: list[int] | None,
                      lock: Path) -> dict[int | None, FilterConfig]:
    """One timing lock per device, for the workers sharing it (timings on one device never
    overlap; devices time independently)."""
    out: dict[int | None, FilterConfig] = {}
    for device in (devices or [None]):
        sharing = sum(1 for k in range(workers) if device_of(k, devices) == device)
        path = lock if device is None else lock.with_name(f"{lock.name}.{device}")
        out[device] = filters.model_copy(update={"gpu_lock": device_lock.create(path)}) if sharing > 1 else filters
    return out


def _task_row(name: str, index: int, plan: Plan, code: str, check: TaskCheck, config: SynthConfig, backend: str,
              extra: dict[str, Any]) -> dict[str, Any]:
    import torch

    return {
        "ops": repr(plan.ops), "data_source": plan.data_source, "code": code, "name": name, "candidate": index,
        "seed": config.seed, "generator": config.generator, "runtime_ms": check.runtime_ms, "device": check.device,
        "backend": backend, "input_shapes": json.dumps(check.input_shapes),
        "output_shapes": json.dumps(check.output_shapes),
        "filters": json.dumps([{"name": f.name, "ok": f.ok, "detail": f.detail} for f in check.filters]),
        "similarity_eval": extra.get("similarity_eval"), "similar_eval_task": extra.get("similar_eval_task"),
        "similarity_set": extra.get("similarity_set"), "torch_version": torch.__version__,
        "nearest_eval": extra.get("nearest_eval"), "eval_score": extra.get("eval_score"),
        "canonical_ops": json.dumps(extra.get("canonical_ops")), "first_call_ms": check.first_call_ms,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
