"""Reports of a run: Markdown (the paper's table beside its published numbers), a
self-contained HTML page with plots, and JSON. All three come from one `Report` record.

Everything a candidate controls (reasons, compiler output) is escaped in HTML and kept to
one line in tables.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from .kernelbench_timing import ImportedBaselines, ImportedComparison, compare_with_imported, hardware_warning
from .metrics import CONFIDENCE, MARGIN, BenchMetrics, Metrics, compute_metrics, is_high_variance, speedup_bounds
from .records import RunInfo, TaskRecord, by_sample, primary

# SPEC §5: CUDA Agent paper, KernelBench on Hopper. Rates in %, geomeans vs torch.compile.
PAPER = {
    "CUDA Agent": {"level 1": (100.0, 97.0, 1.87), "level 2": (100.0, 100.0, 2.80), "level 3": (94.0, 90.0, 1.52),
                   "overall": (98.8, 96.8, 2.11)},
    "Claude Opus 4.5": {"overall": (95.2, 66.4, 1.46)},
    "Gemini 3 Pro": {"overall": (91.2, 69.6, 1.42)},
}
PAPER_GEOMEAN_VS_EAGER = 2.60
FORMATS = ("md", "html", "json")


class TaskRow(BaseModel):
    task: str
    level: int | None
    status: str
    reward: int | None = Field(description="None: no record")
    compiled: bool
    correct: bool
    faster_than_eager: bool
    faster_than_compile: bool
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    eager_ms: float | None
    compile_ms: float | None
    candidate_ms: float | None
    tokens: int | None = None
    turns: int | None = None
    slot: str = ""
    bounds_vs_eager: tuple[float, float] | None = Field(default=None, description="speedup interval vs eager")
    high_variance: bool = False
    samples: int = Field(default=0, description="samples recorded for this task")
    samples_correct: int = 0
    compile_error: str | None = Field(default=None, description="the compiler's message when it did not compile")
    summary: str


class Report(BaseModel):
    run: RunInfo | None
    metrics: BenchMetrics
    imported: list[ImportedComparison] = Field(default_factory=list)
    imported_sources: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    tasks: list[TaskRow]


def build_report(records: Sequence[TaskRecord], run: RunInfo | None = None,
                 baselines: ImportedBaselines | None = None) -> Report:
    suite = dict(run.levels) if run and run.levels else {r.task: r.level for r in records}
    if run and run.tasks:
        suite = {n: suite.get(n) for n in run.tasks}
    margin = run.config.margin if run else MARGIN
    confidence = run.config.timing.confidence if run else CONFIDENCE
    latest, samples = primary(records), by_sample(records)
    rows = [_row(name, level, latest.get(name), samples.get(name, {}), margin, confidence)
            for name, level in suite.items()]
    imported, sources, warnings = [], [], []
    if baselines is not None:
        imported = compare_with_imported(records, suite, baselines, margin)
        sources = [t.source for t in (baselines.eager, baselines.compile) if t is not None]
        warning = hardware_warning(baselines, records)
        if warning:
            warnings.append(warning)
    metrics = compute_metrics(records, suite, n_samples=len(run.samples) if run else 1, margin=margin,
                              confidence=confidence)
    return Report(run=run, metrics=metrics, imported=imported, imported_sources=sources, warnings=warnings,
                  tasks=rows)


def _row(name: str, level: int | None, r: TaskRecord | None, samples: dict[int, TaskRecord], margin: float,
         confidence: float) -> TaskRow:
    res = r.result if r else None
    bounds = speedup_bounds(r, "eager", confidence)
    return TaskRow(task=name, level=level, status=r.status if r else "missing",
                   reward=r.reward if r and r.status != "skipped" else None,
                   bounds_vs_eager=bounds, high_variance=is_high_variance(bounds, margin), samples=len(samples),
                   samples_correct=sum(s.correct for s in samples.values()),
                   compile_error=r.compile_error if r else None,
                   compiled=bool(r and r.compiled), correct=bool(r and r.correct),
                   faster_than_eager=bool(res and res.correct and res.faster_than_eager),
                   faster_than_compile=bool(res and res.correct and res.faster_than_compile),
                   speedup_vs_eager=r.speedup_vs_eager if r else None,
                   speedup_vs_compile=r.speedup_vs_compile if r else None,
                   eager_ms=res.time_ms.eager if res else None, compile_ms=res.time_ms.compile if res else None,
                   candidate_ms=res.time_ms.candidate if res else None,
                   tokens=r.episode.tokens if r and r.episode else None,
                   turns=r.episode.turns if r and r.episode else None,
                   slot=r.slot if r else "", summary=_one_line(_summary(r)))


def _summary(r: TaskRecord | None) -> str:
    if r is None:
        return "no record (run incomplete)"
    err = r.compile_error
    if err is not None and r.mode == "single_file":
        lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
        hit = next((ln for ln in lines if "error" in ln.lower() and "Traceback" not in ln), lines[0] if lines else "")
        return f"did not compile (its load_inline build): {hit}"
    return r.summary


def write_reports(report: Report, out_dir: str | Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write report.md / report.html / report.json into `out_dir`; return the paths."""
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown report format(s) {sorted(unknown)}; choose from {', '.join(FORMATS)}")
    render = {"md": to_markdown, "html": to_html, "json": lambda r: r.model_dump_json(indent=1)}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        (out / f"report.{fmt}").write_text(render[fmt](report))
    return [out / f"report.{fmt}" for fmt in formats]


