"""Task synthesis and audit: build an Ops-6K-style training set, re-validate existing ones.

catalogue   crawl + probe the installed operators (what they accept, whether they are stochastic)
plan        sample which operators a task composes (seeded, reproducible)
compose     run a plan, size it to the runtime window, render KernelBench-format code
filters     the execution checks of SPEC §3, each reject with a reason code
similarity  the AST similarity screen (contamination, near-duplicates)
canonical   the canonical operator form: semantic contamination and de-duplication
degenerate  degenerate-work checks on a trace of forward (redundant ops, random targets ...)
screen      the similarity screen: evaluation sets, near-duplicates of the tasks kept so far
synth       the resumable generation loop; store writes parquet + JSONL
audit       re-run every filter on an existing data set
report      Markdown stats with plots; set_report: a data set beside Ops-6K, with a readable sample

Names are imported on first use, so `cuda_agent.data.cli` (and `cuda-agent --help`) does not
pay for torch.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    # `audit` and `similarity` (functions) are not exported: they share their submodule's name, and
    # `cuda_agent.data.audit` would be the function or the module depending on import order.
    "AuditSummary": "audit",
    "Catalogue": "catalogue", "OpSpec": "catalogue", "build_catalogue": "catalogue", "crawl": "catalogue",
    "ComposeConfig": "config", "FilterConfig": "config", "OPS6K_MIX": "config",
    "SynthConfig": "config",
    "FilterResult": "filters", "Reason": "filters", "TaskCheck": "filters",
    "Plan": "plan", "Planner": "plan",
    "audit_report": "report", "synth_report": "report", "dataset_report": "set_report",
    "ContaminationIndex": "canonical", "OpForm": "canonical", "op_form": "canonical", "canonical_name": "canonical",
    "Fingerprint": "similarity", "SimilarityIndex": "similarity", "fingerprint": "similarity",
    "SynthStats": "synth", "synthesize": "synth",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
