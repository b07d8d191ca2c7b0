"""The reward's acceptance run on one GPU (issue 23): honest work must keep its reward.

    python bench/gpu_acceptance.py --out DIR [--steps examples,triton,paper,latency,kb] [--budget-s 540]

Steps, each writing a JSON line per evaluation as it completes (DIR/acceptance.jsonl):
  examples  the 8 bundled examples' CUDA solutions, --repeats times (default 3)
  triton    their Triton solutions, twice
  paper     the cuBLAS-GEMM and cuDNN-conv solutions under the `paper` rules profile, where bundled
  latency   warm re-evaluations of swish (the judge already warm): wall seconds each
  kb        KB_LIST through the naive one-process harness, then one `cuda-agent bench run` of the
            reference as its own solution (every task must get reward 1), with the device's memory
            sampled per task
Ends with one summary line (also DIR/summary.json): false -1, OOMs, infrastructure errors, warm
latency, cost per task against the naive harness.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent


def device_used_gib() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.split()
        return float(out[0]) / 1024 if out else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def per_process_gib() -> dict[int, float]:
    """Device memory (GiB) per process, from the driver's per-process table."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    used: dict[int, float] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].replace(".", "").isdigit():
            used[int(parts[0])] = used.get(int(parts[0]), 0.0) + float(parts[1]) / 1024
    return used


def _role(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    return cmd.split("cuda_agent.")[-1][:60] if "cuda_agent." in cmd else cmd[-60:]


class Log:
    def __init__(self, out: Path) -> None:
        self.path = out / "acceptance.jsonl"
        self.rows: list[dict] = []

    def add(self, row: dict) -> None:
        self.rows.append(row)
        with self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k not in ("judge", "phases")})[:400], flush=True)


def evaluate_row(step: str, name: str, ws, cfg) -> dict:
    from cuda_agent.evaluation import evaluate

    before = device_used_gib()
    t0 = time.perf_counter()
    res = evaluate(ws, cfg)
    wall = time.perf_counter() - t0
    return {"step": step, "name": name, "reward": res.reward, "correct": res.correct, "reason": res.reason[:400],
            "wall_s": round(wall, 3), "phases": {k: round(v, 3) for k, v in res.phases.items()},
            "speedup_vs_eager": res.speedup_vs_eager, "interval": res.speedup_interval,
            "judge": res.judge, "device_used_before_gib": before, "device_used_after_gib": device_used_gib()}


def example_workspaces(step: str) -> list[tuple[str, object, dict]]:
    """(name, workspace, config overrides) per bundled example with a solution for `step`: 'examples'
    (CUDA), 'triton', or 'paper' (the cuda_* variants, cuBLAS and cuDNN, under the paper rules profile)."""
    from cuda_agent.examples import list_examples
    from cuda_agent.workspace import create_workspace

    root = Path(tempfile.mkdtemp(prefix=f"acc-{step}-"))
    made = []
    language = "triton" if step == "triton" else "cpp"
    for ex in list_examples():
        if step == "paper":
            for variant in sorted(d.name for d in ex.root.iterdir() if d.is_dir() and d.name.startswith("cuda_")):
                ws = create_workspace(ex.task, root / f"{ex.name}-{variant}", "cuda")
                ex.install_solution(ws.root, variant)
                made.append((f"{ex.name}:{variant}", ws, {"rules": "paper"}))
            continue
        if language == "triton" and not (ex.root / "triton").is_dir():
            continue
        try:
            ws = create_workspace(ex.task, root / ex.name, "cuda", language=language)
            ex.install_solution(ws.root, "triton" if language == "triton" else "cuda")
        except Exception as exc:  # no solution of this kind for this example
            made.append((ex.name, None, {"skipped": f"{type(exc).__name__}: {exc}"[:200]}))
            continue
        made.append((ex.name, ws, {}))
    return made


