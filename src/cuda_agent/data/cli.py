"""`cuda-agent data ...`: catalogue, synth, audit, report, similarity. Heavy imports stay inside
the commands so `cuda-agent --help` stays fast."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..exit_codes import ExitCode, OneLineErrors, checked_backend, describe, fail
from .canonical import DEFAULT_VERDICTS, VERDICTS

console = Console()
err = Console(stderr=True)
data_app = typer.Typer(no_args_is_help=True, cls=OneLineErrors, rich_markup_mode=None,
                       help="Synthesise and audit Ops-6K-style task data sets.")


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")


_ATOL_HELP = "absolute tolerance of the eager vs torch.compile check"
_RTOL_HELP = "relative tolerance of the eager vs torch.compile check"
_QUIET_HELP = ("hold every worker's device work off a running timer: consistent runtimes when several workers "
               "share a GPU, at a large cost in tasks per hour (docs/data.md)")


def _filters(window: Optional[tuple[float, float]], compile_check: bool, compile_backend: str, atol: float,
             rtol: float, quiet_timing: bool):
    from .config import FilterConfig

    return FilterConfig(window_ms=window, compile=compile_check, compile_backend=compile_backend, atol=atol, rtol=rtol,
                        quiet_timing=quiet_timing)


def _devices(text: Optional[str]) -> Optional[list[int]]:
    if not text:
        return None
    try:
        return [int(d) for d in text.split(",") if d.strip()]
    except ValueError:
        raise fail(f"--devices takes GPU indices separated by commas, got {text!r}")


@data_app.command()
def catalogue(
    refresh: bool = typer.Option(False, help="probe again even if a cached catalogue exists"),
    transformers: Optional[bool] = typer.Option(None, "--transformers/--no-transformers",
                                                help="include transformers layers (default: when installed)"),
    out: Optional[Path] = typer.Option(None, help="also write the catalogue JSON here"),
    show: int = typer.Option(0, help="list this many usable operators"),
    json_out: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Crawl and probe the installed operators (cached per library versions)."""
    from rich.progress import Progress

    from .catalogue import build_catalogue

    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("probing operators", total=None)
        cat = build_catalogue(include_transformers=transformers, refresh=refresh,
                              progress=lambda i, n, spec: bar.update(task, completed=i, total=n,
                                                                     description=f"probing {spec.name[:40]}"))
    if out:
        cat.save(out)
    summary = cat.summary()
    if json_out:
        print(json.dumps(summary))
        return
    console.print(f"[bold]{summary['usable']}[/] usable of {summary['probed']} probed operators "
                  f"(torch {cat.torch_version}, transformers {cat.transformers_version or 'not included'}); "
                  f"probing took {cat.seconds:.0f} s")
    table = Table(title="usable by category")
    table.add_column("category")
    table.add_column("operators", justify="right")
    for k, v in sorted(summary["by_category"].items(), key=lambda kv: -kv[1]):
        table.add_row(k, str(v))
    console.print(table)
    console.print(f"stochastic (excluded): {', '.join(summary['stochastic'])}")
    for op in cat.usable()[:show]:
        console.print(f"  {op.name}  [dim]{op.category}, ranks {op.ranks}[/]")


