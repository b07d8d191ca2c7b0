"""`cuda-agent bench run | report | compare | export-timing`. Only typer and rich at import."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..evaluation.config import RULES_HELP, RulesProfile
from ..exit_codes import ExitCode, OneLineErrors, checked_backend, fail

console = Console()
err = Console(stderr=True)
bench_app = typer.Typer(no_args_is_help=True, add_completion=False, cls=OneLineErrors, rich_markup_mode=None,
                        help="KernelBench-style benchmark runs, reports and comparisons.")


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")


@bench_app.command("run")
def run_cmd(
    suite: str = typer.Argument(..., help="'examples', a KernelBench checkout or folder, a .py task, a parquet/"
                                          "JSONL dataset, a HF dataset id, or a .txt list of task paths"),
    out: Path = typer.Option(..., "--out", "-o", help="run directory (resumed if it holds this run)"),
    solutions: Optional[str] = typer.Option(None, help="'examples', 'reference', or a folder of solutions"),
    policy: Optional[str] = typer.Option(None, help="'agent[:<policy>]' or 'module:function' (one episode per task)"),
    policy_option: Optional[list[str]] = typer.Option(None, help="KEY=VALUE passed to the episode (repeatable)"),
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    levels: Optional[list[int]] = typer.Option(None, "--level", help="keep these levels (repeatable)"),
    only: Optional[list[str]] = typer.Option(None, help="keep tasks matching these names or globs (repeatable)"),
    per_level: Optional[int] = typer.Option(None, help="at most N tasks per level, evenly spread"),
    subset: Optional[str] = typer.Option(None, help="a curated KernelBench subset by name: 'representative' "
                                                    "(its dataset.py LEVEL{1,2,3}_REPRESENTATIVE_IDS)"),
    precision: Optional[str] = typer.Option(None, help="fp32, fp16 or bf16: reference, inputs and weights in this "
                                                       "precision (default: as each task is written)"),
    tolerance: str = typer.Option("paper", help="'paper' (atol = rtol = 1e-2) or 'kernelbench' (1e-4 fp32, "
                                                "1e-2 fp16 / bf16)"),
    rules: RulesProfile = typer.Option(RulesProfile.paper, help=RULES_HELP),
    samples: int = typer.Option(1, min=1, help="samples per task (pass@k): solutions sample_0..N-1, or N episodes"),
    interleave_levels: bool = typer.Option(False, help="run levels round-robin (a cut-short run covers all)"),
    gpus: Optional[str] = typer.Option(None, help="GPU indices for evaluation slots, e.g. 0,1 (default: all)"),
    eval_workers: int = typer.Option(1, help="evaluation slots on the cpu backend"),
    build_workers: int = typer.Option(0, help="CPU build workers (0: cores - evaluation slots, at least 1)"),
    ray: bool = typer.Option(False, "--ray", help="fan out over a Ray cluster (the `ray` extra)"),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster address (default: start a local one)"),
    ray_cpus: Optional[int] = typer.Option(None, help="CPUs for a local Ray cluster"),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="--no-timing: build and verify only"),
    compile_baseline: bool = typer.Option(True, "--compile-baseline/--no-compile-baseline",
                                          help="time torch.compile too"),
    trials: int = typer.Option(5, help="correctness trials"),
    atol: Optional[float] = typer.Option(None, help="absolute tolerance (default 1e-2, or the task's own)"),
    rtol: Optional[float] = typer.Option(None, help="relative tolerance (default 1e-2, or the task's own)"),
    timeout: Optional[float] = typer.Option(None, min=1.0, help="seconds each evaluation's worker may run "
                                            "(default 600)"),
    memory_limit_gb: Optional[float] = typer.Option(None, help="evaluation worker's resident memory cap"),
    timing_budget: Optional[float] = typer.Option(None, help="seconds of timed rounds per evaluation"),
    min_rounds: Optional[int] = typer.Option(None, help="fewest timed rounds when the budget allows"),
    warmup_ms: Optional[float] = typer.Option(None, help="warm-up per model before timing"),
    sample: int = typer.Option(0, help="solutions: the first sample_<S> to use (with --samples N: S..S+N-1)"),
    fresh: bool = typer.Option(False, help="discard what the run directory holds and start over"),
    report: bool = typer.Option(True, "--report/--no-report", help="write report.md/.html/.json at the end"),
    kernelbench_timing: Optional[Path] = typer.Option(None, help="KernelBench timing folder/file for the report"),
) -> None:
    """Evaluate a suite with ready solutions or a policy; append each result; resumable.
    Exit 0 when every task was loaded and recorded, 1 when some could not be (they are listed)."""
    import os

    from ..evaluation import EvalConfig
    from ..tasks import TaskError
    from .local_pool import LocalPool, device_slots
    from .ray_pool import RayPool
    from .runner import run_benchmark
    from .solutions import SolutionError, solution_source
    from .store import RunMismatch
    from .suite import load_suite

    if (solutions is None) == (policy is None):
        raise fail("give exactly one of --solutions and --policy")
    be = checked_backend(backend)
    try:
        chosen = load_suite(suite, levels=levels or None, only=only, per_level=per_level,
                            interleave=interleave_levels, subset=subset, precision=precision)
        source = solution_source(solutions, sample) if solutions else None
    except (TaskError, SolutionError, ValueError) as exc:
        raise fail(str(exc))
    for bad in chosen.rejected:
        err.print(f"[yellow]could not load (counted as failed):[/] {escape(bad)}")
    config = EvalConfig.from_options(be, measure=timing, trials=trials, compile_baseline=compile_baseline, atol=atol,
                                     rtol=rtol, tolerance=tolerance, timeout_s=timeout, memory_limit_gb=memory_limit_gb,
                                     timing_budget_s=timing_budget, min_rounds=min_rounds, warmup_ms=warmup_ms,
                                     rules=rules.value)
    options = dict(o.split("=", 1) for o in (policy_option or []) if "=" in o)
    if ray:
        pool = RayPool(be, address=ray_address, num_cpus=ray_cpus)
    else:
        try:
            slots = device_slots(be, [int(g) for g in gpus.split(",")] if gpus else None, eval_workers)
        except (RuntimeError, ValueError) as exc:
            raise fail(str(exc))
        workers = build_workers or max(1, (os.cpu_count() or 2) - len(slots))
        pool = LocalPool(slots, build_workers=workers, log_dir=out / "logs")
    n, bad = len(chosen.tasks), len(chosen.rejected)
    console.print(f"bench: {n} task(s) from [bold]{escape(suite)}[/] on [bold]{be}[/] -> {out}"
                  + (f" ([red]{bad} more could not be loaded[/])" if bad else ""))
    progress = {"k": 0}

    def show(r) -> None:  # type: ignore[no-untyped-def]
        progress["k"] += 1
        verdict = "skipped" if r.status == "skipped" else f"reward {r.reward:+d}"
        sample = f" sample {r.sample}" if samples > 1 else ""
        console.print(f"  [{progress['k']}/{n * samples}] {escape(r.task)}{sample}: {verdict}  "
                      f"{escape(r.summary[:100])}  ({r.slot})")

    try:
        records = run_benchmark(chosen, out, pool, backend=be, config=config, solutions=source, policy=policy,
                                policy_options=options, fresh=fresh, samples=list(range(samples)), on_record=show)
    except RunMismatch as exc:
        raise fail(str(exc))
    console.print(f"{len(records)}/{n * samples} record(s) in {out / 'results.jsonl'}")
    if report:
        _write_reports(out, out, ["md", "html", "json"], kernelbench_timing)
    if bad:  # the report's rates are over the loaded tasks; these are failures too
        err.print(f"[red]{bad} of {n + bad} task(s) could not be loaded and are not in the table above[/]")
    raise typer.Exit(int(ExitCode.OK if len(records) >= n * samples and not bad else ExitCode.FAILED))


def _write_reports(run: Path, out_dir: Path, formats: list[str], kernelbench_timing: Optional[Path]) -> None:
    from .kernelbench_timing import TimingFormatError, load_kernelbench_timing
    from .report import build_report, paper_table, write_reports

    info, records = _load_run(run)
    try:
        baselines = load_kernelbench_timing(kernelbench_timing) if kernelbench_timing else None
    except TimingFormatError as exc:
        raise fail(str(exc))
    if "html" in formats and not _have("matplotlib"):  # degrade: write what can be written, say what is missing
        formats = [f for f in formats if f != "html"]
        err.print("[yellow]report.html skipped: its plots need matplotlib (pip install 'cuda-agent[bench]')[/]")
    rep = build_report(records, info, baselines)
    for warning in rep.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    header, rows = paper_table(rep)
    table = Table(title="KernelBench table (ours / paper)")
    for h in header:
        table.add_column(h)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for path in write_reports(rep, out_dir, formats):
        console.print(f"wrote {path}")


def _load_run(run: Path):  # type: ignore[no-untyped-def]
    """`load_run`, its errors (no run there, another run's description) said as usage errors."""
    from .store import load_run

    try:
        return load_run(run)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc))


