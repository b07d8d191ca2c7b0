"""A benchmark tells the judge which evaluation is a task's last in the run (`Job.task_ends`), so
the judge forgets the task once it has answered (`EvalConfig.keep_task_warm`, issue 23); a task's
earlier samples (pass@k) and a policy's own episode keep it warm."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.benchmark import TaskRecord, load_suite, run_benchmark, solution_source
from cuda_agent.benchmark import jobs as jobs_module
from cuda_agent.evaluation import EvalConfig


class _RecordingPool:
    """Takes the jobs a run hands out and records each as a harness error (nothing evaluated)."""

    def __init__(self) -> None:
        self.jobs: list = []

    def run(self, jobs, workdir: Path, on_record) -> None:
        self.jobs.extend(jobs)
        for job in jobs:
            on_record(TaskRecord.for_job(job, status="harness_error", reason="not evaluated here"))


def test_only_a_tasks_last_sample_ends_it(tmp_path: Path) -> None:
    suite = load_suite("examples", only=["swish", "softmax"])
    pool = _RecordingPool()
    run_benchmark(suite, tmp_path / "run", pool, backend="cpu", config=EvalConfig(backend="cpu"),
                  solutions=solution_source("reference"), samples=[0, 1, 2])
    ends = {(j.task.name, j.sample): j.task_ends for j in pool.jobs}
    assert len(ends) == 6
    for name in {j.task.name for j in pool.jobs}:
        assert [ends[(name, s)] for s in (0, 1, 2)] == [False, False, True]


def test_the_device_stage_lets_the_judge_forget_the_task_only_at_its_end(tmp_path: Path, monkeypatch) -> None:
    suite = load_suite("examples", only=["swish"])
    pool = _RecordingPool()
    run_benchmark(suite, tmp_path / "run", pool, backend="cpu", config=EvalConfig(backend="cpu"),
                  solutions=solution_source("reference"), samples=[0, 1])
    seen: list[bool] = []
    monkeypatch.setattr(jobs_module, "materialize", lambda job, directory: (object(), job.config))
    monkeypatch.setattr(jobs_module, "evaluate", lambda ws, cfg: seen.append(cfg.keep_task_warm) or _Result())
    monkeypatch.setattr(jobs_module.TaskRecord, "for_job", classmethod(lambda cls, job, **kw: kw))
    for job in pool.jobs:
        jobs_module.device_stage(job, tmp_path)
    assert seen == [True, False]
    assert all(job.config.keep_task_warm for job in pool.jobs)  # the job's own config (its episode's) stays warm


class _Result:
    pass


def test_a_resumed_run_ends_the_task_at_its_last_job_left(tmp_path: Path) -> None:
    """Sample 2 already recorded: sample 1, the last job left of the task, ends it."""
    suite = load_suite("examples", only=["swish"])
    done = TaskRecord.for_task(suite.tasks[0], sample=2, status="evaluated", mode="reference")
    from cuda_agent.benchmark import ResultStore

    first = _RecordingPool()
    run_benchmark(suite, tmp_path / "run", first, backend="cpu", config=EvalConfig(backend="cpu"),
                  solutions=solution_source("reference"), samples=[0, 1, 2])
    ResultStore(tmp_path / "run").append(done)
    again = _RecordingPool()
    run_benchmark(suite, tmp_path / "run", again, backend="cpu", config=EvalConfig(backend="cpu"),
                  solutions=solution_source("reference"), samples=[0, 1, 2])
    assert [(j.sample, j.task_ends) for j in again.jobs] == [(0, False), (1, True)]


def test_a_policys_episode_keeps_the_task_warm_and_its_final_evaluation_ends_it(tmp_path: Path, monkeypatch) -> None:
    suite = load_suite("examples", only=["swish"])
    pool = _RecordingPool()
    run_benchmark(suite, tmp_path / "run", pool, backend="cpu", config=EvalConfig(backend="cpu"),
                  policy="tests.benchmark.test_task_ends:no_episode")
    (job,) = pool.jobs
    episode: list[bool] = []
    final: list[bool] = []
    monkeypatch.setattr(jobs_module, "materialize", lambda job, directory: (type("W", (), {"root": directory})(),
                                                                             job.config))
    monkeypatch.setattr(jobs_module, "run_policy_episode",
                        lambda policy, task, root, backend, cfg, options: episode.append(cfg.keep_task_warm))
    monkeypatch.setattr(jobs_module, "evaluate", lambda ws, cfg: final.append(cfg.keep_task_warm) or _Result())
    monkeypatch.setattr(jobs_module.TaskRecord, "for_job", classmethod(lambda cls, job, **kw: kw))
    jobs_module.device_stage(job, tmp_path)
    assert job.task_ends and episode == [True] and final == [False]


def no_episode(**kwargs):  # a policy spec for the run above; the test replaces the episode itself
    return {}
