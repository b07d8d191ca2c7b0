"""`audit()`: re-run every filter on an existing data set and say what fails and why.

Why: an independent audit of the released Ops-6K kept only 66% of its rows. Every row lists
every check it fails (early exit off); rows are appended to a JSONL file, and a rerun resumes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import FilterConfig
from .filters import Reason, TaskCheck
from .similarity import SimilarityError, fingerprint
from ..storage import JsonlWriter, read_jsonl


@dataclass
class AuditSummary:
    rows: int = 0
    passed: int = 0
    failed_by_reason: Counter[str] = field(default_factory=Counter)
    failed_by_filter: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    out: str = ""
    dataset_rows: int = 0  # rows in the data set; more than `rows` when a sample or a limit was audited
    sample_seed: int | None = None  # the seed of `sample_rows`, when the rows audited were a random sample
    rows_failing_filter: Counter[str] = field(default_factory=Counter)  # rows, not failures: a row counts once

    @property
    def pass_rate_by_filter(self) -> dict[str, float]:
        """Share of the rows audited that pass each filter that some row failed (comparable across sets)."""
        return {k: round(1 - v / self.rows, 4) for k, v in self.rows_failing_filter.most_common()} if self.rows else {}

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "passed": self.passed, "failed": self.rows - self.passed,
                "pass_rate": round(self.passed / self.rows, 4) if self.rows else 0.0,
                "dataset_rows": self.dataset_rows, "sample_seed": self.sample_seed,
                "pass_rate_by_filter": self.pass_rate_by_filter,
                "failed_by_reason": dict(self.failed_by_reason.most_common()),
                "failed_by_filter": dict(self.failed_by_filter.most_common()),
                "seconds": round(self.seconds, 1), "out": self.out}


def sample_rows(tasks: list[Any], n: int, seed: int = 0) -> list[Any]:
    """`n` rows drawn at random under `seed`, kept in data-set order: the same rows for the same
    file, seed and n, so two data sets' samples (e.g. 200 of each) are drawn alike."""
    import random

    if n >= len(tasks):
        return list(tasks)
    keep = sorted(random.Random(seed).sample(range(len(tasks)), n))
    return [tasks[i] for i in keep]


def audit(dataset: str | Path, out: str | Path, *, backend: str | None = None, filters: FilterConfig | None = None,
          eval_sets: list[str] | None = None, similarity_threshold: float = 0.9, workers: int = 1,
          timeout_s: float = 300.0, limit: int | None = None, devices: list[int] | None = None,
          sample: int | None = None, seed: int = 0,
          progress: Callable[[int, int, dict[str, Any]], None] | None = None) -> AuditSummary:
    """Audit `dataset`, appending one JSON line per row to `out`; returns the totals. `limit`
    audits the first rows, `sample` a seeded random sample (`sample_rows`); the totals count only
    the rows chosen, so a rerun with another choice reuses the rows already audited."""
    from ..backends import default_backend_name
    from ..tasks import load_tasks

    if limit and sample:
        raise ValueError("give a limit (the first rows) or a sample (random rows), not both")
    t0 = time.time()
    backend = backend or default_backend_name()
    cfg = (filters or FilterConfig()).model_copy(update={"early_exit": False})
    loaded = load_tasks(str(dataset), on_error="skip")
    tasks = list(loaded)[:limit] if limit else list(loaded)
    tasks = sample_rows(tasks, sample, seed) if sample else tasks
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from .data_worker import run_jobs
    from .synth import device_of, failed_check, filters_by_device, start_worker

    by_device = filters_by_device(cfg, workers, devices, out.with_suffix(".timing.lock"))
    done = {r["name"]: r for r in read_jsonl(out)}  # a torn line: that row is audited again
    rows: dict[str, dict[str, Any]] = {}
    for err in loaded.rejected:  # rows the loaders could not even read
        rows[err.origin] = {"name": err.origin, "origin": err.origin, "ok": False,
                            "failures": [{"filter": "load", "reason": Reason.LOAD_ERROR, "detail": err.problem}]}
    nearest: dict[str, dict[str, Any]] = {}
    screens = _screen(tasks, eval_sets or [], similarity_threshold, nearest)
    lock = threading.Lock()
    summary = AuditSummary(out=str(out), dataset_rows=len(loaded) + len(loaded.rejected),
                           sample_seed=seed if sample else None)
    writer = JsonlWriter(out)  # one writer: a torn last line from a killed audit is cut before it appends
    for name, row in list(rows.items()):
        if name not in done:
            writer.append(row)
            done[name] = row
    total = len(tasks) + len(loaded.rejected)

    def record(row: dict[str, Any]) -> None:
        with lock:
            writer.append(row)
            done[row["name"]] = row
            if progress:
                progress(len(done), total, row)

    crowded: list[Any] = []  # rows that ran out of device memory beside other workers' rows

    def check(slot: int, worker: Any, task: Any, alone: bool = False) -> None:
        from .data_worker import WorkerDied, WorkerError

        filters = by_device[device_of(slot, devices)].model_dump(mode="json")
        try:
            reply = worker.request({"op": "check", "source": task.source, "filters": filters}, timeout_s)
            result = TaskCheck.model_validate(reply["check"])
        except (WorkerDied, WorkerError) as exc:
            result = failed_check(exc)
        if not alone and workers > len(devices or [None]) and out_of_device_memory(result):
            with lock:
                crowded.append(task)
            return
        record(_row(task, result, screens.get(task.name, []), nearest.get(task.name, {})))

    todo = [t for t in tasks if t.name not in done]
    run_jobs(todo, workers, lambda slot: start_worker(backend, workers, device_of(slot, devices)), check)
    # each again with its device to itself: twelve workers a GPU running whole rows at once filled
    # 80 GB, and 65% of a 200-row sample failed for it (issue 30, two H100s); a row's own need is its verdict
    alone = len(devices or [None])
    run_jobs(crowded, alone, lambda slot: start_worker(backend, alone, device_of(slot, devices)),
             lambda slot, worker, task: check(slot, worker, task, alone=True))
    writer.close()
    chosen = {t.name for t in tasks} | {e.origin for e in loaded.rejected}
    for row in done.values():
        if row["name"] not in chosen:
            continue  # audited by an earlier run over other rows of the same file
        summary.rows += 1
        if row["ok"]:
            summary.passed += 1
        for f in row["failures"]:
            summary.failed_by_reason[f["reason"]] += 1
            summary.failed_by_filter[f["filter"]] += 1
        for name in {f["filter"] for f in row["failures"]}:
            summary.rows_failing_filter[name] += 1
    summary.seconds = time.time() - t0
    return summary


