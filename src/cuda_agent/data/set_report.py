"""`dataset_report()`: what a task set contains, read as a lab would before training on it:
distributions beside SPEC §3's Ops-6K, each row's nearest evaluation task, the audit's verdicts
when given, and a readable sample. Nothing here runs task code.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from .canonical import VERDICTS, canonical_form
from .config import OPS6K_MIX
from ..storage import read_jsonl

OPS6K_TRANSFORMERS_SHARE = 1.2  # % of Ops-6K rows that use transformers (SPEC §3)
OPS6K_ROWS = 6000
SCORE_BINS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)


def dataset_report(dataset: str | Path, out_dir: str | Path, *, eval_sets: list[str] | None = None,
                   audit_jsonl: str | Path | None = None, sample: int = 100, seed: int = 0) -> Path:
    """Write `out_dir/dataset_report.md` and `out_dir/nearest_eval.jsonl`; returns the report path."""
    from ..tasks import load_tasks
    from .screen import EvalSet

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = list(load_tasks(str(dataset), on_error="skip"))
    evals = EvalSet(eval_sets) if eval_sets else None
    rows = [_row(t, evals) for t in tasks]
    with (out / "nearest_eval.jsonl").open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps({k: r[k] for k in ("name", "canonical_ops", "nearest_eval", "eval_score",
                                                  "eval_order", "eval_verdict", "eval_detail")}) + "\n")
    audit = {r["name"]: r for r in read_jsonl(audit_jsonl)} if audit_jsonl else {}
    n = max(len(rows), 1)
    lines = [f"# Data set report: {Path(str(dataset)).name}", "",
             f"- rows: **{len(rows)}** (Ops-6K: {OPS6K_ROWS})",
             f"- evaluation set for the nearest-task column: {', '.join(eval_sets) if eval_sets else 'none given'}"]
    if audit:
        passed = sum(1 for r in rows if audit.get(r["name"], {}).get("ok"))
        lines.append(f"- audit: {passed} of {len(rows)} rows pass every filter ({passed / n:.1%}); "
                     f"{sum(1 for r in rows if r['name'] not in audit)} rows not audited")
    lines += _composition(rows, n) + _operators(rows, n) + _sizes(rows, n) + _contamination(rows, n, evals)
    if audit:
        lines += _audit(rows, audit, n)
    lines += _sample(rows, audit, sample, seed)
    path = out / "dataset_report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _row(task: Any, evals: Any) -> dict[str, Any]:
    form = canonical_form(task.source)
    meta = task.metadata or {}
    row: dict[str, Any] = {"name": task.name, "ops": list(task.ops or []), "data_source": task.data_source or "",
                           "canonical_ops": list(form.ops) if form else None, "source": task.source,
                           "runtime_ms": _float(meta.get("runtime_ms")),
                           "input_shapes": _json(meta.get("input_shapes")),
                           "output_shapes": _json(meta.get("output_shapes")),
                           "nearest_eval": None, "eval_score": None, "eval_order": None, "eval_verdict": "",
                           "eval_detail": ""}
    if evals is not None and form is not None and len(evals.canonical):
        row.update(evals.canonical.check(form).as_dict())
    return row


def _composition(rows: list[dict[str, Any]], n: int) -> list[str]:
    sizes = Counter(len(r["ops"]) for r in rows)
    tf = sum(1 for r in rows if r["data_source"].startswith("transformers"))
    lines = ["", "## Composition", "", "| operators per task | rows | share | Ops-6K (SPEC §3) |", "|---:|---:|---:|---:|"]
    for k in sorted(set(sizes) | set(OPS6K_MIX)):
        lines.append(f"| {k} | {sizes.get(k, 0)} | {sizes.get(k, 0) / n:.1%} | "
                     f"{f'{OPS6K_MIX[k]:.1f}%' if k in OPS6K_MIX else '-'} |")
    lines += ["", "| library | rows | share | Ops-6K (SPEC §3) |", "|---|---:|---:|---:|",
              f"| torch only | {len(rows) - tf} | {(len(rows) - tf) / n:.1%} | {100 - OPS6K_TRANSFORMERS_SHARE:.1f}% |",
              f"| uses transformers | {tf} | {tf / n:.1%} | {OPS6K_TRANSFORMERS_SHARE:.1f}% |"]
    return lines


def _operators(rows: list[dict[str, Any]], n: int) -> list[str]:
    ops = Counter(op for r in rows for op in r["ops"])
    canon = Counter(op for r in rows for op in (r["canonical_ops"] or []))
    chains = Counter(" -> ".join(r["canonical_ops"] or []) for r in rows)
    lines = ["", "## Operators", "",
             f"{len(ops)} distinct operators as spelled, {len(canon)} distinct canonical operators, "
             f"{len(chains)} distinct canonical chains in {len(rows)} rows. SPEC §3 publishes no operator "
             "distribution for Ops-6K (only that operators were crawled from torch and transformers).", "",
             "| canonical operator | rows using it | share of rows |", "|---|---:|---:|"]
    per_row = Counter(op for r in rows for op in set(r["canonical_ops"] or []))
    lines += [f"| `{op}` | {k} | {k / n:.1%} |" for op, k in per_row.most_common(40)]
    top_share = sum(k for _, k in canon.most_common(10)) / max(sum(canon.values()), 1)
    lines += ["", f"The 10 most used canonical operators make {top_share:.1%} of all operator uses.", "",
              "| most repeated canonical chains | rows |", "|---|---:|"]
    lines += [f"| `{c or '(none)'}` | {k} |" for c, k in chains.most_common(10)]
    return lines


def _sizes(rows: list[dict[str, Any]], n: int) -> list[str]:
    lines = ["", "## Sizes and runtime", ""]
    numel = [_numel(r["input_shapes"]) for r in rows if r["input_shapes"]]
    ranks = Counter(len(r["input_shapes"][0]) for r in rows if r["input_shapes"])
    runtimes = [r["runtime_ms"] for r in rows if r["runtime_ms"]]
    lines += ["| measure | this set | Ops-6K (SPEC §3) |", "|---|---|---|"]
    if runtimes:
        lines.append(f"| eager runtime (ms) p5 / median / p95 | {_q(runtimes, 0.05):.2f} / {_q(runtimes, 0.5):.2f} / "
                     f"{_q(runtimes, 0.95):.2f} | kept only inside 1-100 ms |")
    if numel:
        lines.append(f"| input elements p5 / median / p95 | {_q(numel, 0.05):,.0f} / {_q(numel, 0.5):,.0f} / "
                     f"{_q(numel, 0.95):,.0f} | not published |")
        lines.append(f"| input MiB (fp32) median / max | {_q(numel, 0.5) * 4 / 2**20:.1f} / {max(numel) * 4 / 2**20:.1f} "
                     "| not published |")
    lines.append(f"| inputs per task (mean) | {statistics.mean([len(r['input_shapes']) for r in rows if r['input_shapes']] or [0]):.2f} "
                 "| not published |")
    lines += ["", "| first input rank | rows | share |", "|---:|---:|---:|"]
    lines += [f"| {k} | {v} | {v / n:.1%} |" for k, v in sorted(ranks.items())]
    return lines


def _contamination(rows: list[dict[str, Any]], n: int, evals: Any) -> list[str]:
    if evals is None:
        return ["", "## Nearest evaluation task", "", "No evaluation set given."]
    scored = [r for r in rows if r["eval_score"] is not None]
    verdicts = Counter(r["eval_verdict"] for r in scored if r["eval_verdict"])
    bins = Counter(_bin(r["eval_score"]) for r in scored)
    nearest = Counter(r["nearest_eval"] for r in scored)
    lines = ["", "## Nearest evaluation task (canonical operator form)", "",
             f"Score = multiset Dice of canonical operators (or of their primitives, whichever is higher) against "
             f"the nearest of {len(evals.canonical)} evaluation tasks; 1.0 = the same operators. Every row's nearest "
             "task is in `nearest_eval.jsonl`.", "", "| score | rows | share |", "|---|---:|---:|"]
    labels = [f"[{a:.2f}, {b:.2f})" for a, b in zip(SCORE_BINS, SCORE_BINS[1:])] + ["1.00"]
    lines += [f"| {lab} | {bins.get(lab, 0)} | {bins.get(lab, 0) / n:.1%} |" for lab in labels]
    lines += ["", "| verdict (rejected by synthesis) | rows |", "|---|---:|"]
    lines += [f"| {v} | {verdicts.get(v, 0)} |" for v in VERDICTS]
    lines += ["", "| most frequent nearest evaluation task | rows |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in nearest.most_common(10)]
    return lines


def _audit(rows: list[dict[str, Any]], audit: dict[str, dict[str, Any]], n: int) -> list[str]:
    reasons = Counter(f["reason"] for r in rows for f in audit.get(r["name"], {}).get("failures", []))
    first = [a["first_call_ms"] for a in audit.values() if a.get("first_call_ms")]
    lines = ["", "## Audit", "", "| failure reason | rows | share |", "|---|---:|---:|"]
    lines += [f"| {k} | {v} | {v / n:.1%} |" for k, v in reasons.most_common()]
    if first:
        lines += ["", f"First forward per row (ms): median {_q(first, 0.5):.1f}, p95 {_q(first, 0.95):.1f}, "
                      f"max {max(first):.1f}; re-timed warm because past the first-call cut: "
                      f"{sum(1 for a in audit.values() if a.get('warm_call_ms') is not None)} rows."]
    return lines


def _sample(rows: list[dict[str, Any]], audit: dict[str, dict[str, Any]], k: int, seed: int) -> list[str]:
    picked = sorted(random.Random(seed).sample(range(len(rows)), min(k, len(rows))))
    lines = ["", f"## Sample ({len(picked)} rows, seed {seed})", "",
             "| # | row | operators | input shapes | runtime ms | nearest eval (score) | audit |",
             "|---:|---|---|---|---:|---|---|"]
    for i in picked:
        r = rows[i]
        a = audit.get(r["name"])
        verdict = "" if a is None else ("pass" if a.get("ok") else
                                        ", ".join(sorted({f["reason"] for f in a.get("failures", [])})))
        near = f"{r['nearest_eval']} ({r['eval_score']:.2f})" if r["eval_score"] is not None else "-"
        rt = f"{r['runtime_ms']:.2f}" if r["runtime_ms"] else "-"
        lines.append(f"| {i} | {r['name']} | {' -> '.join(_short(o) for o in r['ops'])} | "
                     f"{_shapes(r['input_shapes'])} | {rt} | {near} | {verdict} |")
    lines += ["", "### Code of the sampled rows", ""]
    for i in picked:
        r = rows[i]
        lines += [f"<details><summary>{i}: {r['name']} — {' -> '.join(_short(o) for o in r['ops'])}</summary>", "",
                  "```python", r["source"].strip(), "```", "", "</details>", ""]
    return lines


def _short(op: str) -> str:
    return op.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.").rsplit(".", 1)[-1] \
        if op.startswith("transformers.") else op.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.")


def _shapes(shapes: Any) -> str:
    return "; ".join("x".join(str(d) for d in s) for s in shapes) if shapes else "-"


def _numel(shapes: list[list[int]]) -> int:
    return sum(math.prod(int(d) for d in s) for s in shapes)


def _q(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def _bin(score: float) -> str:
    if score >= 1.0:
        return "1.00"
    for a, b in zip(SCORE_BINS, SCORE_BINS[1:]):
        if a <= score < b:
            return f"[{a:.2f}, {b:.2f})"
    return "1.00"


def _float(v: Any) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _json(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return None
    return v
