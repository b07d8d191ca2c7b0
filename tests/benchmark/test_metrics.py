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


def stats(median: float, spread: float, rounds: int) -> TimingStats:
    """Summary of `rounds` timings around `median` with relative standard deviation `spread`."""
    return TimingStats(median=median, mean=median, std=spread * median, min=median * (1 - spread),
                       max=median * (1 + 3 * spread), trials=rounds)


def rec(name: str, level: int | None, *, compiled: bool = True, correct: bool = True, fe: bool = False,
        fc: bool = False, se: float | None = None, sc: float | None = None, reward: int | None = None,
        cand_ms: float | None = None, eager_ms: float | None = None, status: str = "evaluated",
        episode: EpisodeInfo | None = None, spread: float = 0.01, rounds: int = 100, sample: int = 0,
        device: str = "") -> TaskRecord:
    """A record as the environment writes it: medians (eager 1 ms unless given) whose ratios are
    the speedups `se` / `sc`, each model's summary with relative spread `spread` over `rounds`."""
    if status != "evaluated":
        return TaskRecord(task=name, level=level, status=status, reason="none", episode=episode, sample=sample)
    r = reward if reward is not None else (-1 if not correct else 3 if fe and fc else 2 if fe else 1)
    e_t = eager_ms if eager_ms else (1.0 if se else None)
    c_t = cand_ms if cand_ms else (e_t / se if se and e_t else None)
    k_t = c_t * sc if sc and c_t else None
    res = EvalResult(task=name, task_hash="h", backend="cpu", reward=r, compiled=compiled, correct=correct,
                     faster_than_eager=fe, faster_than_compile=fc, speedup_vs_eager=se, speedup_vs_compile=sc,
                     time_ms=TimeMs(candidate=c_t, eager=e_t, compile=k_t), device=device,
                     candidate_stats=stats(c_t, spread, rounds) if c_t else None,
                     eager_stats=stats(e_t, spread, rounds) if e_t else None,
                     compile_stats=stats(k_t, spread, rounds) if k_t else None,
                     stage="done" if correct else "verify" if compiled else "build")
    return TaskRecord(task=name, level=level, result=res, episode=episode, sample=sample)


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
    # KernelBench's point fast_p over all 8 tasks, strict ">": eager speedups 2, 1.0526, 1.5, 0.5
    assert m.fast_p_eager_point == {"0": 4 / 8, "0.5": 3 / 8, "0.8": 3 / 8, "1": 3 / 8, "1.5": 1 / 8, "2": 0.0}
    # noise-aware (interval ±0.5% here; counts when lower bound * 0.95 > p): a 2.0 clears 1.5 not 2;
    # b 1.0526 clears 0.8 (1.047 * 0.95 = 0.995) but not 1; e 1.5 (decided faster) clears 1 not 1.5;
    # f 0.5 clears only 0 (0.498 * 0.95 < 0.5)
    assert m.fast_p_eager == {"0": 4 / 8, "0.5": 3 / 8, "0.8": 3 / 8, "1": 2 / 8, "1.5": 1 / 8, "2": 0.0}
    assert m.fast_p_eager["1"] == m.faster_than_eager_rate
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
    assert l1.fast_p_eager_point["1"] == 2 / 4  # 2.0 and 1.0526 are > 1
    assert l1.fast_p_eager["1"] == 1 / 4  # 1.0526 does not clear 1 by the margin
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


def test_noise_is_not_counted_as_speed() -> None:
    # 1.3x measured over 10 rounds with a 40% spread: the interval is far too wide to claim > 1x.
    m = compute_metrics([rec("t", 1, se=1.3, sc=1.3, fe=False, spread=0.4, rounds=10)]).overall
    assert m.faster_than_eager_rate == 0.0 and m.fast_p_eager_point["1"] == 1.0
    assert m.fast_p_eager["1"] == 0.0 and m.fast_p_eager["0"] == 1.0 and m.high_variance == 1
    # the same point estimate measured tightly clears 1.2x (lower bound ~1.295, * 0.95 = 1.23) but not 1.25x
    tight = compute_metrics([rec("t", 1, se=1.3, sc=1.3, spread=0.01, rounds=200)],
                            thresholds=(1.2, 1.25)).overall
    assert tight.fast_p_eager == {"1.2": 1.0, "1.25": 0.0} and tight.high_variance == 0