_OUT_OF_MEMORY = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUSOLVER_STATUS_ALLOC_FAILED",
                  "CUSOLVER_STATUS_INTERNAL_ERROR, when calling `cusolverDnCreate", "cudaErrorMemoryAllocation")


def out_of_device_memory(result: TaskCheck) -> bool:
    """Whether a row failed because the device had no memory left for it: torch's OOM, or a vendor
    library's handle that could not be made (cuBLAS, cuSOLVER need a workspace to start)."""
    if result.ok:
        return False
    texts = [result.detail or ""] + [f.detail or "" for f in result.filters if not f.ok]
    return any(marker in text for text in texts for marker in _OUT_OF_MEMORY)


def _screen(tasks: list[Any], eval_sets: list[str], threshold: float,
            nearest: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
    """Similarity failures per task: near-duplicates of an earlier row (AST, or the same canonical
    operator sequence), near-copies of / equivalents to eval tasks; `nearest` gets each row's
    nearest evaluation task."""
    from .canonical import canonical_form
    from .screen import AST_SIMILARITY, EvalSet, Kept

    found: dict[str, list[dict[str, str]]] = {}
    evals = EvalSet(eval_sets) if eval_sets else None
    kept = Kept()

    def fail(task: Any, check: str, reason: str, detail: str) -> None:
        found.setdefault(task.name, []).append({"filter": check, "reason": reason, "detail": detail})

    for task in tasks:
        form = canonical_form(task.source)
        first = kept.ops.first(form)
        if first is not None and first != task.name:
            fail(task, "duplicate", Reason.NEAR_DUPLICATE, f"same operators in the same order as {first}")
        kept.add(task.name, form=form)
        try:
            fp = fingerprint(task.source)
        except SimilarityError as exc:
            fail(task, "similarity", Reason.LOAD_ERROR, str(exc))
            continue
        if hit := kept.duplicate(fp, threshold):
            fail(task, "duplicate", Reason.NEAR_DUPLICATE, hit)
        else:
            kept.add(task.name, fp)
        if evals is not None:
            verdict = evals.screen(fp, form, threshold)
            if verdict.nearest is not None:
                nearest[task.name] = verdict.nearest.as_dict()
            if verdict.nearest is not None and verdict.nearest.verdict:
                fail(task, "contamination", Reason.EQUIVALENT_TO_EVAL,
                     f"{verdict.nearest.verdict}: {verdict.nearest.detail}")
            if AST_SIMILARITY in verdict.rules:
                fail(task, "contamination", Reason.SIMILAR_TO_EVAL, verdict.ast_detail)
    return found


def _row(task: Any, check: TaskCheck, screen: list[dict[str, str]], nearest: dict[str, Any]) -> dict[str, Any]:
    failures = [{"filter": f.name, "reason": f.reason, "detail": f.detail[:500]}
                for f in check.filters if not f.ok and f.reason != "skipped"]
    if not check.filters and not check.ok:  # the worker died or errored before any filter
        failures.append({"filter": "worker", "reason": check.reason, "detail": check.detail[:500]})
    failures += screen
    return {"name": task.name, "origin": task.origin, "ops": task.ops, "data_source": task.data_source,
            "ok": not failures, "failures": failures, "runtime_ms": check.runtime_ms,
            "device": check.device, "seconds": round(check.seconds, 3), "first_call_ms": check.first_call_ms,
            "warm_call_ms": check.warm_call_ms, "worker_task": check.worker_task, **nearest}