# ---- formatting helpers ------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _one_line(text: str, width: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(s: str) -> str:
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ---- tables (shared by Markdown and HTML) ---------------------------------------------------
NOT_TIMED = "not timed"
FAST_P_NOTE = ("A task counts in fast_p when its whole confidence interval of the speedup is above p by the margin "
               "(the reward's rule), so identical code is never counted; `point fast_1` is KernelBench's own "
               "definition (point estimate > 1, noise included). High variance: tasks whose interval vs eager is "
               "too wide to resolve the margin.")


def _timed(report: Report) -> tuple[bool, bool]:
    """(speed vs eager measured, speed vs torch.compile measured) in this run."""
    if report.run is None:
        return True, True
    cfg = report.run.config
    return cfg.measure, cfg.measure and cfg.compile_mode is not None


def paper_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """The paper's layout: per level pass rate, faster-than-compile rate, geomean vs compile,
    ours beside CUDA Agent's published numbers."""
    header = ["", "tasks", "pass (ours / paper)", "faster than compile (ours / paper)",
              "geomean vs compile (ours / paper)"]
    rows = []
    _, timed_c = _timed(report)
    for m in [*report.metrics.levels, report.metrics.overall]:
        paper = PAPER["CUDA Agent"].get(m.scope)
        ftc = _pct(m.faster_than_compile_rate) if timed_c else NOT_TIMED
        geo = _x(m.geomean_vs_compile) if timed_c else NOT_TIMED
        rows.append([m.scope, str(m.tasks),
                     f"{_pct(m.pass_rate)} / {f'{paper[0]:.1f}%' if paper else '-'}",
                     f"{ftc} / {f'{paper[1]:.1f}%' if paper else '-'}",
                     f"{geo} / {f'{paper[2]:.2f}x' if paper else '-'}"])
    return header, rows


def models_table(report: Report) -> tuple[list[str], list[list[str]]]:
    o = report.metrics.overall
    timed_e, timed_c = _timed(report)
    header = ["overall", "pass", "faster than compile", "geomean vs compile", "geomean vs eager"]
    rows = [["this run", _pct(o.pass_rate), _pct(o.faster_than_compile_rate) if timed_c else NOT_TIMED,
             _x(o.geomean_vs_compile) if timed_c else NOT_TIMED, _x(o.geomean_vs_eager) if timed_e else NOT_TIMED]]
    for name, scopes in PAPER.items():
        p, f, g = scopes["overall"]
        rows.append([f"{name} (paper)", f"{p:.1f}%", f"{f:.1f}%", f"{g:.2f}x",
                     f"{PAPER_GEOMEAN_VS_EAGER:.2f}x" if name == "CUDA Agent" else "-"])
    return header, rows


