"""Where a warm evaluation's time goes, on the judge's side: the judge run in this process under
cProfile (the candidate and baseline clients are its children, as always).

    python bench/judge_profile.py --example swish --backend cuda --repeats 3 --out prof.txt
    python bench/judge_profile.py --task KernelBench/level3/16_DenseNet201.py --repeats 2 --out prof.txt
    (a task file: the reference as its own solution, as `bench run --solutions reference` evaluates it;
    the first evaluation is the cold one a benchmark pays for)
    python bench/judge_profile.py --warm-task A.py --task B.py --task C.py --repeats 1 --out prof.txt
    (A evaluated first, unprofiled: B and C are then new tasks to a warm judge, as in a `bench run`)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any


def reference_request(task_path: Path, backend_name: str) -> Any:
    """The judge request `bench run --solutions reference` makes for a task file: its reference as
    the solution, built and published, compile baseline off (as gpu_acceptance's KernelBench step)."""
    from cuda_agent.benchmark.jobs import reference_model_new
    from cuda_agent.benchmark.solutions import SINGLE_FILE_BINDING, SINGLE_FILE_BINDING_TEXT, reference_config
    from cuda_agent.evaluation import EvalConfig
    from cuda_agent.tasks.loaders import load_task_file
    from cuda_agent.workspace import create_workspace

    task = load_task_file(task_path)
    ws = create_workspace(task, Path(tempfile.mkdtemp(prefix="judge-ref-")) / "ws", backend_name)
    (ws.root / "model_new.py").write_text(reference_model_new(task.source))
    (ws.root / SINGLE_FILE_BINDING).write_text(SINGLE_FILE_BINDING_TEXT)
    return built_request(ws, reference_config(EvalConfig(backend=backend_name)).model_copy(update={"compile_mode": None}))


def built_request(ws: Any, cfg: Any) -> Any:
    """The judge request for a workspace's solution, built and published as `evaluate` does."""
    from cuda_agent.backends import get_backend
    from cuda_agent.evaluation.evaluator import _baseline_key, _judge_request
    from cuda_agent.isolation.paths import default_cache_dir
    from cuda_agent.languages import get_language

    backend, cache = get_backend(cfg.backend), default_cache_dir()
    lang = get_language(ws.language)
    build = lang.build(ws.root, backend, cache_dir=cache, timeout_s=300)
    assert build.ok, build.log
    lang.publish(ws.root, backend, build.library)
    return _judge_request(ws, ws.task, backend, cfg, cache, _baseline_key(ws.task.content_hash, backend, cfg, None),
                          build.library)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="swish")
    ap.add_argument("--task", type=Path, action="append", default=None,
                    help="a task file, its reference as the solution (instead of --example); repeat for several")
    ap.add_argument("--warm-task", type=Path, default=None, help="a task evaluated first, unprofiled")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from cuda_agent.evaluation import EvalConfig
    from cuda_agent.evaluation.judge import Judge
    from cuda_agent.examples import list_examples
    from cuda_agent.workspace import create_workspace

    if args.task:
        requests = [(t.stem, reference_request(t, args.backend)) for t in args.task]
    else:
        ex = next(e for e in list_examples() if e.name == args.example)
        ws = create_workspace(ex.task, Path(tempfile.mkdtemp(prefix="judge-prof-")) / "ws", args.backend)
        ex.install_solution(ws.root, args.backend)
        requests = [(ex.name, built_request(ws, EvalConfig(backend=args.backend)))]
    judge = Judge(args.backend)
    lines = []
    if args.warm_task is not None:
        answer = judge.evaluate(reference_request(args.warm_task, args.backend))
        print(f"warm task {args.warm_task.stem}: correct {answer.correct}", flush=True)
    for i, (name, req) in ((i, r) for r in requests for i in range(args.repeats)):
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        answer = judge.evaluate(req)
        prof.disable()
        wall = time.perf_counter() - t0
        head = (f"{name} evaluation {i}: {wall:.2f} s, correct {answer.correct} {answer.reason or ''}; phases "
                f"{ {k: round(v, 3) for k, v in answer.phases.items()} }; load steps {answer.sandbox.get('load_steps_s')}")
        print(head, flush=True)
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(45)
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
        lines += [head, buf.getvalue()]
        time.sleep(float(i == 0 and args.repeats > 1) * 8)  # the spares done starting once, as in a steady RL loop
    args.out.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