def test_reference_against_itself_has_no_fast_1() -> None:
    # Identical code timed twice: point speedups scattered around 1.0 by a few percent (as a
    # CPU reference run shows), the environment calling none faster. KernelBench's point
    # fast_1 counts about half; the noise-aware fast_1 counts none, at every spread.
    import random

    rng = random.Random(7)
    for spread, rounds in ((0.01, 300), (0.05, 30), (0.3, 10)):
        recs = [rec(f"t{i}", 1, se=rng.uniform(0.97, 1.045), sc=1.0, spread=spread, rounds=rounds)
                for i in range(30)]
        m = compute_metrics(recs).overall
        assert m.fast_p_eager_point["1"] > 0.3
        assert m.fast_p_eager["1"] == 0.0 and m.fast_p_eager["1.5"] == 0.0 and m.fast_p_eager["0"] == 1.0


def test_pass_at_k_unbiased_estimator() -> None:
    from cuda_agent.benchmark.metrics import pass_at_k

    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert pass_at_k(4, 1, 10) == 1.0  # k > n uses n (KernelBench): one of all 4 is correct
    assert pass_at_k(0, 0, 1) == 0.0
    # two tasks with 5 samples each (t1: 2 correct, t2: none), a third with no record at all
    records = [rec("t1", 1, se=1.0, correct=i < 2, sample=i) for i in range(5)]
    records += [rec("t2", 1, correct=False, sample=i) for i in range(5)]
    m = compute_metrics(records, {"t1": 1, "t2": 1, "t3": 1}, n_samples=5).overall
    assert m.pass_at_k["1"] == pytest.approx((2 / 5) / 3)
    assert m.pass_at_k["5"] == pytest.approx(1 / 3)
    assert (m.samples_min, m.samples_max) == (5, 5)
    assert m.pass_rate == 1 / 3  # headline metrics read sample 0: t1's is correct


def test_skipped_tasks_are_not_charged() -> None:
    records = [rec("a", 4, se=1.0), TaskRecord(task="b", level=4, status="skipped", reason="needs weights")]
    m = compute_metrics(records, {"a": 4, "b": 4}).overall
    assert (m.tasks, m.skipped, m.pass_rate, m.missing) == (1, 1, 1.0, 0)


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
    assert l1.fast_p_eager["1"] == 1 / 3  # b's 1.0526 (a tie at the margin) does not clear 1
    assert l1.faster_than_compile_rate == 1 / 2  # a: 4.0 vs 1.0; b: 0.5 vs 0.95 is slower
    assert l1.eager_ratio == pytest.approx(math.sqrt(1.1 * 1.0))
    assert cmp["level 2"].matched_eager == 0 and cmp["level 2"].geomean_vs_eager is None


def test_kernelbench_timing_round_trip_and_errors(tmp_path) -> None:
    records = [rec("level1/1_a", 1, se=1.0, cand_ms=1.0, eager_ms=2.0)]
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
    assert compare_runs(b, a).tasks[2].change == "slower"
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
    assert data["metrics"]["overall"]["fast_p_eager"]["1"] == 2 / 8
    assert data["metrics"]["overall"]["fast_p_eager_point"]["1"] == 3 / 8