def metrics_table(report: Report) -> tuple[list[str], list[list[str]]]:
    header = ["scope", "tasks", "missing", "compiled", "pass", "faster than eager", "faster than compile",
              "geomean vs eager (n)", "geomean vs compile (n)"]
    te, tc = _timed(report)
    rows = [[m.scope, str(m.tasks), str(m.missing), _pct(m.compiled_rate), _pct(m.pass_rate),
             _pct(m.faster_than_eager_rate) if te else NOT_TIMED, _pct(m.faster_than_compile_rate) if tc else NOT_TIMED,
             f"{_x(m.geomean_vs_eager)} ({m.geomean_vs_eager_n})" if te else NOT_TIMED,
             f"{_x(m.geomean_vs_compile)} ({m.geomean_vs_compile_n})" if tc else NOT_TIMED]
            for m in _scopes(report)]
    return header, rows


def fast_p_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """Noise-aware fast_p (the reward's rule) and, beside it, KernelBench's point estimate."""
    ps = [f"{p:g}" for p in report.metrics.fast_p]
    header = ["scope", "baseline", *[f"fast_{p}" for p in ps], "point fast_1 (KernelBench)", "high variance"]
    rows = []
    te, tc = _timed(report)
    for m in _scopes(report):
        rows.append([m.scope, "eager", *[_pct(m.fast_p_eager.get(p)) if te else NOT_TIMED for p in ps],
                     _pct(m.fast_p_eager_point.get("1")) if te else NOT_TIMED, str(m.high_variance) if te else "-"])
        rows.append([m.scope, "compile", *[_pct(m.fast_p_compile.get(p)) if tc else NOT_TIMED for p in ps],
                     _pct(m.fast_p_compile_point.get("1")) if tc else NOT_TIMED, "-"])
    return header, rows


def pass_k_table(report: Report) -> tuple[list[str], list[list[str]]] | None:
    """pass@k per scope, when a run evaluated several samples per task."""
    if report.metrics.overall.samples_max <= 1:
        return None
    ks = [str(k) for k in report.metrics.pass_k]
    header = ["scope", "tasks", "samples per task", *[f"pass@{k}" for k in ks]]
    rows = [[m.scope, str(m.tasks),
             f"{m.samples_min}" + (f"-{m.samples_max}" if m.samples_max != m.samples_min else ""),
             *[_pct(m.pass_at_k.get(k)) for k in ks]] for m in _scopes(report)]
    return header, rows


def skipped_table(report: Report) -> tuple[list[str], list[list[str]]] | None:
    rows = [[t.task, t.summary] for t in report.tasks if t.status == "skipped"]
    return (["task (not counted: this machine cannot run it)", "reason"], rows) if rows else None


def compile_errors(report: Report) -> list[tuple[str, str]]:
    """(task, the compiler's message) for every task that did not compile."""
    return [(t.task, t.compile_error) for t in report.tasks if t.compile_error]


def rewards_table(report: Report) -> tuple[list[str], list[list[str]]]:
    header = ["scope", "reward -1", "reward 1", "reward 2", "reward 3", "missing", "statuses"]
    rows = [[m.scope, *[str(m.rewards.get(k, 0)) for k in ("-1", "1", "2", "3", "missing")],
             ", ".join(f"{k} {v}" for k, v in sorted(m.statuses.items()))] for m in _scopes(report)]
    return header, rows


