"""Benchmark metrics, KernelBench timing import/export, comparisons and reports, on crafted
result sets whose expected values are computed by hand in the comments."""

from __future__ import annotations

import json
import math
import re

import pytest

from cuda_agent.benchmark import (
    TaskRecord,
    build_report,
    compare_runs,
    compute_metrics,
    export_kernelbench_timing,
    load_kernelbench_timing,
    to_markdown,
    write_reports,
)
from cuda_agent.benchmark.kernelbench_timing import TimingFormatError, compare_with_imported
from cuda_agent.benchmark.metrics import clearly_faster_by_time, fast_p
from cuda_agent.benchmark.records import EpisodeInfo, RunInfo
from cuda_agent.evaluation import EvalConfig, EvalResult, TimeMs, TimingStats

TIE = 1 / 0.95  # exactly "5% faster": (t_base - t) / t_base == 0.05, which is not MORE than 5%


def rec(name: str, level: int | None, *, compiled: bool = True, correct: bool = True, fe: bool = False,
        fc: bool = False, se: float | None = None, sc: float | None = None, reward: int | None = None,
        cand_ms: float | None = None, eager_ms: float | None = None, status: str = "evaluated",
        episode: EpisodeInfo | None = None) -> TaskRecord:
    if status != "evaluated":
        return TaskRecord(task=name, level=level, status=status, reason="none", episode=episode)
    r = reward if reward is not None else (-1 if not correct else 3 if fe and fc else 2 if fe else 1)
    res = EvalResult(task=name, task_hash="h", backend="cpu", reward=r, compiled=compiled, correct=correct,
                     faster_than_eager=fe, faster_than_compile=fc, speedup_vs_eager=se, speedup_vs_compile=sc,
                     time_ms=TimeMs(candidate=cand_ms, eager=eager_ms),
                     candidate_stats=TimingStats.of([cand_ms]) if cand_ms else None,
                     eager_stats=TimingStats.of([eager_ms]) if eager_ms else None,
                     stage="done" if correct else "verify" if compiled else "build")
    return TaskRecord(task=name, level=level, result=res, episode=episode)


SUITE = {"level1/1_a": 1, "level1/2_b": 1, "level1/3_c": 1, "level1/4_d": 1, "level2/1_e": 2, "level2/2_f": 2,
         "level3/1_g": 3, "level3/2_h": 3}


def crafted() -> list[TaskRecord]:
    return [
        rec("level1/1_a", 1, fe=True, fc=True, se=2.0, sc=1.5),
        rec("level1/2_b", 1, se=TIE, sc=0.8),           # tie at the margin: the environment said "not faster"
        rec("level1/3_c", 1, correct=False),            # compiled, wrong
        rec("level1/4_d", 1, compiled=False, correct=False),
        rec("level2/1_e", 2, fe=True, se=1.5, sc=1.0),  # speedup exactly 1.0 vs compile
        rec("level2/2_f", 2, se=0.5, sc=0.25),          # speedup exactly 0.5 vs eager
        # level3/1_g: missing (no record at all)
        rec("level3/2_h", 3, status="no_solution"),
    ]


def test_overall_metrics_match_hand_computed_values() -> None:
    m = compute_metrics(crafted(), SUITE).overall
    assert (m.tasks, m.recorded, m.missing) == (8, 7, 1)
    assert m.compiled_rate == 5 / 8           # a b c e f
    assert m.pass_rate == 4 / 8               # a b e f
    assert m.faster_than_eager_rate == 2 / 8  # a e (b's tie is not faster)
    assert m.faster_than_compile_rate == 1 / 8
    assert m.geomean_vs_eager == pytest.approx((2.0 * TIE * 1.5 * 0.5) ** 0.25)
    assert m.geomean_vs_eager_n == 4
    assert m.geomean_vs_compile == pytest.approx((1.5 * 0.8 * 1.0 * 0.25) ** 0.25)
    # fast_p over all 8 tasks, strict ">": eager speedups 2, 1.0526, 1.5, 0.5
    assert m.fast_p_eager == {"0": 4 / 8, "0.5": 3 / 8, "0.8": 3 / 8, "1": 3 / 8, "1.5": 1 / 8, "2": 0.0}
    # compile speedups 1.5, 0.8, 1.0, 0.25
    assert m.fast_p_compile == {"0": 4 / 8, "0.5": 3 / 8, "0.8": 2 / 8, "1": 1 / 8, "1.5": 0.0, "2": 0.0}
    assert m.rewards == {"-1": 3, "1": 2, "2": 1, "3": 1, "missing": 1}
    assert m.statuses == {"evaluated": 6, "no_solution": 1}
    assert m.episodes == 0 and m.tokens_mean is None


