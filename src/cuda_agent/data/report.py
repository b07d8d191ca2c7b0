"""Stats reports as Markdown with plots: what a synthesis run made and rejected, what an audit found.

Plots need matplotlib (the `data` extra); without it the report still has every table.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from ..storage import read_jsonl
from ..tasks.loaders import parse_ops


def synth_report(run_dir: str | Path) -> Path:
    """Write `report.md` (+ `plots/*.png`) for a synthesis output directory; returns its path."""
    root = Path(run_dir)
    candidates = read_jsonl(root / "candidates.jsonl")
    tasks = read_jsonl(root / "tasks.jsonl")
    summary = json.loads((root / "summary.json").read_text()) if (root / "summary.json").is_file() else {}
    ops = Counter(op for t in tasks for op in parse_ops(t["ops"]))
    sizes = Counter(len(parse_ops(t["ops"])) for t in tasks)
    sources = Counter(t["data_source"].split("#")[0] for t in tasks)
    reasons = Counter(c["reason"] for c in candidates if c["status"] != "accepted")
    runtimes = [t["runtime_ms"] for t in tasks if t.get("runtime_ms")]
    plots = _plots(root / "plots", ops, sizes, reasons, runtimes)
    n = max(len(candidates), 1)
    lines = ["# Synthesis report", "",
             f"- accepted tasks: **{len(tasks)}** of {len(candidates)} candidates ({len(tasks) / n:.1%})"]
    if summary:
        lines += [f"- elapsed: {summary.get('elapsed_s', 0):.0f} s, throughput: "
                  f"**{summary.get('accepted_per_hour', 0):.0f} accepted tasks/hour**",
                  f"- device: {tasks[0]['device'] if tasks else '?'}; versions: {summary.get('versions', {})}"]
    lines += ["", "## Reject reasons", "", "| reason | candidates | share of all |", "|---|---:|---:|"]
    lines += [f"| {r} | {k} | {k / n:.1%} |" for r, k in reasons.most_common()]
    lines += ["", "## Composition sizes", "", "| operators | tasks | share |", "|---:|---:|---:|"]
    lines += [f"| {k} | {v} | {v / max(len(tasks), 1):.1%} |" for k, v in sorted(sizes.items())]
    lines += ["", "| library | tasks |", "|---|---:|"] + [f"| {k} | {v} |" for k, v in sources.most_common()]
    if runtimes:
        q = sorted(runtimes)
        lines += ["", "## Eager runtime (ms)", "",
                  f"min {q[0]:.2f}, median {q[len(q) // 2]:.2f}, max {q[-1]:.2f} over {len(q)} tasks"]
    lines += ["", f"## Operators ({len(ops)} distinct)", "", "| operator | tasks |", "|---|---:|"]
    lines += [f"| `{op}` | {k} |" for op, k in ops.most_common(40)]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots]
    path = root / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _audit_rows(audit_jsonl: str | Path) -> list[dict[str, Any]]:
    """An audit file's rows, each row once: a resumed audit may repeat one, and its last line wins."""
    return list({r["name"]: r for r in read_jsonl(Path(audit_jsonl))}.values())


def audit_comparison(audits: dict[str, str | Path], out: str | Path) -> Path:
    """Two (or more) audits of equal-size samples side by side: the pass rate in total, per
    filter (share of rows failing it) and per reason, so two sets are compared on one machine
    under one set of filters (issue 30: ours beside Ops-6K)."""
    tables = {label: _audit_rows(p) for label, p in audits.items()}

    def row(name: str, hit: Any) -> str:
        cells = []
        for rows in tables.values():
            k = sum(1 for r in rows if hit(r))
            cells.append(f"{k} ({k / max(len(rows), 1):.1%})")
        return f"| {name} | " + " | ".join(cells) + " |"

    head = ["| | " + " | ".join(tables) + " |", "|---|" + "---:|" * len(tables)]
    lines = ["# Audit side by side", "", *head,
             "| rows audited | " + " | ".join(str(len(rows)) for rows in tables.values()) + " |",
             row("**pass every filter**", lambda r: r["ok"])]
    for title, key in (("Rows failing each filter", "filter"), ("Rows failing for each reason", "reason")):
        values = sorted({f[key] for rows in tables.values() for r in rows for f in r["failures"]})
        lines += ["", f"## {title}", "", *head]
        lines += [row(v, lambda r, v=v: any(f[key] == v for f in r["failures"])) for v in values]
    path = Path(out)
    path.write_text("\n".join(lines) + "\n")
    return path


def audit_report(audit_jsonl: str | Path, out: str | Path | None = None, title: str = "Audit report") -> Path:
    """Markdown totals and the failing rows of an audit JSONL file."""
    rows = _audit_rows(audit_jsonl)
    failed = [r for r in rows if not r["ok"]]
    by_reason = Counter(f["reason"] for r in failed for f in r["failures"])
    n = max(len(rows), 1)
    lines = [f"# {title}", "", f"- rows: {len(rows)}, passed: **{len(rows) - len(failed)}** "
             f"({(len(rows) - len(failed)) / n:.1%}), failed: {len(failed)}", "",
             "| reason | rows | share |", "|---|---:|---:|"]
    lines += [f"| {k} | {v} | {v / n:.1%} |" for k, v in by_reason.most_common()]
    lines += ["", "## Failing rows", "", "| row | reasons | detail |", "|---|---|---|"]
    for r in failed[:200]:
        reasons = ", ".join(sorted({f["reason"] for f in r["failures"]}))
        detail = r["failures"][0]["detail"].replace("|", "/").replace("\n", " ")[:120]
        lines.append(f"| {r['name']} | {reasons} | {detail} |")
    path = Path(out) if out else Path(audit_jsonl).with_suffix(".md")
    path.write_text("\n".join(lines) + "\n")
    return path


def _plots(folder: Path, ops: Counter[str], sizes: Counter[int], reasons: Counter[str],
           runtimes: list[float]) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    made = []

    def bar(name: str, items: list[tuple[Any, int]], title: str, horizontal: bool = False) -> None:
        if not items:
            return
        fig, ax = plt.subplots(figsize=(8, max(3, 0.25 * len(items)) if horizontal else 3.5))
        labels = [str(k) for k, _ in items]
        values = [v for _, v in items]
        if horizontal:
            ax.barh(labels[::-1], values[::-1])
        else:
            ax.bar(labels, values)
            ax.tick_params(axis="x", rotation=30)
        ax.set_title(title)
        fig.tight_layout()
        fig.savefig(folder / f"{name}.png", dpi=90)
        plt.close(fig)
        made.append(folder / f"{name}.png")

    bar("operators", [(k.replace("torch.nn.functional.", "F.").replace("torch.", ""), v)
                      for k, v in ops.most_common(30)], "operators in accepted tasks (top 30)", horizontal=True)
    bar("sizes", sorted(sizes.items()), "operators per accepted task")
    bar("rejects", reasons.most_common(), "reject reasons (candidates)")
    if runtimes:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        lo, hi = math.log10(min(runtimes)), math.log10(max(runtimes))
        bins = [10 ** (lo + (hi - lo + 1e-9) * i / 20) for i in range(21)]
        ax.hist(runtimes, bins=bins)
        ax.set_xscale("log")
        ax.set_xlabel("eager runtime (ms)")
        ax.set_title("runtime of accepted tasks")
        fig.tight_layout()
        fig.savefig(folder / "runtime.png", dpi=90)
        plt.close(fig)
        made.append(folder / "runtime.png")
    return made