def episodes_table(report: Report) -> tuple[list[str], list[list[str]]] | None:
    scopes = [m for m in _scopes(report) if m.episodes]
    if not scopes:
        return None
    header = ["scope", "episodes", "tokens mean", "tokens median", "tokens total", "turns mean", "turns median"]

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:,.0f}" if isinstance(x, int) or x >= 100 else f"{x:.1f}"

    rows = [[m.scope, str(m.episodes), num(m.tokens_mean), num(m.tokens_median), num(m.tokens_total),
             num(m.turns_mean), num(m.turns_median)] for m in scopes]
    return header, rows


def imported_table(report: Report) -> tuple[list[str], list[list[str]]] | None:
    if not report.imported:
        return None
    header = ["scope", "matched eager / compile", "faster than eager", "faster than compile", "geomean vs eager",
              "geomean vs compile", "fast_1 (eager)", "our eager / theirs"]
    rows = [[c.scope, f"{c.matched_eager} / {c.matched_compile}", _pct(c.faster_than_eager_rate),
             _pct(c.faster_than_compile_rate), _x(c.geomean_vs_eager), _x(c.geomean_vs_compile),
             _pct(c.fast_p_eager.get("1")), _x(c.eager_ratio)] for c in report.imported]
    return header, rows


def _bounds(t: TaskRow) -> str:
    if t.bounds_vs_eager is None:
        return "-"
    lo, hi = t.bounds_vs_eager
    text = f"{lo:.2f}-{hi:.2f}" if hi < 1e6 and lo > 0.005 else "unbounded"
    return text + (" (high variance)" if t.high_variance else "")


def tasks_table(report: Report) -> tuple[list[str], list[list[str]]]:
    conf = f"{100 * report.metrics.confidence:g}%"
    header = ["task", "level", "reward", "vs eager", f"vs eager {conf} interval", "vs compile", "eager ms",
              "compile ms", "candidate ms", "result"]
    rows = [[t.task, "-" if t.level is None else str(t.level), "-" if t.reward is None else f"{t.reward:+d}",
             _x(t.speedup_vs_eager), _bounds(t), _x(t.speedup_vs_compile), _ms(t.eager_ms), _ms(t.compile_ms),
             _ms(t.candidate_ms), t.summary] for t in report.tasks]
    return header, rows


def _scopes(report: Report) -> list[Metrics]:
    return [*report.metrics.levels, report.metrics.overall]


def _run_lines(report: Report) -> list[str]:
    run = report.run
    if run is None:
        return ["(no run.json: computed from the results file alone)"]
    cfg = run.config
    lines = [f"suite: `{run.suite}`",
             f"candidates: {'policy `' + run.policy + '`' if run.policy else '`' + run.solutions + '`'}",
             f"backend: {run.backend}; devices seen: {', '.join(_devices(report)) or '-'}",
             f"evaluation: {cfg.trials} correctness trials, tolerance profile {cfg.tolerance}"
             + (f" (atol {cfg.atol:g} / rtol {cfg.rtol:g})" if cfg.tolerance == "paper" else
                " (1e-4 fp32, 1e-2 fp16 / bf16)")
             + f", precision {run.precision or 'as each task is written'}, "
             f"timing {'on' if cfg.measure else 'off'}, torch.compile mode {cfg.compile_mode or 'off'}, "
             f"margin {cfg.margin:g} at {100 * cfg.timing.confidence:g}% confidence"]
    if run.subset:
        lines.append(f"subset: KernelBench `{run.subset}`")
    if len(run.samples) > 1:
        lines.append(f"samples per task: {len(run.samples)} ({run.samples[0]}-{run.samples[-1]})")
    return lines


def _devices(report: Report) -> list[str]:
    return sorted({t.slot for t in report.tasks if t.slot})


# ---- Markdown and HTML: the same sections -----------------------------------------------------------
Table = tuple[list[str], list[list[str]]]