def test_per_level_metrics() -> None:
    levels = {m.level: m for m in compute_metrics(crafted(), SUITE).levels}
    l1, l2, l3 = levels[1], levels[2], levels[3]
    assert (l1.tasks, l1.compiled_rate, l1.pass_rate) == (4, 3 / 4, 2 / 4)
    assert (l1.faster_than_eager_rate, l1.faster_than_compile_rate) == (1 / 4, 1 / 4)
    assert l1.geomean_vs_eager == pytest.approx(math.sqrt(2.0 * TIE))
    assert l1.fast_p_eager["1"] == 2 / 4  # 2.0 and 1.0526 are > 1
    assert (l2.pass_rate, l2.faster_than_eager_rate, l2.faster_than_compile_rate) == (1.0, 0.5, 0.0)
    assert l2.geomean_vs_eager == pytest.approx(math.sqrt(0.75))
    assert (l3.tasks, l3.missing, l3.pass_rate, l3.geomean_vs_eager) == (2, 1, 0.0, None)
    assert l3.rewards == {"-1": 1, "1": 0, "2": 0, "3": 0, "missing": 1}


def test_without_suite_the_recorded_tasks_are_the_suite() -> None:
    m = compute_metrics(crafted()).overall
    assert (m.tasks, m.missing, m.pass_rate) == (7, 0, 4 / 7)


def test_speedups_of_incorrect_results_are_ignored() -> None:
    # A wrong candidate with a (meaningless) speedup must not enter geomeans or fast_p.
    records = [rec("t1", 1, correct=False, se=10.0, sc=10.0), rec("t2", 1, se=2.0, sc=2.0)]
    m = compute_metrics(records).overall
    assert m.geomean_vs_eager == 2.0 and m.fast_p_eager["1"] == 0.5


def test_the_environment_decision_is_used_not_the_point_estimate() -> None:
    # 1.3x measured but the environment's confidence interval did not clear the margin (noise).
    m = compute_metrics([rec("t", 1, se=1.3, sc=1.3, fe=False)]).overall
    assert m.faster_than_eager_rate == 0.0 and m.fast_p_eager["1"] == 1.0


def test_margin_ties_and_fast_p_edges() -> None:
    assert not clearly_faster_by_time(0.95, 1.0)   # exactly 5% faster: not more than 5%
    assert clearly_faster_by_time(0.9499, 1.0)
    assert not clearly_faster_by_time(95.0, 100.0)
    assert not clearly_faster_by_time(1.0, 1.0)
    assert fast_p([1.0, 2.0, None], 4, 1.0) == 1 / 4
    assert fast_p([], 0, 1.0) == 0.0


def test_tokens_and_turns_per_task() -> None:
    records = [rec("a", 1, se=1.0, sc=1.0, episode=EpisodeInfo(tokens=1000, turns=10)),
               rec("b", 1, correct=False, episode=EpisodeInfo(tokens=3000, turns=30)),
               rec("c", 1, status="episode_failed", episode=EpisodeInfo(tokens=500, turns=2))]
    m = compute_metrics(records).overall
    assert (m.episodes, m.tokens_total, m.tokens_mean, m.tokens_median) == (3, 4500, 1500, 1000)
    assert (m.turns_mean, m.turns_median) == (14, 10)


