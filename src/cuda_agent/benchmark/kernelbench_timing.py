"""KernelBench's baseline timing JSON: read it to compare against, write ours in its layout.

Layout (KernelBench `results/timing/<hardware>/`): `baseline_time_torch.json` for eager and
`baseline_time_torch_compile_<backend>_<mode>.json` for torch.compile, each
    {"level1": {"19_ReLU.py": {"mean": ms, "std", "min", "max", "num_trials", "hardware", "device"}}, ...}
A task matches an entry by its level and file name (`level1/19_ReLU` -> level1, 19_ReLU.py).

Speedups against imported baselines use the candidate's *mean* time, as KernelBench does,
and only mean something on the same hardware: the report warns when the imported files name
other hardware than the run's devices (`hardware_warning`) and shows how our own eager times
compare with the imported ones (`eager_ratio`). "Faster" and fast_p use the reward's rule
(`evaluation.timing.clears`) over the interval the two means and their spreads allow.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ..evaluation.timing import clears, summary_interval
from ..storage import atomic_write
from .metrics import CONFIDENCE, FAST_P, MARGIN, clearly_faster_by_time, geomean
from .records import TaskRecord, by_level, primary, scope_name

EAGER_FILE = "baseline_time_torch.json"
COMPILE_PREFIX = "baseline_time_torch_compile_"


class TimingEntry(BaseModel):
    mean: float = Field(gt=0)
    std: float | None = None
    min: float | None = None
    max: float | None = None
    num_trials: int | None = None
    hardware: str = ""
    device: str = ""


class TimingTable(BaseModel):
    """One KernelBench timing file: level key -> file name -> entry."""

    source: str = ""
    levels: dict[str, dict[str, TimingEntry]]

    def lookup(self, task: str, level: int | None) -> TimingEntry | None:
        if level is None:
            return None
        return self.levels.get(f"level{level}", {}).get(task.rsplit("/", 1)[-1] + ".py")

    @property
    def hardware(self) -> str:
        return next((e.hardware for entries in self.levels.values() for e in entries.values() if e.hardware), "")


class ImportedBaselines(BaseModel):
    eager: TimingTable | None = None
    compile: TimingTable | None = None


class ImportedComparison(BaseModel):
    """Candidate times against imported baselines, per scope."""

    scope: str
    tasks: int
    matched_eager: int = 0
    matched_compile: int = 0
    faster_than_eager_rate: float | None = None
    faster_than_compile_rate: float | None = None
    geomean_vs_eager: float | None = None
    geomean_vs_compile: float | None = None
    fast_p_eager: dict[str, float] = Field(default_factory=dict)
    eager_ratio: float | None = Field(default=None, description="geomean of our eager mean / imported eager mean")


class TimingFormatError(ValueError):
    pass


def read_timing_file(path: str | Path) -> TimingTable:
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TimingFormatError(f"{path}: cannot be read as JSON: {exc}") from None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and k.startswith("level") for k in raw):
        raise TimingFormatError(f"{path}: expected {{'level1': {{'<problem>.py': {{'mean': ...}}}}}}")
    try:
        return TimingTable(source=str(path), levels=raw)
    except ValidationError as exc:
        raise TimingFormatError(f"{path}: not KernelBench timing entries: {exc.errors()[0]['msg']} at "
                                f"{'.'.join(map(str, exc.errors()[0]['loc']))}") from None


def load_kernelbench_timing(path: str | Path, compile_mode: str = "inductor_default") -> ImportedBaselines:
    """A timing folder (`results/timing/H100_Modal`) or a single file; a file whose name
    contains 'compile' is the torch.compile baseline, any other the eager one."""
    path = Path(path)
    if path.is_dir():
        eager = path / EAGER_FILE
        comp = path / f"{COMPILE_PREFIX}{compile_mode}.json"
        if not eager.is_file() and not comp.is_file():
            raise TimingFormatError(f"{path} has neither {EAGER_FILE} nor {comp.name}")
        return ImportedBaselines(eager=read_timing_file(eager) if eager.is_file() else None,
                                 compile=read_timing_file(comp) if comp.is_file() else None)
    if not path.is_file():
        raise TimingFormatError(f"no such timing file or folder: {path}")
    table = read_timing_file(path)
    return ImportedBaselines(compile=table) if "compile" in path.name else ImportedBaselines(eager=table)


def compare_with_imported(records: Iterable[TaskRecord], suite: dict[str, int | None], baselines: ImportedBaselines,
                          margin: float = MARGIN, thresholds: Sequence[float] = FAST_P) -> list[ImportedComparison]:
    """Per level and overall: rates, geomeans and fast_p of our candidates vs imported times."""
    latest = primary(records)
    scopes = {scope_name(lv): names for lv, names in by_level(suite, suite.get).items()}
    return [_compare_scope(scope, names, suite, latest, baselines, margin, thresholds)
            for scope, names in {**scopes, "overall": list(suite)}.items()]


def _compare_scope(scope: str, names: list[str], suite: dict[str, int | None], latest: dict[str, TaskRecord],
                   baselines: ImportedBaselines, margin: float, thresholds: Sequence[float]) -> ImportedComparison:
    c = ImportedComparison(scope=scope, tasks=len(names))
    s_eager: list[float] = []
    s_comp: list[float] = []
    fast_eager = {p: 0 for p in thresholds}
    fe = fc = 0
    ratios = []
    for name in names:
        e = baselines.eager.lookup(name, suite[name]) if baselines.eager else None
        k = baselines.compile.lookup(name, suite[name]) if baselines.compile else None
        c.matched_eager += e is not None
        c.matched_compile += k is not None
        r = latest.get(name)
        if r is not None and r.status == "skipped":
            continue
        if e is not None and r is not None and r.result is not None and r.result.eager_stats is not None:
            ratios.append(r.result.eager_stats.mean / e.mean)
        cand = _candidate_mean(r)
        if cand is None:
            continue
        if e is not None:
            s_eager.append(e.mean / cand[0])
            fe += imported_clears(e, cand, 1.0, margin)
            for p in thresholds:
                fast_eager[p] += imported_clears(e, cand, p, margin)
        if k is not None:
            s_comp.append(k.mean / cand[0])
            fc += imported_clears(k, cand, 1.0, margin)
    if c.matched_eager:
        c.faster_than_eager_rate = fe / c.matched_eager
        c.geomean_vs_eager = geomean(s_eager)
        c.fast_p_eager = {f"{p:g}": fast_eager[p] / c.matched_eager for p in thresholds}
    if c.matched_compile:
        c.faster_than_compile_rate = fc / c.matched_compile
        c.geomean_vs_compile = geomean(s_comp)
    c.eager_ratio = geomean(ratios)
    return c


def imported_clears(base: TimingEntry, cand: tuple[float, float | None, int | None], p: float, margin: float,
                    confidence: float = CONFIDENCE) -> bool:
    """The reward's rule for a candidate mean (mean, std, rounds) against an imported mean:
    over the interval of the two means when both spreads are known, else over the bare times."""
    t, std, n = cand
    if p <= 0:
        return True
    if base.std is None or not base.num_trials or std is None or not n:
        return clearly_faster_by_time(t * p, base.mean, margin)
    lo, _ = summary_interval((base.mean, base.std / math.sqrt(base.num_trials), base.num_trials),
                             (t, std / math.sqrt(n), n), confidence)
    return clears(lo, p, margin)


def _candidate_mean(r: TaskRecord | None) -> tuple[float, float | None, int | None] | None:
    """(mean ms, std, rounds) of a correct candidate; spread unknown when only a time was kept."""
    if r is None or not r.correct or r.result is None:
        return None
    st = r.result.candidate_stats
    if st is not None:
        return st.mean, st.std, st.trials
    t = r.result.time_ms.candidate
    return (t, None, None) if t else None


def hardware_warning(baselines: ImportedBaselines, records: Iterable[TaskRecord]) -> str | None:
    """A warning when the imported timings name other hardware than the devices this run's
    records were measured on (speedups against them then compare two machines)."""
    theirs = {t.hardware for t in (baselines.eager, baselines.compile) if t is not None and t.hardware}
    ours = {r.result.device for r in records if r.result is not None and r.result.device}
    if not theirs or not ours:
        return None
    norm = {h.strip().lower() for h in ours}
    if {h.strip().lower() for h in theirs} <= norm and len(norm) == 1:
        return None
    return (f"imported baselines were measured on {', '.join(sorted(theirs))}; this run ran on "
            f"{', '.join(sorted(ours))}: speedups against them compare different hardware")


def export_kernelbench_timing(records: Iterable[TaskRecord], out_dir: str | Path,
                              compile_mode: str = "inductor_default") -> list[Path]:
    """Write the environment's measured eager / compile baselines in KernelBench's layout."""
    eager: dict[str, dict[str, dict]] = {}
    comp: dict[str, dict[str, dict]] = {}
    for r in records:
        if r.level is None or r.result is None:
            continue
        fname = r.task.rsplit("/", 1)[-1] + ".py"
        for table, stats in ((eager, r.result.eager_stats), (comp, r.result.compile_stats)):
            if stats is not None:
                table.setdefault(f"level{r.level}", {})[fname] = {
                    "mean": stats.mean, "std": stats.std, "min": stats.min, "max": stats.max,
                    "num_trials": stats.trials, "hardware": r.result.device, "device": r.slot or r.result.backend}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in ((EAGER_FILE, eager), (f"{COMPILE_PREFIX}{compile_mode}.json", comp)):
        if table:
            atomic_write(out / name, json.dumps(table, indent=4))
            written.append(out / name)
    return written
