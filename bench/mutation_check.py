"""Mutation check of the reward path: does every plausible bug in a rule that decides a reward
fail a test that mirrors the module it touches?

Each mutation is (id, file, exact old text, new text, tests). The script copies `src/`,
`tests/` and `pyproject.toml` to a temporary tree once, checks the unmutated tree passes every
selection, then for each mutation writes the changed file into the copy, runs its tests
(`pytest -q`, `PYTHONPATH=<copy>/src`, from the copy's root), restores the file, and records
killed (a test failed) or survived (all passed), with the failing test ids. A mutation whose
old text is not found exactly once is `stale`: the code moved and the list needs updating.

    python bench/mutation_check.py                       # all, result to bench/results/mutation_check.json
    python bench/mutation_check.py --only reward-3-without-eager timing-50pct
    python bench/mutation_check.py --mutations held_out.json   # more mutations, same JSON fields

Exit status: 0 when every mutation was killed, 1 when one survived, 2 when one is stale or the
unmutated tree fails. Needs no GPU; the whole list takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the tests that mirror each module (the fast unit tests of its rules)
REWARD = ["tests/evaluation/test_reward_table.py", "tests/evaluation/test_reward_rule.py"]
TIMING = ["tests/evaluation/test_timing_rule.py", "tests/evaluation/test_reward_rule.py"]
VERIFY = ["tests/evaluation/test_verify_rules.py", "tests/evaluation/test_verify.py"]
BASELINE = ["tests/evaluation/test_baseline_cache.py"]
JUDGE = ["tests/evaluation/test_judge_rules.py", "tests/evaluation/test_baseline_cache.py"]
SANDBOX = ["tests/isolation/test_sandbox_rights.py", "tests/isolation/test_seccomp_program.py"]
SYMBOLS = ["tests/languages/cpp/test_symbols.py"]

R, T, V = "src/cuda_agent/evaluation/reward.py", "src/cuda_agent/evaluation/timing.py", "src/cuda_agent/evaluation/verify.py"
SB, SY = "src/cuda_agent/isolation/sandbox.py", "src/cuda_agent/languages/cpp/symbols.py"


@dataclass
class Mutation:
    id: str
    file: str
    old: str
    new: str
    tests: list[str]
    lets_through: str = ""


@dataclass
class Outcome:
    id: str
    file: str
    status: str  # killed | survived | stale | error
    seconds: float
    killed_by: list[str] = field(default_factory=list)
    lets_through: str = ""
    detail: str = ""


MUTATIONS = [
    # ---- the ten that survived the audit of issue 25 -------------------------------------------
    Mutation("reward-3-without-eager", R, "    if faster_than_eager and faster_than_compile:\n        return 3",
             "    if faster_than_compile:\n        return 3", REWARD, "reward 3 for a kernel slower than eager"),
    Mutation("workloads-ignore-margin", R, "uppers) / len(uppers)), 1.0, margin)", "uppers) / len(uppers)), 1.0, 0.0)",
             REWARD, "a steady 3% speedup credited as more than 5%"),
    Mutation("workloads-no-bonferroni", R, "level = 1 - (1 - confidence) / len(ratio_sets)", "level = confidence",
             REWARD, "k workloads each at 99% treated as 99% together"),
    Mutation("timing-50pct", T, "_, upper = median_interval(ratios, confidence)", "_, upper = median_interval(ratios, 0.5)",
             TIMING, "a true 4.5% speedup credited in 7% of draws"),
    Mutation("interval-98pct", T, "alpha = 1 - confidence", "alpha = 2 * (1 - confidence)", TIMING,
             "the median interval at 98% instead of 99%"),
    Mutation("verify-nan-accepted", V, "if bool(extra.any()):", "if False:", VERIFY,
             "[1, nan, 1, 1] accepted for ones(4)"),
    Mutation("verify-broadcast-accepted", V, "if ref.shape != cand.shape:",
             "if ref.dim() != cand.dim() or any(a != b and b != 1 for a, b in zip(ref.shape, cand.shape)):", VERIFY,
             "a (1, 8) output accepted for an (8, 8) reference"),
    Mutation("baseline-from-candidate", "src/cuda_agent/evaluation/judge.py", 'compile=TimingStats.of(solo["compile"])',
             'compile=TimingStats.of(solo.get("candidate") or solo["compile"])', BASELINE,
             "the compile baseline cached from the candidate's samples"),
    Mutation("landlock-no-truncate", SB, " | (_FS_TRUNCATE if abi >= 3 else 0)\n", "\n", SANDBOX,
             "a file outside scratch truncated to empty"),
    Mutation("symbols-no-std-thread", SY, "|std::thread::\\w+|", "|", SYMBOLS, "a C++ std::thread allowed"),
    # ---- reward.py ----------------------------------------------------------------------------
    Mutation("reward-incorrect-but-fast", R, "    if not correct:\n        return -1\n    if faster_than_eager and",
             "    if not correct and not faster_than_eager:\n        return -1\n    if faster_than_eager and", REWARD,
             "an incorrect kernel rewarded for its speed"),
    Mutation("reward-2-for-compile-only", R, "    if faster_than_eager:\n        return 2",
             "    if faster_than_eager or faster_than_compile:\n        return 2", REWARD,
             "reward 2 for a kernel slower than eager"),
    Mutation("workloads-arithmetic-mean", R, "clears(math.exp(-sum(math.log(u) for u in uppers) / len(uppers)), 1.0, margin)",
             "clears(len(uppers) / sum(uppers), 1.0, margin)", REWARD, "the claim over workloads on the arithmetic mean"),
    Mutation("workloads-any-empty-ok", R, "if not ratio_sets or any(not r for r in ratio_sets):",
             "if not ratio_sets or all(not r for r in ratio_sets):", REWARD, "a workload with no rounds ignored"),
    Mutation("score-no-clip", R, "return max(-4.0, min(4.0, math.log2(speedup_vs_compile)))",
             "return math.log2(speedup_vs_compile)", REWARD, "the continuous score unbounded"),
    # ---- timing.py ----------------------------------------------------------------------------
    Mutation("clears-tie-counts", T, "speedup_lower * (1 - margin) > p", "speedup_lower * (1 - margin) >= p", TIMING,
             "a tie at the margin credited"),
    Mutation("clearly-faster-lower-bound", T, "_, upper = median_interval(ratios, confidence)",
             "upper, _ = median_interval(ratios, confidence)", TIMING, "the optimistic end of the interval decides"),
    Mutation("interval-upper-off-by-one", T, "hi = min(n - 1, n - j)", "hi = min(n - 1, n - j - 1)", TIMING,
             "an interval one order statistic too narrow"),
    Mutation("interval-one-sided-alpha", T, "if cdf + p > alpha / 2:", "if cdf + p > alpha:", TIMING,
             "the interval at 98% (alpha not split between the tails)"),
    Mutation("clearly-faster-no-margin", T, "return upper > 0 and clears(1 / upper, 1.0, margin)",
             "return upper > 0 and clears(1 / upper, 1.0, 0.0)", TIMING, "any speedup credited as more than 5%"),
    # ---- verify.py ----------------------------------------------------------------------------
    Mutation("verify-nonfinite-mismatch", V, "if bool((r_finite.logical_not() & ~same).any()):", "if False:", VERIFY,
             "a finite value accepted where the reference is NaN / Inf"),
    Mutation("verify-dtype-ignored", V, "if ref.dtype != cand.dtype:",
             "if ref.dtype != cand.dtype and ref.is_floating_point() != cand.is_floating_point():", VERIFY,
             "a float64 output accepted for a float32 reference"),
    Mutation("verify-no-norm-check", V, "        if err > rel:", "        if err > rel * 100:", VERIFY,
             "a wrong formula with tiny outputs accepted"),
    Mutation("verify-norm-floor", V, "NORM_FLOOR_RMS = 1e-5", "NORM_FLOOR_RMS = 1e-3", VERIFY,
             "the norm check blind below an RMS of 1e-3"),
    Mutation("verify-strict-bound", V, "n_bad += int((diff > limit).sum())", "n_bad += int((diff >= limit).sum())", VERIFY,
             "an output exactly at the tolerance refused"),
    Mutation("verify-signed-rtol", V, "limit = r.abs().mul_(rtol).add_(atol)", "limit = r.mul(rtol).add_(atol)", VERIFY,
             "negative references get a smaller tolerance"),
    Mutation("verify-int-off-by-one", V, "n_bad = sum(int((r != c).sum()) for r, c in _slabs(ref, cand))",
             "n_bad = sum(int(((r.double() - c.double()).abs() > 1).sum()) for r, c in _slabs(ref, cand))", VERIFY,
             "integers off by one accepted"),
    Mutation("verify-norm-rel-from-atol", V, "rel = tol.rel_norm if tol.rel_norm is not None else max(atol, rtol)",
             "rel = max(atol, rtol)", VERIFY, "the norm tolerance ignores the configured one"),
    # ---- the baseline cache -------------------------------------------------------------------
    Mutation("baseline-key-no-precision", "src/cuda_agent/evaluation/baselines.py",
             'extra = () if precision in (None, "fp32") else (precision,)', "extra = ()", BASELINE,
             "an fp16 run reuses the fp32 baseline"),
    Mutation("baseline-stored-when-cached", "src/cuda_agent/evaluation/judge.py",
             'if not measured_compile or not solo.get("compile")',
             'if not solo.get("compile")', BASELINE,
             "a baseline re-stored from a run that did not measure compile"),
    Mutation("baseline-drift-unclamped", "src/cuda_agent/evaluation/evaluator.py",
             "drift = min(2.0, max(0.5, median(eager) / cached.eager.median))",
             "drift = median(eager) / cached.eager.median", BASELINE, "a cached compile time scaled without bound"),
    # ---- judge.py: the timing guards as units -------------------------------------------------
    Mutation("judge-first-call-only", "src/cuda_agent/evaluation/judge.py",
             "for i, (ref, got) in enumerate(zip(eager_outs, self.pending)):",
             "for i, (ref, got) in enumerate(zip(eager_outs[:1], self.pending[:1])):", JUDGE,
             "only the first call of a timed batch compared"),
    Mutation("judge-batch-compare-skipped", "src/cuda_agent/evaluation/judge.py",
             "if same and compare_outputs(torch.stack(eager_outs), torch.stack(self.pending), self.tol).ok:",
             "if same:", JUDGE, "a batch of same-shaped outputs accepted unread"),
    Mutation("judge-one-factor-per-tensor", "src/cuda_agent/evaluation/judge.py",
             "scale = torch.rand(x.shape, generator=gen, device=self.device, dtype=torch.float32)",
             "scale = torch.rand((), generator=gen, device=self.device, dtype=torch.float32)", JUDGE,
             "every call of a round scaled by one factor (an output cached by ratio pays)"),
    Mutation("judge-small-scale", "src/cuda_agent/evaluation/judge.py",
             "else scale.mul_(0.4).add_(0.8)", "else scale.mul_(0.004).add_(0.998)", JUDGE,
             "round values within 0.2% of each other (inside the tolerance: cached outputs pass)"),
    Mutation("judge-same-values-every-round", "src/cuda_agent/evaluation/judge.py",
             "        gen.manual_seed(seed)\n", "        gen.manual_seed(0)\n", JUDGE,
             "the same values in every round and every evaluation"),
    # ---- sandbox.py: Landlock -----------------------------------------------------------------
    Mutation("landlock-no-refer", SB, "write = _FS_WRITE_V1 | (_FS_REFER if abi >= 2 else 0)", "write = _FS_WRITE_V1 | 0", SANDBOX,
             "renames across scratch subdirectories refused"),
    Mutation("landlock-no-remove-file", SB, "(1, 4, 5, 6, 7, 8, 9, 10, 11, 12))", "(1, 4, 6, 7, 8, 9, 10, 11, 12))",
             SANDBOX, "files outside scratch deleted"),
    Mutation("landlock-no-make-sym", SB, "(1, 4, 5, 6, 7, 8, 9, 10, 11, 12))", "(1, 4, 5, 6, 7, 8, 9, 10, 11))",
             SANDBOX, "symlinks planted outside scratch"),
    Mutation("landlock-tcp-connect", SB, "net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0",
             "net = _NET_BIND_TCP if abi >= 4 else 0", SANDBOX, "TCP connections out"),
    Mutation("landlock-no-signal-scope", SB, "scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0",
             "scoped = _SCOPE_ABSTRACT_UNIX if abi >= 6 else 0", SANDBOX, "signals to the judge"),
    Mutation("landlock-no-abstract-scope", SB, "scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0",
             "scoped = _SCOPE_SIGNAL if abi >= 6 else 0", SANDBOX, "abstract unix sockets of the host reached"),
    Mutation("landlock-file-grant-no-truncate", SB, "granted & (_FS_WRITE_FILE | _FS_TRUNCATE | _FS_EXECUTE)",
             "granted & (_FS_WRITE_FILE | _FS_EXECUTE)", SANDBOX, "/dev/null cannot be opened for writing"),
    Mutation("landlock-exec-unhandled", SB, "handled = fs | (_FS_EXECUTE if executable is not None else 0)",
             "handled = fs", SANDBOX, "a JIT language's loader may execute anything"),
    Mutation("sandbox-no-size-limit", SB, '("file_size", resource.RLIMIT_FSIZE, file_size_bytes)',
             '("file_size", resource.RLIMIT_FSIZE, None)', SANDBOX, "the disk filled from scratch"),
    Mutation("sandbox-device-paths-dropped", SB, "paths = [p for p in [scratch, *device_write_paths(gpu), *writable] if p.exists()]",
             "paths = [p for p in [scratch, *writable] if p.exists()]", SANDBOX,
             "/dev/null (and the GPU's nodes) not writable: honest libraries fail"),
    Mutation("sandbox-spawn-filter-in-strict-mode", SB, "report.update(deny_syscalls(allow_processes=spawn))",
             "report.update(deny_syscalls(allow_processes=True))", SANDBOX, "compiled candidates may fork and exec"),
    # ---- sandbox.py: seccomp ------------------------------------------------------------------
    Mutation("seccomp-vfork-thread", SB, "(_JSET, 2, 0, _CLONE_NEW_NAMESPACES | _CLONE_VFORK)",
             "(_JSET, 2, 0, _CLONE_NEW_NAMESPACES)", SANDBOX, "a vfork-style thread escapes the freeze"),
    Mutation("seccomp-no-ptrace", SB, '"ptrace": (101, 117), ', "", SANDBOX, "ptrace of the judge"),
    Mutation("seccomp-affinity-of-others", SB, '_SELF_TARGET_SYSCALLS = {"sched_setaffinity": (203, 122), ',
             "_SELF_TARGET_SYSCALLS = {", SANDBOX, "the baseline client pinned to one CPU"),
    Mutation("seccomp-kill-anyone", SB, '_OWN_PID_SYSCALLS = {"kill": (62, 129), ', "_OWN_PID_SYSCALLS = {", SANDBOX,
             "signals to other processes"),
    Mutation("seccomp-no-setpgid", SB, '"setpgid": (109, 154), ', "", SANDBOX, "leaving the judge's process group"),
    Mutation("seccomp-clone3-allowed", SB, "prog += [(_JEQ, 0, 1, nr_clone3), (_RET, 0, 0, enosys)]", "pass", SANDBOX,
             "clone3, whose flags the filter cannot read"),
    Mutation("seccomp-no-tsync", SB, "ctypes.c_uint(1), ctypes.c_uint(1), ctypes.byref(fprog)",
             "ctypes.c_uint(1), ctypes.c_uint(0), ctypes.byref(fprog)", SANDBOX,
             "threads started before the filter (OpenMP, the driver's) run unfiltered"),
    Mutation("seccomp-x32-allowed", SB, "prog += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _RET_KILL_PROCESS)]", "pass",
             SANDBOX, "the x32 ABI bypasses the table"),
    # ---- symbols.py ---------------------------------------------------------------------------
    Mutation("symbols-no-std-async", SY, "|std::async|", "|", SYMBOLS, "std::async allowed"),
    Mutation("symbols-no-future", SY, "|std::__future_base::\\w+.*", "", SYMBOLS, "std::async's worker allowed"),
    Mutation("symbols-no-host-callback", SY, "|cudaLaunchHostFunc|", "|", SYMBOLS, "CUDA host callbacks allowed"),
    Mutation("symbols-no-dlsym", SY, "(dlopen|dlmopen|dlsym|", "(dlopen|dlmopen|", SYMBOLS, "dlsym allowed"),
    Mutation("symbols-no-syscall-rule", SY, 'r"(syscall|__syscall\\w*|__libc_syscall)"', 'r"(__libc_syscall)"', SYMBOLS,
             "syscall(2) allowed"),
    Mutation("symbols-no-syscall-insn", SY, 'rb"\\x0f\\x05|\\x0f\\x34|\\xcd\\x80"', 'rb"\\x0f\\x34|\\xcd\\x80"', SYMBOLS,
             "a raw syscall instruction in the library"),
    Mutation("symbols-allow-overrides-deny", SY,
             'if rx.fullmatch(name) and not (rule == "aten-compute-in-cpp" and _allowed(backend).fullmatch(name)):',
             "if rx.fullmatch(name) and not _allowed(backend).fullmatch(name):", SYMBOLS,
             "std::thread, fopen, ... allowed through the std:: / libc allow-list"),
    Mutation("symbols-no-stream-creation", SY, 'r"(cu(da)?StreamCreate\\w*)"', 'r"(cudaStreamCreate)"', SYMBOLS,
             "cudaStreamCreateWithFlags allowed"),
    Mutation("symbols-no-fstream", SY, "|std::basic_[io]?fstream.*", "", SYMBOLS, "C++ file streams allowed"),
]


def load_extra(path: Path) -> list[Mutation]:
    return [Mutation(**m) for m in json.loads(path.read_text())]


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    shutil.copytree(ROOT / "src", dest / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", dest / "tests", ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")


def _pytest(tree: Path, tests: list[str], python: str, timeout: float) -> tuple[int, str]:
    # unit tests only: no plugins, no tests/conftest.py (its workspace fixtures import torch and
    # the CPU backend; none of the mirrored tests uses them): ~3 s a run instead of ~10 on 2 cores
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "-W", "ignore::pytest.PytestConfigWarning",
           "-rfE", "--no-header", "-o", "addopts=", *tests]
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return proc.returncode, proc.stdout + proc.stderr


def _failed_ids(output: str) -> list[str]:
    return [m[1] for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", output, re.M)]


def _log(line: str) -> None:
    print(line, flush=True)


def check(mutations: list[Mutation], python: str, timeout: float, log=_log) -> dict:
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        probe = subprocess.run([python, "-c", "import cuda_agent; print(cuda_agent.__file__)"], cwd=tree,
                               env={**os.environ, "PYTHONPATH": str(tree / "src")}, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(tree)):
            raise SystemExit(f"the copy's cuda_agent is not the one imported: {probe.stdout or probe.stderr}")
        selections = sorted({t for m in mutations for t in m.tests})
        rc, out = _pytest(tree, selections, python, timeout)
        baseline = {"passed": rc == 0, "tests": selections, "tail": out.strip().splitlines()[-1:] if out else []}
        log(f"unmutated tree: {'pass' if rc == 0 else 'FAIL'} ({baseline['tail']})")
        if rc != 0:
            return {"baseline": baseline, "results": [], "summary": {"baseline_failed": True}}
        results: list[Outcome] = []
        for m in mutations:
            path = tree / m.file
            original = path.read_text()
            t0 = time.time()
            hits = original.count(m.old)
            if hits != 1:
                results.append(Outcome(m.id, m.file, "stale", 0.0, lets_through=m.lets_through,
                                       detail=f"old text found {hits} times"))
                log(f"{m.id:34s} STALE (old text found {hits} times)")
                continue
            path.write_text(original.replace(m.old, m.new))
            try:
                rc, out = _pytest(tree, m.tests, python, timeout)
            finally:
                path.write_text(original)
            failed = _failed_ids(out)
            status = "survived" if rc == 0 else "killed" if rc == 1 else "error"
            detail = "" if rc in (0, 1) else f"pytest exit {rc}: {out.strip().splitlines()[-1:] if out else ''}"
            results.append(Outcome(m.id, m.file, status, round(time.time() - t0, 2), failed, m.lets_through, detail))
            log(f"{m.id:34s} {status.upper():8s} {len(failed):3d} failing  {(failed or [''])[0]}")
    counts = {s: sum(r.status == s for r in results) for s in ("killed", "survived", "stale", "error")}
    return {"baseline": baseline, "summary": {**counts, "total": len(results), "seconds": round(time.time() - started, 1)},
            "results": [asdict(r) for r in results]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="mutation ids to run")
    ap.add_argument("--mutations", type=Path, help="a JSON list of extra mutations (id, file, old, new, tests)")
    ap.add_argument("--no-builtin", action="store_true", help="run only the --mutations file")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per pytest run")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mutation_check.json")
    args = ap.parse_args(argv)
    muts = [] if args.no_builtin else list(MUTATIONS)
    if args.mutations:
        muts += load_extra(args.mutations)
    if args.only:
        muts = [m for m in muts if m.id in set(args.only)]
    ids = [m.id for m in muts]
    if len(ids) != len(set(ids)):
        raise SystemExit("duplicate mutation ids")
    report = check(muts, args.python, args.timeout)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    s = report["summary"]
    print(json.dumps(s))
    if s.get("baseline_failed") or s.get("stale") or s.get("error"):
        return 2
    return 1 if s.get("survived") else 0


if __name__ == "__main__":
    sys.exit(main())