def test_compare_calls_identical_code_the_same() -> None:
    # Three identical tasks whose point estimates moved by 6-8% between two noisy runs (5%
    # spread, 30 rounds): the flat 5% rule called them faster; the intervals overlap.
    a = [rec(f"t{i}", 1, se=1.0, sc=1.0, spread=0.05, rounds=30) for i in range(3)]
    b = [rec(f"t{i}", 1, se=s, sc=1.0, spread=0.05, rounds=30) for i, s in enumerate((1.06, 1.07, 1.08))]
    c = compare_runs(a, b)
    assert [d.change for d in c.tasks] == ["same"] * 3
    assert all(d.ratio_vs_eager > 1.05 for d in c.tasks)  # what the old rule would have called faster
    assert all(d.bounds_vs_eager_b[0] < d.bounds_vs_eager_a[1] for d in c.tasks)  # the intervals overlap
    # a real 1.5x change measured the same way is still found
    assert compare_runs(a, [rec("t0", 1, se=1.5, spread=0.05, rounds=30)]).tasks[0].change == "faster"


def test_hardware_warning_for_imported_baselines(tmp_path) -> None:
    folder = kb_timing(tmp_path, {"level1": {"1_a.py": 2.0}})
    base = load_kernelbench_timing(folder)
    info = RunInfo(suite="s", solutions="x", backend="cuda", config=EvalConfig(), tasks=["level1/1_a"],
                   levels={"level1/1_a": 1})
    same = build_report([rec("level1/1_a", 1, se=1.0, device="NVIDIA H100 80GB HBM3")], info, base)
    assert same.warnings == []
    other = build_report([rec("level1/1_a", 1, se=1.0, device="NVIDIA H200")], info, base)
    assert len(other.warnings) == 1 and "NVIDIA H200" in other.warnings[0] and "H100" in other.warnings[0]
    assert "Warning:" in to_markdown(other)


def test_single_file_compile_failure_counts_as_not_compiled(tmp_path) -> None:
    err = ("failed to load the candidate: Traceback ...\nRuntimeError: Error building extension 'k': "
           "main.cpp:3:1: error: expected ';' before '}' token")
    res = EvalResult(task="t", task_hash="h", backend="cpu", compiled=True, stage="load", reason=err, load_step="import")
    single = TaskRecord(task="t", level=1, mode="single_file", result=res)
    assert not single.compiled and "expected ';'" in single.compile_error
    # a workspace candidate whose model fails to construct did compile (KernelBench: compiled, not correct)
    other = TaskRecord(task="t", level=1, mode="single_file", result=res.model_copy(
        update={"reason": "failed to load the candidate: TypeError: __init__() takes 1 argument",
                "load_step": "construct"}))
    assert other.compiled and other.compile_error is None
    # records written before load_step existed keep their verdict (read from the reason, as then)
    legacy = TaskRecord(task="t", level=1, mode="single_file", result=res.model_copy(update={"load_step": None}))
    assert not legacy.compiled and "expected ';'" in legacy.compile_error
    info = RunInfo(suite="s", solutions="x", backend="cpu", config=EvalConfig(), tasks=["t"], levels={"t": 1})
    report = build_report([single], info)
    assert report.metrics.overall.compiled_rate == 0.0
    md = to_markdown(report)
    assert "## Compile errors" in md and "expected ';' before" in md
    assert "did not compile (its load_inline build): " in report.tasks[0].summary


def test_log_axis_ticks_are_labelled_with_values() -> None:
    from cuda_agent.benchmark.plots import log_ticks

    assert log_ticks(0.97, 1.03) == [0.97, 1.0, 1.03]  # inside one octave: still labelled
    wide = log_ticks(0.3, 5.0)
    assert 1.0 in wide and wide[0] >= 0.3 and wide[-1] <= 5.0 and len(wide) <= 9
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cuda_agent.benchmark.plots import _times_axis

    fig, ax = plt.subplots()
    ax.set_yscale("log", base=2)
    ax.scatter([0, 1], [0.98, 1.02])
    ax.set_ylim(0.96, 1.04)
    _times_axis(ax, "y")
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    plt.close(fig)
    assert labels and all(lab.endswith("x") for lab in labels) and "1x" in labels
