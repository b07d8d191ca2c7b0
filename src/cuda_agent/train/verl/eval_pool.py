"""Where verl's episode rewards are computed: on a shared pool of GPU workers (or a service, or in process).

Why a pool: the rollout GPUs serve the policy, so evaluations there would queue behind one
device and be timed under inference load. The pool ships the candidate's files (a few KB) to
Ray actors, one GPU each, on nodes declaring the `cuda_agent_eval` resource, and rebuilds the
workspace there. One pool per job, found by name, so verl's many agent-loop and reward workers
share it instead of each building its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...evaluation import EvalConfig, EvalResult, evaluate_files
from ...tasks import Task
from ...workspace import Workspace
from ..evaluator import Evaluator, LocalEvaluator, candidate_files


EVAL_RESOURCE = "cuda_agent_eval"
POOL_NAME = "cuda_agent_eval_pool"


def eval_pool_size(declared: float, pool_workers: int | None = None, resource_per_worker: float = 1.0) -> int:
    """Evaluation actors for the job: one per `resource_per_worker` declared units, capped by
    `pool_workers` (> 0). None declared is an error, not a silent fallback onto training GPUs."""
    fits = int(declared // resource_per_worker) if resource_per_worker > 0 else 0
    if fits <= 0:
        raise RuntimeError(f"no Ray node declares the {EVAL_RESOURCE!r} resource: start the evaluation nodes with "
                           f"`ray start ... --num-gpus G --resources '{{\"{EVAL_RESOURCE}\": G}}'`, or set "
                           "cuda_agent.pool_workers: 0 to evaluate inside the rollout workers")
    return min(fits, pool_workers) if pool_workers and pool_workers > 0 else fits


class PoolSettings(BaseModel):
    """The `cuda_agent` section of a verl config (or stage 1's reward_kwargs), pool part."""

    model_config = ConfigDict(extra="ignore")
    pool_workers: int | None = Field(default=None, description="cap on pool actors; None: one per declared unit; "
                                     "0: no pool, evaluate in the calling process")
    pool_gpus_per_worker: float = 1.0
    pool_cpus_per_worker: float = 4.0
    pool_resource_per_worker: float = 1.0
    eval: EvalConfig = Field(default_factory=EvalConfig)
    service_url: str | None = Field(default=None, description="evaluate on a `cuda-agent serve` service instead "
                                    "(its token from $CUDA_AGENT_SERVE_TOKEN); the service decides the backend")

    @property
    def uses_pool(self) -> bool:
        return self.pool_workers is None or self.pool_workers > 0


class EvalPoolService:
    """The job's evaluation pool (a Ray actor, 0 CPUs, async): owns the evaluation actors and hands
    each request to an idle one."""

    def __init__(self, settings_json: str):
        import ray

        self.settings = PoolSettings.model_validate_json(settings_json)
        s = self.settings
        declared = float(ray.cluster_resources().get(EVAL_RESOURCE, 0.0))
        n = eval_pool_size(declared, s.pool_workers, s.pool_resource_per_worker)
        actor_cls = ray.remote(num_gpus=s.pool_gpus_per_worker, num_cpus=s.pool_cpus_per_worker,
                               resources={EVAL_RESOURCE: s.pool_resource_per_worker})(_EvalActor)
        config_json = s.eval.model_dump_json()
        self._actors = [actor_cls.remote(config_json) for _ in range(n)]
        self._idle: asyncio.Queue[Any] | None = None

    def size(self) -> int:
        return len(self._actors)

    async def evaluate(self, task_json: str, backend: str, files: dict[str, str]) -> str:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for a in self._actors:
                self._idle.put_nowait(a)
        actor = await self._idle.get()
        try:
            return await actor.evaluate.remote(task_json, backend, files)
        finally:
            self._idle.put_nowait(actor)


def shared_pool(settings: PoolSettings) -> Any:
    """The job's pool service: found by name, or created once. Not detached, so it (and its
    evaluation actors) ends with the job's workers instead of outliving the run."""
    import ray

    name = f"{POOL_NAME}_{ray.get_runtime_context().get_job_id()}"
    return ray.remote(EvalPoolService).options(name=name, get_if_exists=True, num_cpus=0,
                                               max_concurrency=100_000).remote(settings.model_dump_json())


class SharedPoolEvaluator:
    """Evaluator (the agent loop's protocol) backed by the job's shared pool."""

    def __init__(self, settings: PoolSettings):
        self.settings = settings
        self._service: Any = None

    @property
    def service(self) -> Any:
        if self._service is None:
            self._service = shared_pool(self.settings)
        return self._service

    async def evaluate_files(self, task: Task, backend: str, files: dict[str, str]) -> EvalResult:
        raw = await self.service.evaluate.remote(task.model_dump_json(), backend, files)
        return EvalResult.model_validate_json(raw)

    async def evaluate(self, ws: Workspace) -> EvalResult:
        return await self.evaluate_files(ws.task, ws.backend, candidate_files(ws))


class ServiceEvaluator:
    """Evaluator (the agent loop's protocol) backed by a `cuda-agent serve` service over HTTP: the
    reward runs on the service's judges, outside the trainer's processes."""

    def __init__(self, settings: PoolSettings):
        from ...serve.client import ServiceClient

        self.settings = settings
        self.client = ServiceClient(settings.service_url)

    async def evaluate_files(self, task: Task, backend: str, files: dict[str, str]) -> EvalResult:
        return await self.client.aevaluate(task, files, self.settings.eval)

    async def evaluate(self, ws: Workspace) -> EvalResult:
        return await self.evaluate_files(ws.task, ws.backend, candidate_files(ws))


_EVALUATORS: dict[str, Evaluator] = {}


def shared_evaluator(cfg: dict[str, Any]) -> Evaluator:
    """The evaluator for a `cuda_agent` config section, cached per process: a client of a
    `cuda-agent serve` service (`service_url`), a client of the job's pool (the cache also holds
    the handle keeping the service alive), or with `pool_workers: 0` in-process evaluation."""
    settings = PoolSettings.model_validate(dict(cfg))
    key = settings.model_dump_json()
    if key not in _EVALUATORS:
        if settings.service_url:
            _EVALUATORS[key] = ServiceEvaluator(settings)
        elif settings.uses_pool:
            _EVALUATORS[key] = SharedPoolEvaluator(settings)
        else:
            _EVALUATORS[key] = LocalEvaluator(settings.eval, max_concurrent=int(cfg.get("local_concurrency", 1)))
    return _EVALUATORS[key]


class _EvalActor:
    """Runs on a pool node; everything crosses as JSON so no pickled objects from rollouts are trusted."""

    def __init__(self, config_json: str):
        self.config = EvalConfig.model_validate_json(config_json)

    def evaluate(self, task_json: str, backend: str, files: dict[str, str]) -> str:
        task = Task.model_validate_json(task_json)
        return evaluate_files(task, backend, files, self.config).model_dump_json()


__all__ = ["ServiceEvaluator", "PoolSettings", "EvalPoolService", "SharedPoolEvaluator", "EVAL_RESOURCE",
           "eval_pool_size", "shared_pool", "shared_evaluator"]