# ---- KernelBench timing JSON ---------------------------------------------------------------
def kb_timing(tmp_path, eager: dict, compile_: dict | None = None):
    folder = tmp_path / "H100_test"
    folder.mkdir()
    entry = lambda ms: {"mean": ms, "std": 0.01, "min": ms, "max": ms, "num_trials": 100,
                        "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}
    (folder / "baseline_time_torch.json").write_text(json.dumps(
        {lv: {f: entry(ms) for f, ms in files.items()} for lv, files in eager.items()}))
    if compile_:
        (folder / "baseline_time_torch_compile_inductor_default.json").write_text(json.dumps(
            {lv: {f: entry(ms) for f, ms in files.items()} for lv, files in compile_.items()}))
    return folder


def test_imported_kernelbench_baselines(tmp_path) -> None:
    folder = kb_timing(tmp_path, {"level1": {"1_a.py": 2.0, "2_b.py": 1.0, "3_c.py": 1.0}},
                       {"level1": {"1_a.py": 4.0, "2_b.py": 0.5}})
    base = load_kernelbench_timing(folder)
    assert base.eager is not None and base.compile is not None
    assert base.eager.hardware == "NVIDIA H100 80GB HBM3"
    records = [rec("level1/1_a", 1, se=1.0, sc=1.0, cand_ms=1.0, eager_ms=2.2),   # 2.0x eager, 4.0x compile
               rec("level1/2_b", 1, se=1.0, sc=1.0, cand_ms=0.95, eager_ms=1.0),  # tie: not faster than eager
               rec("level1/3_c", 1, correct=False)]
    suite = {"level1/1_a": 1, "level1/2_b": 1, "level1/3_c": 1, "level2/9_z": 2}
    cmp = {c.scope: c for c in compare_with_imported(records, suite, base)}
    l1 = cmp["level 1"]
    assert (l1.matched_eager, l1.matched_compile) == (3, 2)
    assert l1.faster_than_eager_rate == 1 / 3
    assert l1.geomean_vs_eager == pytest.approx(math.sqrt(2.0 * (1.0 / 0.95)))
    assert l1.fast_p_eager["1"] == 2 / 3
    assert l1.faster_than_compile_rate == 1 / 2  # a: 4.0 vs 1.0; b: 0.5 vs 0.95 is slower
    assert l1.eager_ratio == pytest.approx(math.sqrt(1.1 * 1.0))
    assert cmp["level 2"].matched_eager == 0 and cmp["level 2"].geomean_vs_eager is None


def test_kernelbench_timing_round_trip_and_errors(tmp_path) -> None:
    records = [rec("level1/1_a", 1, se=1.0, sc=1.0, cand_ms=1.0, eager_ms=2.0)]
    paths = export_kernelbench_timing(records, tmp_path / "out")
    assert [p.name for p in paths] == ["baseline_time_torch.json"]
    back = load_kernelbench_timing(paths[0])
    assert back.eager is not None and back.eager.lookup("level1/1_a", 1).mean == 2.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"level1": {"x.py": {"mean": "fast"}}}))
    with pytest.raises(TimingFormatError, match="bad.json"):
        load_kernelbench_timing(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(TimingFormatError, match="expected"):
        load_kernelbench_timing(bad)
    with pytest.raises(TimingFormatError, match="no such"):
        load_kernelbench_timing(tmp_path / "nope")


# ---- compare --------------------------------------------------------------------------------------
def test_compare_runs() -> None:
    a = [rec("t1", 1, se=1.0, sc=1.0), rec("t2", 1, correct=False), rec("t3", 1, se=2.0, sc=2.0),
         rec("t4", 2, se=1.0, sc=1.0), rec("only_a", 2, se=1.0, sc=1.0)]
    b = [rec("t1", 1, correct=False), rec("t2", 1, se=1.2, sc=1.2), rec("t3", 1, se=3.0, sc=3.0),
         rec("t4", 2, se=1.02, sc=1.0), rec("only_b", 3, se=1.0, sc=1.0)]
    c = compare_runs(a, b)
    changes = {d.task: d.change for d in c.tasks}
    assert changes == {"t1": "broke", "t2": "fixed", "t3": "faster", "t4": "same", "only_a": "only in A",
                       "only_b": "only in B"}
    assert c.common == 4 and c.only_a == ["only_a"] and c.only_b == ["only_b"]
    assert c.metrics_a.overall.tasks == 4 and c.metrics_a.overall.pass_rate == 3 / 4
    assert c.metrics_b.overall.pass_rate == 3 / 4
    assert {d.task: d.ratio_vs_eager for d in c.tasks}["t3"] == pytest.approx(1.5)


# ---- reports ---------------------------------------------------------------------------------------
def test_reports_from_crafted_records(tmp_path) -> None:
    info = RunInfo(suite="crafted", solutions="x", backend="cpu", config=EvalConfig(), tasks=list(SUITE),
                   levels=SUITE)
    records = crafted()
    records[0].result.reason = "evil </td><script>alert(1)</script> | pipe"
    report = build_report(records, info)
    assert [t.task for t in report.tasks] == list(SUITE)
    assert report.tasks[6].status == "missing" and report.tasks[6].reward is None
    md = to_markdown(report)
    assert "| level 1 | 4 | 50.0% / 100.0% | 25.0% / 97.0% | 1.10x / 1.87x |" in md
    assert "| overall | 8 | 50.0% / 98.8% | 12.5% / 96.8% |" in md
    assert "Claude Opus 4.5 (paper) | 95.2% | 66.4% | 1.46x" in md
    paths = write_reports(report, tmp_path)
    assert sorted(p.name for p in paths) == ["report.html", "report.json", "report.md"]
    page = (tmp_path / "report.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert len(re.findall(r"src='data:image/png;base64,", page)) == 3
    assert not re.search(r"(src|href)=['\"](http|/|\.)", page)  # nothing outside the file
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["metrics"]["overall"]["pass_rate"] == 0.5
    assert data["metrics"]["overall"]["fast_p_eager"]["1"] == 3 / 8
