"""Task synthesis and audit: build an Ops-6K-style training set, re-validate existing ones.

catalogue   crawl + probe the installed operators (what they accept, whether they are stochastic)
plan        sample which operators a task composes (seeded, reproducible)
compose     run a plan, size it to the runtime window, render KernelBench-format code
filters     the execution checks of SPEC §3, each reject with a reason code
similarity  the AST similarity screen (contamination, near-duplicates)
synth       the resumable generation loop; store writes parquet + JSONL
audit       re-run every filter on an existing data set
report      Markdown stats with plots
"""

from .audit import AuditSummary, audit
from .catalogue import Catalogue, OpSpec, build_catalogue, crawl
from .config import DEFAULT_WINDOWS_MS, OPS6K_MIX, ComposeConfig, FilterConfig, SynthConfig
from .filters import FilterResult, Reason, TaskCheck
from .plan import Plan, Planner
from .report import audit_report, synth_report
from .similarity import Fingerprint, SimilarityIndex, fingerprint, similarity
from .synth import SynthStats, synthesize

__all__ = [
    "AuditSummary", "Catalogue", "ComposeConfig", "DEFAULT_WINDOWS_MS", "FilterConfig", "FilterResult",
    "Fingerprint", "OPS6K_MIX", "OpSpec", "Plan", "Planner", "Reason", "SimilarityIndex", "SynthConfig",
    "SynthStats", "TaskCheck", "audit", "audit_report", "build_catalogue", "crawl", "fingerprint", "similarity",
    "synth_report", "synthesize",
]
