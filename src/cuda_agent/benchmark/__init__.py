"""The benchmark: KernelBench-style results for a policy or a folder of solutions.

    from cuda_agent.benchmark import (LocalPool, build_report, device_slots, load_suite,
                                      run_benchmark, solution_source, write_reports)
    suite = load_suite("KernelBench", per_level=10)
    records = run_benchmark(suite, "runs/a", LocalPool(device_slots("cuda")), backend="cuda",
                            config=EvalConfig(), solutions=solution_source("solutions/"))

Names are imported on first use, so `cuda-agent --help` (which imports `benchmark.cli`)
does not pay for torch.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "compare": ["Comparison", "TaskDiff", "compare_runs"],
    "jobs": ["build_stage", "device_stage", "materialize"],
    "kernelbench_timing": ["ImportedBaselines", "ImportedComparison", "TimingFormatError", "compare_with_imported",
                           "export_kernelbench_timing", "load_kernelbench_timing"],
    "local_pool": ["LocalPool", "SlotSpec", "device_slots"],
    "metrics": ["FAST_P", "MARGIN", "BenchMetrics", "Metrics", "compute_metrics", "fast_p", "geomean"],
    "policy": ["PolicySpecError", "resolve_episode_fn"],
    "ray_pool": ["RayPool"],
    "records": ["Candidate", "EpisodeInfo", "Job", "RunInfo", "TaskRecord"],
    "report": ["Report", "build_report", "to_html", "to_markdown", "write_reports"],
    "runner": ["run_benchmark"],
    "solutions": ["DirectorySolutions", "ExampleSolutions", "ReferenceSolutions", "SolutionError",
                  "SolutionSource", "solution_source"],
    "store": ["ResultStore", "RunMismatch", "load_run"],
    "suite": ["Suite", "load_suite"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
