"""The two stages of one task, shared by every executor (in-process, local pool, Ray).

The build stage (CPU workers) lays out the workspace, runs the static checks and the build; a
candidate that fails there is finished by `evaluate` before any worker or GPU is involved. The
device stage (one worker per GPU) plays the episode (policy runs) and `evaluate`s the workspace.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import traceback
from pathlib import Path

from ..backends import get_backend
from ..evaluation import EvalConfig, EvalResult, evaluate
from ..workspace import Workspace, create_workspace
from .policy import run_policy_episode
from .records import Job, TaskRecord
from .solutions import SINGLE_FILE_BINDING, SINGLE_FILE_BINDING_TEXT, reference_config, single_file_config

# Stages `evaluate` finishes in before it starts a worker process.
PRE_WORKER_STAGES = frozenset({"tamper", "guard", "build"})
log = logging.getLogger(__name__)
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def workspace_dirname(task_name: str) -> str:
    """A file-system-safe, collision-free folder name for a task."""
    slug = _SAFE.sub("_", task_name.replace("/", "__")).strip("._")[:80] or "task"
    return f"{slug}-{hashlib.sha256(task_name.encode()).hexdigest()[:8]}"


def materialize(job: Job, directory: Path) -> tuple[Workspace, EvalConfig]:
    """A fresh workspace for the job's task holding its candidate, and the EvalConfig that
    candidate's kind is evaluated with (see solutions.py)."""
    cache = Path(job.config.cache_dir) if job.config.cache_dir else None
    ws = create_workspace(job.task, directory, job.backend, cache_dir=cache, overwrite=True, rules=job.config.rules)
    kernels = ws.root / "kernels"
    for old in kernels.iterdir():
        if old.is_file() or old.is_symlink():
            old.unlink()
    cand = job.candidate
    cfg = job.config
    if cand is None or cand.mode == "policy":
        return ws, cfg
    if cand.mode == "reference":
        (ws.root / "model_new.py").write_text(reference_model_new(job.task.source))
        (ws.root / SINGLE_FILE_BINDING).write_text(SINGLE_FILE_BINDING_TEXT)
        return ws, reference_config(cfg)
    for rel, text in cand.files.items():
        (ws.root / _checked_relpath(rel)).write_text(text)
    if cand.mode == "single_file":
        be = get_backend(job.backend)
        cfg = single_file_config(cfg, ws.root, be.name, be.extension_name)
    return ws, cfg


def reference_model_new(task_source: str) -> str:
    """The reference as the candidate: the task's code unchanged, and ModelNew a subclass of
    Model that changes nothing (so `super(Model, self)` in the task still works)."""
    return (f"{task_source.rstrip()}\n\n\n# cuda-agent bench: the reference itself as the solution (harness check)\n"
            "class ModelNew(Model):\n    pass\n")


def build_stage(job: Job, directory: Path) -> TaskRecord | None:
    """CPU side. A finished record when the candidate fails before any worker would start;
    None when it built and needs the device stage."""
    if job.policy:
        return None  # the episode writes the candidate on the device side
    t0 = time.monotonic()
    try:
        ws, cfg = materialize(job, directory)
        if _prechecks_pass(ws, cfg, job.backend):
            return None
        result = evaluate(ws, cfg, checks_only=True)  # never the judge here: the device stage's slot owns the device
    except Exception as exc:  # an infrastructure fault here (never the candidate's doing): the
        log.warning("build stage of %s failed (%s); the device stage will build it", job.task.name, exc)
        return None  # device stage's own build decides, and records a harness error if it fails too
    if result.stage not in PRE_WORKER_STAGES:
        return None  # it built this time after all (e.g. a timeout under load): evaluate on a device
    return TaskRecord.for_job(job, result=result, wall_s=time.monotonic() - t0)


def device_stage(job: Job, directory: Path) -> TaskRecord:
    """Device side: the episode (policy runs), then the evaluation that counts."""
    t0 = time.monotonic()
    episode = None
    try:
        ws, cfg = materialize(job, directory)
        if job.policy:
            try:
                episode = run_policy_episode(job.policy, job.task, ws.root, job.backend, cfg, job.policy_options)
            except Exception as exc:
                return TaskRecord.for_job(job, status="episode_failed", reason=f"the episode raised: {_describe(exc)}",
                                          wall_s=time.monotonic() - t0)
        # the task's last evaluation in this run (not its episode's own): the judge forgets it once it has answered
        result: EvalResult = evaluate(ws, cfg.model_copy(update={"keep_task_warm": False}) if job.task_ends else cfg)
    except Exception as exc:
        return TaskRecord.for_job(job, status="harness_error", reason=f"device stage failed: {_describe(exc)}",
                                  wall_s=time.monotonic() - t0)
    return TaskRecord.for_job(job, result=result, episode=episode, wall_s=time.monotonic() - t0)


def _prechecks_pass(ws: Workspace, cfg: EvalConfig, backend_name: str) -> bool:
    """The static checks and the build, exactly as `evaluate` runs them first (the workspace's
    language decides both)."""
    from ..isolation.paths import default_cache_dir
    from ..languages import get_language

    backend = get_backend(backend_name)
    lang = get_language(ws.language)
    cache = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    if cfg.guards.static_checks and lang.check(ws.root, backend.name, cache_dir=cache,
                                               disabled_rules=frozenset(cfg.guards.disabled_rules), rules=cfg.rules):
        return False
    return lang.build(ws.root, backend, cache_dir=cache, timeout_s=cfg.build_timeout_s).ok


def _checked_relpath(rel: str) -> str:
    """Only model_new.py and flat kernels/ files: a solution cannot write elsewhere."""
    parts = rel.split("/")
    if rel == "model_new.py" or (len(parts) == 2 and parts[0] == "kernels" and parts[1]
                                 and parts[1] not in (".", "..") and not parts[1].startswith(".")):
        return rel
    raise ValueError(f"a solution may only hold model_new.py and kernels/<file>, not {rel!r}")


def _describe(exc: BaseException) -> str:
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
    return f"{type(exc).__name__}: {exc}\n{tail[-1500:]}"