@data_app.command()
def synth(
    out: Path = typer.Argument(..., help="output directory (resumed if it holds a run with the same settings)"),
    count: int = typer.Option(100, help="accepted tasks wanted"),
    seed: int = typer.Option(0, help="seed of the plan sampler (same seed and settings: same candidates)"),
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    workers: int = typer.Option(1, help="worker processes"),
    window: Optional[tuple[float, float]] = typer.Option(None, help="eager runtime window in ms (default: 1 100 "
                                                         "on GPU, 1 50 on CPU)"),
    eval_set: list[str] = typer.Option([], help="tasks to keep away from (e.g. a KernelBench checkout); repeatable"),
    threshold: float = typer.Option(0.9, help="AST similarity at or above which a task is rejected"),
    compile_check: bool = typer.Option(True, "--compile/--no-compile", help="eager vs torch.compile check"),
    compile_backend: str = typer.Option("inductor", help="torch.compile backend for the check"),
    atol: float = typer.Option(1e-2, help=_ATOL_HELP), rtol: float = typer.Option(1e-2, help=_RTOL_HELP),
    quiet_timing: bool = typer.Option(False, "--quiet-timing", help=_QUIET_HELP),
    max_candidates: Optional[int] = typer.Option(None, help="stop after this many candidates"),
    time_budget: Optional[float] = typer.Option(None, help="stop dispatching after this many seconds"),
    timeout: float = typer.Option(300.0, help="seconds per candidate"),
    transformers: Optional[bool] = typer.Option(None, "--transformers/--no-transformers",
                                                help="compose transformers layers too (default: when installed)"),
    generator: str = typer.Option("catalogue", help="catalogue (sampled plans) or llm (the agent's policy writes "
                                  "the code; see docs/data.md)"),
    llm_kind: Optional[str] = typer.Option(None, help="--generator llm: openai | anthropic | local (default: as "
                                           "`cuda-agent optimize` picks it)"),
    llm_model: Optional[str] = typer.Option(None, help="--generator llm: model id"),
    llm_base_url: Optional[str] = typer.Option(None, help="--generator llm: OpenAI-compatible endpoint"),
    report: bool = typer.Option(True, "--report/--no-report", help="write report.md with plots at the end"),
    devices: Optional[str] = typer.Option(None, help="GPU indices to spread the workers over, e.g. 0,1,2,3"),
) -> None:
    """Generate an Ops-6K-style data set: parquet + JSONL, every reject explained."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .config import ComposeConfig, SynthConfig
    from .report import synth_report
    from .store import StoreError
    from .synth import synthesize

    try:
        config = SynthConfig(count=count, seed=seed, backend=backend and checked_backend(backend), workers=workers, max_candidates=max_candidates,
                             time_budget_s=time_budget, candidate_timeout_s=timeout, similarity_threshold=threshold,
                             eval_sets=eval_set, generator=generator, devices=_devices(devices),
                             compose=ComposeConfig(include_transformers=transformers),
                             filters=_filters(window, compile_check, compile_backend, atol, rtol, quiet_timing))
    except ValueError as exc:
        raise fail(describe(exc))
    policy = None
    if generator == "llm":
        from .llm import default_policy

        policy = default_policy(llm_kind, llm_model, llm_base_url)
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[info]}")]
    try:
        with Progress(*columns, console=err) as bar:
            task = bar.add_task("accepted", total=count, info="building the operator catalogue")

            def show(stats) -> None:
                top = ", ".join(f"{r} {n}" for r, n in stats.reasons.most_common(3))
                bar.update(task, completed=stats.accepted,
                           info=f"{stats.candidates} candidates, {stats.accepted_per_hour:.0f}/h; rejects: {top}")

            stats = synthesize(out, config, progress=show, policy=policy)
    except StoreError as exc:
        raise fail(str(exc))
    summary = stats.as_dict()
    console.print(f"[bold]{stats.accepted}[/] accepted of {stats.candidates} candidates in {stats.elapsed_s:.0f} s "
                  f"({summary['accepted_per_hour']:.0f} accepted/hour) -> {out}/tasks.parquet, tasks.jsonl")
    table = Table(title="reject reasons")
    table.add_column("reason")
    table.add_column("candidates", justify="right")
    table.add_column("rate", justify="right")
    for reason, n in stats.reasons.most_common():
        table.add_row(reason, str(n), f"{n / max(stats.candidates, 1):.1%}")
    console.print(table)
    if report:
        console.print(f"report: {synth_report(out)}")


@data_app.command()
def audit(
    dataset: str = typer.Argument(..., help="a parquet / JSONL table, a directory of task files, or a HF dataset id"),
    out: Optional[Path] = typer.Option(None, help="per-row results (JSONL; re-running resumes). Default: "
                                       "audit-<name>.jsonl here"),
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    workers: int = typer.Option(1, help="worker processes"),
    window: Optional[tuple[float, float]] = typer.Option(None, help="eager runtime window in ms"),
    eval_set: list[str] = typer.Option([], help="evaluation tasks for the contamination check; repeatable"),
    threshold: float = typer.Option(0.9, help="AST similarity at or above which a row fails"),
    compile_check: bool = typer.Option(True, "--compile/--no-compile", help="eager vs torch.compile check"),
    compile_backend: str = typer.Option("inductor", help="torch.compile backend for the check"),
    atol: float = typer.Option(1e-2, help=_ATOL_HELP), rtol: float = typer.Option(1e-2, help=_RTOL_HELP),
    quiet_timing: bool = typer.Option(False, "--quiet-timing", help=_QUIET_HELP),
    timeout: float = typer.Option(300.0, help="seconds per row"),
    limit: Optional[int] = typer.Option(None, help="audit only the first N rows"),
    sample: Optional[int] = typer.Option(None, help="audit N rows drawn at random under --seed (the same rows for "
                                         "the same file; use the same N on two sets to compare their pass rates)"),
    seed: int = typer.Option(0, help="seed of --sample"),
    show: int = typer.Option(20, help="failing rows to list"),
    json_out: bool = typer.Option(False, "--json", help="print the totals as JSON"),
    devices: Optional[str] = typer.Option(None, help="GPU indices to spread the workers over, e.g. 0,1,2,3"),
) -> None:
    """Re-run every filter on an existing data set; report failures per row and in total.
    Exit 0 when every row passes, 1 when some fail."""
    from rich.progress import Progress

    from ..tasks import TaskError
    from .audit import audit as run_audit
    from .report import audit_report

    stem = Path(dataset).stem if Path(dataset).exists() else dataset.replace("/", "_")
    out = out or Path(f"audit-{stem}.jsonl")
    try:
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task("auditing", total=None)
            summary = run_audit(dataset, out, backend=backend and checked_backend(backend),
                                filters=_filters(window, compile_check, compile_backend, atol, rtol, quiet_timing),
                                eval_sets=eval_set, similarity_threshold=threshold, workers=workers,
                                timeout_s=timeout, limit=limit, devices=_devices(devices), sample=sample,
                                seed=seed, progress=lambda i, n, row: bar.update(task, completed=i, total=n))
    except (TaskError, ValueError) as exc:
        raise fail(str(exc))
    report = audit_report(out)
    totals = summary.as_dict()
    if json_out:
        print(json.dumps(totals))
    else:
        chosen = "" if summary.rows >= summary.dataset_rows else (
            f" (of {summary.dataset_rows} in the set: " +
            (f"a random sample, seed {summary.sample_seed})" if summary.sample_seed is not None else "the first rows)"))
        console.print(f"[bold]{summary.passed}[/] of {summary.rows} rows{chosen} pass every filter "
                      f"({totals['pass_rate']:.1%}); per-row results: {out}; report: {report}")
        if summary.rows_failing_filter:
            rates = Table(title="pass rate by filter (filters every row passed are not listed)")
            rates.add_column("filter")
            rates.add_column("rows failing", justify="right")
            rates.add_column("pass rate", justify="right")
            for name, n in summary.rows_failing_filter.most_common():
                rates.add_row(name, str(n), f"{summary.pass_rate_by_filter[name]:.1%}")
            console.print(rates)
        table = Table(title="failures by reason (a row may fail several)")
        table.add_column("reason")
        table.add_column("rows", justify="right")
        for reason, n in summary.failed_by_reason.most_common():
            table.add_row(reason, str(n))
        console.print(table)
        from ..storage import read_jsonl

        failing = [r for r in read_jsonl(out) if not r["ok"]][:show]
        for r in failing:
            reasons = ", ".join(sorted({f["reason"] for f in r["failures"]}))
            console.print(f"  {escape(r['name'])}: [red]{escape(reasons)}[/] "
                          f"[dim]{escape(r['failures'][0]['detail'][:100])}[/]")
    raise typer.Exit(int(ExitCode.OK if summary.passed == summary.rows else ExitCode.FAILED))


@data_app.command()
def report(run_dir: Path = typer.Argument(..., help="a synthesis output directory")) -> None:
    """(Re)write report.md with plots for a synthesis run."""
    from .report import synth_report

    if not (run_dir / "candidates.jsonl").is_file():
        raise fail(f"{run_dir} has no candidates.jsonl (not a synthesis output directory)")
    console.print(f"report: {synth_report(run_dir)}")


@data_app.command("set-report")
def set_report(
    dataset: str = typer.Argument(..., help="a parquet / JSONL table or a directory of task files"),
    out: Path = typer.Option(Path("."), help="folder for dataset_report.md and nearest_eval.jsonl"),
    eval_set: list[str] = typer.Option([], help="evaluation tasks (e.g. a KernelBench checkout); repeatable"),
    audit_file: Optional[Path] = typer.Option(None, "--audit", help="an audit JSONL of the same set"),
    sample: int = typer.Option(100, help="rows in the readable sample"),
) -> None:
    """Distributions beside Ops-6K, the nearest evaluation task of every row, a readable sample."""
    from ..tasks import TaskError
    from .set_report import dataset_report

    try:
        path = dataset_report(dataset, out, eval_sets=eval_set, audit_jsonl=audit_file, sample=sample)
    except TaskError as exc:
        raise fail(str(exc))
    console.print(f"report: {path}")


@data_app.command()
def similarity(
    task: Path = typer.Argument(..., help="the task(s) to screen: a .py file, or a directory / table of tasks "
                                "(one verdict per row)"),
    against: list[str] = typer.Argument(..., help="evaluation tasks to compare with (files, dirs, tables; e.g. a "
                                        "KernelBench checkout)"),
    top: int = typer.Option(5, help="for a single task: how many of the most similar (AST) to list"),
    threshold: float = typer.Option(0.9, help="AST similarity at or above which a task is a near-copy"),
    verdicts: str = typer.Option(",".join(DEFAULT_VERDICTS), help="canonical-form rules that flag a task, comma "
                                 f"separated, from {', '.join(VERDICTS)}; 'none' for AST similarity alone "
                                 "(docs/data.md: Choosing the verdicts)"),
    json_out: bool = typer.Option(False, "--json", help="print the verdicts as JSON"),
) -> None:
    """The contamination verdict of each task against some evaluation tasks: AST similarity and the
    canonical-form rules (same_ops, same_primitives, eval_composition), with the matched evaluation
    task and the rule that matched, the same screen synthesis and the audit apply.
    Exit 0 when no task is flagged, 1 when some task is flagged or an input could not be loaded."""
    from ..tasks import TaskError, load_tasks
    from .screen import EvalSet
    from .canonical import canonical_form
    from .similarity import SimilarityError, fingerprint, similarity as score

    rules = [] if verdicts.strip().lower() == "none" else [v.strip() for v in verdicts.split(",") if v.strip()]
    try:
        evals = EvalSet([], rules)
    except ValueError as exc:
        raise fail(str(exc))
    try:
        if task.suffix == ".py" and task.is_file():
            queries, query_rejected = [(task.name, str(task), task.read_text())], []
        else:
            loaded = load_tasks(str(task), on_error="skip")
            queries = [(t.name, t.origin, t.source) for t in loaded]
            query_rejected = [str(e) for e in loaded.rejected]
        groups = [load_tasks(src, on_error="skip") for src in against]
    except (OSError, TaskError) as exc:
        raise fail(str(exc))
    rejected = [str(e) for group in groups for e in group.rejected]
    inputs = len(rejected) + sum(len(group) for group in groups)
    for t in (t for group in groups for t in group):
        if not evals.add(t.name, t.source, t.origin):
            rejected.append(f"{t.origin or t.name}: does not parse")
    rows = []
    for name, origin, source in queries:
        try:
            fp = fingerprint(source)
        except SimilarityError as exc:
            if len(queries) == 1:
                raise fail(str(exc))
            query_rejected.append(f"{origin}: {exc}")
            continue
        verdict = evals.screen(fp, canonical_form(source), threshold)
        row = {"name": name, "path": origin, **verdict.as_dict()}
        if len(queries) == 1:
            ranked = sorted(((score(fp, f), n) for f, n in zip(evals.fingerprints, evals.names)), reverse=True)
            row["top"] = [{"name": n, "path": evals.paths.get(n, ""), "ast": round(s, 4)} for s, n in ranked[:top]]
        rows.append((row, verdict))
    flagged = [r for r, v in rows if v.flagged]
    if json_out:
        by_rule: dict[str, int] = {}
        for r in flagged:
            by_rule[r["rule"]] = by_rule.get(r["rule"], 0) + 1
        print(json.dumps({"rows": [r for r, _ in rows], "screened": len(rows), "flagged": len(flagged),
                          "by_rule": by_rule, "verdicts": rules, "threshold": threshold, "eval_tasks": len(evals),
                          "not_loaded": rejected + query_rejected}))
    else:
        for row, verdict in rows:
            for t in row.get("top", []):
                console.print(f"{t['ast']:.3f}  {escape(t['name'])}", highlight=False)
            console.print(_verdict_line(row, verdict), highlight=False, soft_wrap=True)
        if len(rows) > 1:
            console.print(f"[bold]{len(flagged)}[/] of {len(rows)} tasks flagged against {len(evals)} evaluation tasks "
                          f"(rules: ast_similarity >= {threshold}, {', '.join(rules) or 'no canonical rule'})",
                          soft_wrap=True)
    for bad in rejected + query_rejected:
        err.print(f"[yellow]could not load:[/] {escape(bad)}")
    if rejected:
        err.print(f"[red]{len(rejected)} of {inputs} input task(s) could not be loaded and were not compared[/]")
    if query_rejected:
        err.print(f"[red]{len(query_rejected)} of {len(rows) + len(query_rejected)} task(s) to screen could not be "
                  "loaded and were not screened[/]")
    if rejected or query_rejected or flagged:
        raise typer.Exit(int(ExitCode.FAILED))


def _verdict_line(row: dict, verdict) -> str:
    """One task's verdict in a line: FLAGGED with the rule and the matched task(s), or clean with the nearest."""
    if verdict.flagged:
        matched = ", ".join(f"{escape(m.name)} ({escape(m.path)}, AST {m.ast:.3f})" for m in verdict.matched)
        also = escape(f" [also {', '.join(verdict.rules[1:])}]") if len(verdict.rules) > 1 else ""
        return (f"[red]FLAGGED[/] {escape(row['name'])}: {verdict.rule}{also} -> {matched}; "
                f"[dim]{escape(verdict.detail)}[/]")
    parts = []
    if verdict.ast_nearest is not None:
        parts.append(f"AST nearest {escape(verdict.ast_nearest.name)} {verdict.ast_nearest.ast:.3f}")
    if verdict.nearest is not None:
        parts.append(f"operator nearest {escape(verdict.nearest.name)} {verdict.nearest.score:.3f}")
    return f"[green]clean[/] {escape(row['name'])}: {'; '.join(parts) or 'no evaluation task to compare'}"