def _sections(report: Report) -> list[tuple[str, str, list[Table], bool]]:
    """(title, note, tables, last column wide) of each section both formats show, in order; a
    section whose table does not apply to this run is left out."""
    imported = ("Sources: " + ", ".join(f"`{s}`" for s in report.imported_sources) + ". Candidate mean times "
                "against the imported means; meaningful only on the same hardware (last column).")
    sections = [
        ("KernelBench table (paper layout)", "Rates are over all tasks of the suite; paper numbers are CUDA "
         "Agent on Hopper (SPEC §5).", [paper_table(report), models_table(report)], False),
        ("All metrics", "", [metrics_table(report)], False),
        ("fast_p (share of all tasks that are correct with speedup > p)", FAST_P_NOTE, [fast_p_table(report)],
         False),
        ("Rewards", "", [rewards_table(report)], False),
        ("pass@k over samples (unbiased estimator, per task, averaged)", "", [pass_k_table(report)], False),
        ("Skipped (not charged to the candidate)", "", [skipped_table(report)], True),
        ("Tokens and turns per task (policy episodes)", "", [episodes_table(report)], False),
        ("Against imported KernelBench baselines", imported, [imported_table(report)], False),
    ]
    return [s for s in sections if None not in s[2]]  # type: ignore[misc]


def to_markdown(report: Report) -> str:
    parts = ["# Benchmark report", "", *[f"- {line}" for line in _run_lines(report)], "",
             *[f"> **Warning:** {w}\n" for w in report.warnings]]
    for title, note, tables, _ in [*_sections(report), ("Per task", "", [tasks_table(report)], True)]:
        parts += [f"## {title}", "", *([note, ""] if note else [])]
        for table in tables:
            parts += [_md_table(*table), ""]
    errors = compile_errors(report)
    if errors:
        parts += ["## Compile errors", ""]
        for task, text in errors:
            parts += [f"### {task}", "", "~~~~", text.replace("~~~~", "~ ~ ~ ~"), "~~~~", ""]
    return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}td.wide{text-align:left;max-width:480px}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}h2{margin-top:1.6em}code{background:#f6f6f6}"""


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], wide_last: bool = False) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = [f"<td{' class=wide' if wide_last and i == len(row) - 1 else ''}>{html.escape(c)}</td>"
                 for i, c in enumerate(row)]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _html_section(title: str, note: str, tables: list[Table], wide: bool) -> list[str]:
    return [f"<h2>{html.escape(title)}</h2>", *([f"<p>{html.escape(note)}</p>"] if note else []),
            *[_html_table(*table, wide_last=wide) for table in tables]]


def to_html(report: Report) -> str:
    from .plots import fast_p_curve, per_task_bars, speedup_distribution

    margin = report.run.config.margin if report.run else 0.05
    figures = [("Speedup distribution per level", speedup_distribution(report.tasks, margin)),
               ("fast_p curve", fast_p_curve(report.tasks)),
               ("Per task", per_task_bars(report.tasks))]
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>cuda-agent benchmark</title>",
             f"<style>{_CSS}</style></head><body><h1>Benchmark report</h1><ul>",
             *[f"<li>{html.escape(line)}</li>" for line in _run_lines(report)], "</ul>",
             *[f"<p><strong>Warning:</strong> {html.escape(w)}</p>" for w in report.warnings]]
    for section in _sections(report):
        parts += _html_section(*section)
    for title, uri in figures:
        parts += [f"<h2>{html.escape(title)}</h2>", f"<img alt='{html.escape(title)}' src='{uri}'>"]
    parts += _html_section("Per task", "", [tasks_table(report)], True)
    errors = compile_errors(report)
    if errors:
        parts.append("<h2>Compile errors</h2>")
        parts += [f"<h3>{html.escape(task)}</h3><pre>{html.escape(text)}</pre>" for task, text in errors]
    parts += ["<script type='application/json' id='report-data'>",
              json.dumps(report.model_dump(mode="json")).replace("<", "\\u003c"), "</script></body></html>"]
    return "\n".join(parts)
