"""Run the judge's task load (`Judge.task_state`: the input-move check, whole inputs and element by
element, and the outputs element by element where something stays fixed) over whole task sets on
this machine, and list every task it refuses: an honest task refused is a guard that fires on
honest work.

Each task's inputs are first made on torch's meta device to learn their size; tasks whose inputs
pass --max-gb are counted as skipped, not drawn (on a GPU, `--device cuda`, the large ones fit). Results go one JSON line per task to --out as
each finishes, and a rerun skips what the file holds. Workers are separate processes, so a task
that hangs or crashes costs only itself.

    .venv/bin/python bench/inputs_move_scan.py --out /tmp/scan.jsonl \\
        .carry/KernelBench .carry-data/ops6k.parquet release/cuda-agent-synth-2013/tasks.parquet
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

TASK_TIMEOUT_S = 120


def _meta_bytes(torch, module) -> int:  # type: ignore[no-untyped-def]
    with torch.device("meta"):
        inputs = list(module.get_inputs())
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def check_one(name: str, source: str, device: str = "cpu", max_bytes: int = 1 << 30) -> dict:  # type: ignore[type-arg]
    """The judge's verdict on loading one task (`Judge.task_state`, the real path: the input check, the outputs
    element by element where something stays fixed, the source run again where that moves what was made at
    import): ok, ok imported again, refused (its message), skipped (inputs too large) or error."""
    import hashlib

    import torch

    from cuda_agent.evaluation import EvalConfig
    from cuda_agent.evaluation.judge import JudgeError, _ImportedAgain, module_from_source
    from cuda_agent.evaluation.protocol import JudgeRequest

    t0 = time.perf_counter()
    try:
        module = module_from_source("scan_task", source)
    except Exception as exc:  # noqa: BLE001 - a task that does not import is counted, not fatal
        return {"task": name, "verdict": "error", "why": f"import: {type(exc).__name__}: {exc}"[:300]}
    try:
        size = _meta_bytes(torch, module)
    except Exception:  # noqa: BLE001 - meta tensors do not cover every op: draw it for real
        size = -1
    if size > max_bytes:
        return {"task": name, "verdict": "skipped", "bytes": size}
    judge = _judge(device)
    cfg = EvalConfig(backend=device)
    req = JudgeRequest(config=cfg, task_source=source, task_hash=hashlib.sha256(source.encode()).hexdigest(),
                       workspace="/nonexistent")
    try:
        state = judge.task_state(req, cfg)
        verdict = "ok imported again" if isinstance(state.module, _ImportedAgain) else "ok"
    except JudgeError as exc:
        return {"task": name, "verdict": "refused", "why": str(exc)[:400], "s": round(time.perf_counter() - t0, 2)}
    except Exception as exc:  # noqa: BLE001
        return {"task": name, "verdict": "error", "why": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        judge.drop_task()
    return {"task": name, "verdict": verdict, "s": round(time.perf_counter() - t0, 2)}


_JUDGES: dict[str, object] = {}


def _judge(device: str):  # type: ignore[no-untyped-def]
    """One judge per worker process (no client is ever started: only its task load runs)."""
    from cuda_agent.evaluation.judge import Judge

    if device not in _JUDGES:
        _JUDGES[device] = Judge("cuda" if device.startswith("cuda") else "cpu")
    return _JUDGES[device]


def _tasks(sources: list[str]):  # type: ignore[no-untyped-def]
    from cuda_agent.tasks.loaders import load_tasks

    for source in sources:
        loaded = load_tasks(source, on_error="skip")
        for i, task in enumerate(loaded):
            yield f"{Path(source).name}:{i}:{task.name}", task.source


def worker(sources: list[str], shard: int, shards: int, out: Path, done: set[str], device: str,
           max_bytes: int) -> None:
    import torch

    torch.set_num_threads(1)
    with out.open("a") as f:
        for i, (name, source) in enumerate(_tasks(sources)):
            if i % shards != shard or name in done:
                continue
            print(json.dumps({"task": name, "verdict": "started"}), file=f, flush=True)
            signal.alarm(TASK_TIMEOUT_S)
            row = check_one(name, source, device, max_bytes)
            signal.alarm(0)
            print(json.dumps(row), file=f, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-gb", type=float, default=1.0)
    parser.add_argument("--shard", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.shard >= 0:
        rows = [json.loads(line) for line in args.out.read_text().splitlines()] if args.out.exists() else []
        # done: a verdict, or started twice and never finished (it kills its worker: not tried a third time)
        starts: dict[str, int] = {}
        done: set[str] = set()
        for r in rows:
            if r["verdict"] == "started":
                starts[r["task"]] = starts.get(r["task"], 0) + 1
            elif "OutOfMemoryError" in r.get("why", ""):  # workers side by side: tried again
                starts[r["task"]] = starts.get(r["task"], 0) - 1
            else:
                done.add(r["task"])
        worker(args.sources, args.shard, args.jobs, args.out.with_suffix(f".{args.shard}.jsonl"),
               done | {t for t, n in starts.items() if n >= 2}, args.device, int(args.max_gb * 2**30))
        return
    stopped = False
    while not stopped:
        parts = [args.out.with_suffix(f".{k}.jsonl") for k in range(args.jobs)]
        procs = [subprocess.Popen([sys.executable, __file__, *args.sources, "--out", str(args.out), "--jobs",
                                   str(args.jobs), "--device", args.device, "--max-gb", str(args.max_gb),
                                   "--shard", str(k)]) for k in range(args.jobs)]
        try:
            codes = [p.wait() for p in procs]
        except KeyboardInterrupt:  # out of time: what finished is kept, a rerun goes on from there
            for p in procs:
                p.kill()
            codes, stopped = [p.wait() for p in procs], True
        with args.out.open("a") as f:
            for part in parts:
                if part.exists():
                    f.write(part.read_text())
                    part.unlink()
        if not any(codes):
            break
    rows = [json.loads(line) for line in args.out.read_text().splitlines()]
    final: dict[str, dict] = {}  # type: ignore[type-arg]
    for r in rows:  # a verdict over an earlier start of the same task
        if r["verdict"] != "started" or r["task"] not in final:
            final[r["task"]] = r
    counts: dict[str, int] = {}
    for r in final.values():
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(json.dumps(counts))
    for r in final.values():
        if r["verdict"] in ("refused", "started", "error"):
            print(r["task"], r["verdict"], r.get("why", "(killed or crashed)"))


if __name__ == "__main__":
    main()