def prebuild(log: Log, batches: list[list[tuple[str, object, dict]]], workers: int = 8) -> None:
    """Compile every CUDA solution first, side by side (`evaluate(checks_only=True)`: tamper,
    static checks, build; no device work), as an RL engine's concurrent rollouts would: the
    evaluations after it find their builds cached and measure the judge. Serially the cold nvcc
    builds were 165 s of the examples step on an H100 host (twelve seconds each), and the naive
    harness ran out of time before 9 of the 30 KernelBench tasks."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_agent.evaluation import evaluate

    def build(job: tuple[str, object, dict]) -> str | None:
        name, ws, over = job
        try:
            res = evaluate(ws, gpu_config(**over), checks_only=True)
        except Exception as exc:  # noqa: BLE001 - the evaluation itself builds again and says what failed
            return f"{name}: {type(exc).__name__}: {exc}"[:200]
        return f"{name}: {res.stage}: {res.reason[:120]}" if res.reason else None

    jobs = [(name, ws, over) for batch in batches for name, ws, over in batch if ws is not None]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        failed = [f for f in pool.map(build, jobs) if f]
    log.add({"step": "prebuild", "name": f"{len(jobs)} solutions", "seconds": round(time.perf_counter() - t0, 2),
             "failed": failed})


def run_examples(log: Log, step: str, made: list[tuple[str, object, dict]], repeats: int, deadline: float) -> None:
    for name, ws, over in made:
        if ws is None:
            log.add({"step": step, "name": name, **over})
            continue
        for i in range(repeats):
            if time.monotonic() > deadline:
                log.add({"step": step, "name": name, "skipped": "out of time"})
                return
            log.add({**evaluate_row(step, name, ws, gpu_config(**over)), "repeat": i})


def run_latency(log: Log, repeats: int, deadline: float) -> None:
    from cuda_agent.examples import list_examples
    from cuda_agent.workspace import create_workspace

    ex = next(e for e in list_examples() if e.name == "swish")
    ws = create_workspace(ex.task, Path(tempfile.mkdtemp(prefix="acc-lat-")) / "ws", "cuda")
    ex.install_solution(ws.root, "cuda")
    for i in range(repeats + 1):
        if time.monotonic() > deadline:
            return
        log.add({**evaluate_row("latency", "swish", ws, gpu_config()), "warm": i > 0})


CONFINE_READS: bool | None = None  # --confine-reads: the candidate's read rules on the GPU (off there by default)


def gpu_config(**fields: object) -> object:
    """The evaluation config of the examples, Triton, paper and latency steps."""
    from cuda_agent.evaluation import EvalConfig
    from cuda_agent.evaluation.config import GuardConfig

    guards = GuardConfig(confine_reads=CONFINE_READS) if CONFINE_READS is not None else GuardConfig()
    return EvalConfig(backend="cuda", guards=guards, **fields)


CONTEXT_GIB = 1.0  # a client holding more than this has working memory (a bare context is ~0.6 GiB)
# what a client's command line says (`_role`): never the judge, nor the naive harness's one process (which
# held every task in turn: taken for a client, its whole run went to its first task; run 4 of issue 23's
# seventh session, where the list's name did not happen to contain "judge")
CLIENT_ROLES = ("evaluation.forkserver", "evaluation.candidate")


def sampled_run(argv: list[str], progress: Path, peaks: dict[int, float], detail: Path,
                device_peaks: dict[int, float] | None = None) -> None:
    """Run `argv` to its end, sampling the device memory its process tree holds (the driver's
    per-process table: contexts included, like for like between harnesses) per task, the task
    being how many lines `progress` has; `device_peaks`: the device's whole use above its level
    before the start (memory mapped into two processes, as the judge maps a client's outputs,
    counted once)."""
    from cuda_agent.isolation.sandbox import process_tree

    idle = [device_used_gib() or 0.0]  # the device's level before the start, lowered by any lower sample:
    # an earlier step's process still exiting at the start held ~1 GiB that then counted as idle, and the
    # naive harness's whole use read 0.1 GiB on level3/38_LSTMBidirectional (36x, sixteenth session)
    raw: dict[int, float] = {}
    proc = subprocess.Popen(argv)
    stop = threading.Event()


    worked: dict[int, int] = {}  # client pid -> the task it held working memory in

    def sample() -> None:
        while not stop.is_set():
            done = sum(1 for _ in progress.open()) if progress.exists() else 0
            tree = set(process_tree(proc.pid))
            table = per_process_gib()
            used = sum(v for pid, v in table.items() if pid in tree)
            for pid, v in table.items():  # a judge's client: forked by its fork server, or started as one
                if pid in tree and v > CONTEXT_GIB and any(r in _role(pid) for r in CLIENT_ROLES):
                    worked.setdefault(pid, done)
            # a task's line is written before its clients have exited: while one of them still
            # holds memory, the sample is that task's tail, not the next task's start (the next
            # one's spares hold a context only, under CONTEXT_GIB)
            done = min([done] + [worked[pid] for pid in table if pid in tree and pid in worked])
            whole = device_used_gib()
            if whole is not None:
                idle[0] = min(idle[0], whole)
            if whole is not None and device_peaks is not None and used:
                raw[done] = max(raw.get(done, 0.0), whole)
            if used:
                peaks[done] = max(peaks.get(done, 0.0), used)
                with detail.open("a") as fh:
                    fh.write(json.dumps({"t": round(time.monotonic(), 2), "done": done, "ours_gib": round(used, 2),
                                         "device": {str(pid): [round(v, 2), _role(pid) if pid in tree else "other"]
                                                    for pid, v in table.items()}}) + "\n")
            stop.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc.wait()
    stop.set()
    sampler.join()
    if device_peaks is not None:
        device_peaks.update({done: whole - idle[0] for done, whole in raw.items()})


def run_kb(log: Log, out: Path, kb_list: Path, deadline: float, naive_share: float) -> None:
    naive_out = out / "naive.jsonl"
    naive_s = max(30, int((deadline - time.monotonic()) * naive_share))
    naive_peaks: dict[int, float] = {}
    naive_whole: dict[int, float] = {}
    sampled_run(["timeout", str(naive_s), sys.executable, str(HERE / "naive_harness.py"), str(kb_list),
                 "--out", str(naive_out)], naive_out, naive_peaks, out / "naive.memory.jsonl", naive_whole)
    run_dir = Path(tempfile.mkdtemp(prefix="acc-kb-"))
    results = run_dir / "results.jsonl"
    peaks: dict[int, float] = {}
    whole: dict[int, float] = {}
    ours_s = max(30, int(deadline - time.monotonic()))
    sampled_run(["timeout", str(ours_s), sys.executable, "-m", "cuda_agent", "bench", "run", str(kb_list),
                 "--solutions", "reference", "--backend", "cuda", "--no-compile-baseline", "--out",
                 str(run_dir), "--fresh", "--no-report"], results, peaks, out / "ours.memory.jsonl", whole)
    naive = {}
    if naive_out.exists():
        for i, line in enumerate(naive_out.read_text().splitlines()):
            row = json.loads(line)
            row["device_gib"] = naive_peaks.get(i)
            row["device_whole_gib"] = naive_whole.get(i)
            naive[Path(row["task"]).stem] = row
    if results.exists():
        for i, line in enumerate(results.read_text().splitlines()):
            rec = json.loads(line)
            res = rec.get("result") or {}
            stem = Path(rec.get("task", "")).stem or rec.get("task", "")
            key = next((k for k in naive if k.endswith(stem) or stem.endswith(k)), None)
            nv = naive.get(key) if key else None
            log.add({"step": "kb", "name": rec.get("task"), "reward": res.get("reward", -1), "correct": res.get("correct"),
                     "reason": (res.get("reason") or rec.get("reason", ""))[:400], "wall_s": rec.get("wall_s"),
                     "phases": res.get("phases"), "judge": res.get("judge"), "ours_peak_gib": peaks.get(i),
                     "ours_whole_gib": whole.get(i), "naive_whole_gib": nv.get("device_whole_gib") if nv else None,
                     "naive_s": nv.get("seconds") if nv else None, "naive_peak_gib": nv.get("device_gib") if nv else None,
                     "naive_allocated_gib": nv.get("peak_gib") if nv else None,
                     "naive_error": nv.get("error") if nv else None})


def _at_the_bar(repeats: list[tuple[int, dict]], margin: float = 0.05) -> bool:
    """Whether repeats whose rewards differ sit at the 'faster' bar: some repeat's interval
    against a baseline (eager: reward 1 or 2; torch.compile: 2 or 3) contains it, so which side
    a repeat lands on is noise (issue 23: "the same reward on repeats unless the speed is within
    noise"; eighth session: swish 3, 2, 2 at 1.13x, 1.07x, 1.08x vs torch.compile was counted as
    changed, the eager interval alone being looked at)."""
    bar = 1 / (1 - margin)
    return any(lo <= bar <= hi for _, interval in repeats for base in ("eager", "compile")
               for lo, hi in [interval.get(base) or (0, 0)])


def src_digest(root: Path = HERE.parent / "src" / "cuda_agent") -> str:
    """A digest of the code that ran (every file under src/cuda_agent, by path and bytes): the device's
    copy of the tree has the working files but not always their git history (a session's runs all read
    its base commit from `git rev-parse`), so a run is matched to a commit by computing this there."""
    from cuda_agent.backends.base import digest

    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    return digest(*(part for p in files for part in (str(p.relative_to(root)), p.read_bytes())))[:16]


def summarise(log: Log, out: Path) -> dict:
    rows = [r for r in log.rows if "reward" in r]
    honest = [r for r in rows if r["step"] in ("examples", "triton", "paper", "latency", "kb")]
    text = lambda r: (r.get("reason") or "").lower()  # noqa: E731
    oom = [r for r in honest if "out of memory" in text(r) or "needs about" in text(r)]
    infra = [r for r in honest if "infrastructure" in text(r) or "baseline client failed" in text(r)]
    false_neg = [r for r in honest if r["reward"] < 1]
    warm = [r["wall_s"] for r in rows if r["step"] == "latency" and r.get("warm")]
    ratios = [r["wall_s"] / r["naive_s"] for r in rows if r["step"] == "kb" and r.get("naive_s") and r.get("wall_s")]
    kb = [r for r in rows if r["step"] == "kb"]
    repeats: dict[str, list[tuple[int, dict]]] = {}
    for r in rows:
        if r["step"] in ("examples", "triton"):
            repeats.setdefault(f"{r['step']}:{r['name']}", []).append((r["reward"], r.get("interval") or {}))
    kb_mem = [r["ours_peak_gib"] / r["naive_peak_gib"] for r in rows
              if r["step"] == "kb" and r.get("ours_peak_gib") and r.get("naive_peak_gib")]
    kb_whole = [r["ours_whole_gib"] / r["naive_whole_gib"] for r in rows
                if r["step"] == "kb" and r.get("ours_whole_gib") and r.get("naive_whole_gib")]
    held = [r["judge"]["memory"]["judge_held_after_gib"] for r in rows
            if (r.get("judge") or {}).get("memory") and r["step"] in ("examples", "triton", "paper", "latency", "kb")]
    summary = {
        "memory_vs_naive_max": round(max(kb_mem), 2) if kb_mem else None,
        "memory_vs_naive_max_device_whole": round(max(kb_whole), 2) if kb_whole else None,
        "cost_over_1_5": sorted(f"{r['name']} {r['wall_s'] / r['naive_s']:.2f}" for r in rows if r["step"] == "kb"
                                and r.get("naive_s") and r.get("wall_s") and r["wall_s"] > 1.5 * r["naive_s"]),
        "memory_over_3": sorted(f"{r['name']} {r['ours_peak_gib'] / r['naive_peak_gib']:.2f}" for r in rows
                                if r["step"] == "kb" and r.get("ours_peak_gib") and r.get("naive_peak_gib")
                                and r["ours_peak_gib"] > 3 * r["naive_peak_gib"]),
        "judge_held_after_max_gib": round(max(held), 2) if held else None,
        "evaluations": len(honest), "false_minus_one": len(false_neg), "oom": len(oom), "infrastructure": len(infra),
        "kb_reward_1": sum(1 for r in kb if r["reward"] == 1), "kb_tasks": len(kb),
        "kb_compared_with_naive": len(ratios),  # the cost and memory ratios cover only these (where the naive harness got)
        "warm_latency_s": round(median(warm), 3) if warm else None, "warm_latency_max_s": max(warm) if warm else None,
        "cost_vs_naive_geomean": round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3) if ratios else None,
        "cost_vs_naive_max": round(max(ratios), 3) if ratios else None,
        "reward_changed_on_repeat": sorted(k for k, v in repeats.items() if len({r for r, _ in v}) > 1
                                           and not _at_the_bar(v)),
        "reward_changed_within_noise": sorted(k for k, v in repeats.items() if len({r for r, _ in v}) > 1
                                              and _at_the_bar(v)),
        "failures": [f"{r['step']}:{r['name']}: {r.get('reason', '')[:160]}" for r in false_neg][:20],
        "src_digest": src_digest(),  # at a commit: python -c "import sys; sys.path[:0] = ['bench']; import
        # gpu_acceptance as g; print(g.src_digest())"
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", default="examples,triton,paper,latency,kb")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kb-list", type=Path, default=HERE / "judge_kb30.txt")
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--kb-share", type=float, default=0.55, help="share of the budget left for the kb step")
    ap.add_argument("--naive-share", type=float, default=0.42, help="share of the kb step's time for the naive harness "
                    "(it stops where its time ends: tasks it did not reach have no cost or memory ratio)")
    ap.add_argument("--confine-reads", action="store_true", help="the candidate's read rules on (guards.confine_reads; "
                    "on by default since a run like this one showed honest kernels keep their rewards)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    end = start + args.budget_s
    global CONFINE_READS
    CONFINE_READS = True if args.confine_reads else None
    steps = args.steps.split(",")
    kb_reserve = args.budget_s * args.kb_share if "kb" in steps else 0.0
    log = Log(args.out)
    log.add({"step": "gpu", "name": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                                     "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()})
    made = {step: example_workspaces(step) if step in steps else [] for step in ("examples", "triton", "paper")}
    if made["examples"] or made["paper"]:
        prebuild(log, [made["examples"], made["paper"]])
    if "examples" in steps:
        run_examples(log, "examples", made["examples"], args.repeats, end - kb_reserve - 60)
    if "triton" in steps:
        run_examples(log, "triton", made["triton"], 2, end - kb_reserve - 40)
    if "paper" in steps:
        run_examples(log, "paper", made["paper"], 1, end - kb_reserve - 30)
    if "latency" in steps:
        run_latency(log, 5, end - kb_reserve)
    if "kb" in steps:
        from cuda_agent.evaluation.judge_client import drop_judge

        drop_judge("cuda")  # the bench run starts its own judge: free this one's device memory first
        run_kb(log, args.out, args.kb_list, end, naive_share=args.naive_share)
    summary = summarise(log, args.out)
    print("ACCEPTANCE " + json.dumps({k: v for k, v in summary.items() if k != "failures"}))
    for f in summary["failures"]:
        print("  -1:", f)


if __name__ == "__main__":
    main()