def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@bench_app.command("report")
def report_cmd(
    run: Path = typer.Argument(..., help="run directory (or its results.jsonl)"),
    out: Optional[Path] = typer.Option(None, help="where to write (default: the run directory)"),
    fmt: Optional[list[str]] = typer.Option(None, "--format", help="md, html, json (repeatable; default all)"),
    kernelbench_timing: Optional[Path] = typer.Option(None, help="KernelBench timing folder/file to compare with"),
) -> None:
    """Write the Markdown / HTML / JSON reports of a run."""
    target = out or (run if run.is_dir() else run.parent)
    _write_reports(run, target, fmt or ["md", "html", "json"], kernelbench_timing)


@bench_app.command("compare")
def compare_cmd(
    run_a: Path = typer.Argument(..., help="run A (directory or results.jsonl)"),
    run_b: Path = typer.Argument(..., help="run B"),
    json_out: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
    all_tasks: bool = typer.Option(False, "--all", help="list unchanged tasks too"),
) -> None:
    """Per-task and aggregate differences of B relative to A."""
    from .compare import compare_runs

    info_a, rec_a = _load_run(run_a)
    info_b, rec_b = _load_run(run_b)

    def suite(info):  # type: ignore[no-untyped-def]
        return {n: info.levels.get(n) for n in info.tasks} if info and info.tasks else None

    cfg = (info_b or info_a).config if (info_b or info_a) else None
    kw = {"margin": cfg.margin, "confidence": cfg.timing.confidence} if cfg else {}
    cmp = compare_runs(rec_a, rec_b, str(run_a), str(run_b), suite(info_a), suite(info_b), **kw)
    if json_out:
        print(cmp.model_dump_json(indent=1))
        return
    agg = Table(title=f"over {cmp.common} common task(s): A = {run_a}, B = {run_b}")
    for col in ("metric", "A", "B", "B - A"):
        agg.add_column(col, justify="right" if col != "metric" else "left")
    ma, mb = cmp.metrics_a.overall, cmp.metrics_b.overall
    for name in ("compiled_rate", "pass_rate", "faster_than_eager_rate", "faster_than_compile_rate"):
        va, vb = getattr(ma, name), getattr(mb, name)
        agg.add_row(name.replace("_", " "), f"{100 * va:.1f}%", f"{100 * vb:.1f}%", f"{100 * (vb - va):+.1f} pt")
    for name in ("geomean_vs_eager", "geomean_vs_compile"):
        va, vb = getattr(ma, name), getattr(mb, name)
        delta = f"{vb / va:.2f}x" if va and vb else "-"
        agg.add_row(name.replace("_", " "), f"{va:.2f}x" if va else "-", f"{vb:.2f}x" if vb else "-", delta)
    console.print(agg)
    console.print("changes: " + ", ".join(f"{k} {v}" for k, v in sorted(cmp.counts.items())))
    console.print("faster / slower: B's speedup interval clears A's by the margin (the reward's rule); "
                  "'noisy': an interval too wide to resolve the margin")
    per = Table(title="per task")
    per.add_column("task", overflow="fold", min_width=12)  # a name is what a person copies: folded, never cut
    for col in ("change", "reward A", "reward B", "vs eager A", "vs eager B", "B/A (point)", "noise"):
        per.add_column(col)

    def x(v: float | None, bounds: tuple[float, float] | None = None) -> str:
        if v is None:
            return "-"
        return f"{v:.2f}" + (f" [{bounds[0]:.2f}, {bounds[1]:.2f}]" if bounds and bounds[1] < 1e6 else "")

    shown = [d for d in cmp.tasks if all_tasks or d.change not in ("same",)]
    for d in shown:
        per.add_row(d.task, d.change, "-" if d.reward_a is None else f"{d.reward_a:+d}",
                    "-" if d.reward_b is None else f"{d.reward_b:+d}", x(d.speedup_vs_eager_a, d.bounds_vs_eager_a),
                    x(d.speedup_vs_eager_b, d.bounds_vs_eager_b), x(d.ratio_vs_eager),
                    "noisy" if d.high_variance else "")
    if shown:
        console.print(per)
    elif cmp.tasks:  # an empty table reads as a failure: say why it is empty
        console.print(f"per task: no differences in {len(cmp.tasks)} task(s) (--all lists them)")
    else:
        console.print("per task: the two runs have no task in common")


@bench_app.command("export-timing")
def export_timing_cmd(
    run: Path = typer.Argument(..., help="run directory (or its results.jsonl)"),
    out: Path = typer.Argument(..., help="folder for baseline_time_torch*.json"),
) -> None:
    """Write the run's measured eager / torch.compile baselines in KernelBench's timing layout."""
    from .kernelbench_timing import export_kernelbench_timing

    info, records = _load_run(run)
    mode = f"inductor_{info.config.compile_mode}" if info and info.config.compile_mode else "inductor_default"
    for path in export_kernelbench_timing(records, out, compile_mode=mode):
        console.print(f"wrote {path}")
