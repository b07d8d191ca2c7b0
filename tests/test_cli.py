"""The command line a newcomer meets (issue 18): exit codes, one error line, bounded waits.

Cheap on purpose: static-check failures, bad paths and fake run folders show the behaviour;
one real evaluation (a hanging forward under --timeout) and one example run are the only
workers started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.main import get_command
from typer.testing import CliRunner

from cuda_agent.cli import app, results_table
from cuda_agent.evaluation import EvalResult, TimeMs
from cuda_agent.exit_codes import ExitCode, guard_all

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def assert_one_error(r, code: int, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output, r.output
    lines = error_lines(r.output)
    assert len(lines) == 1, r.output
    for n in needles:
        assert n in lines[0], r.output


@pytest.fixture()
def starter(tmp_path: Path, cache_dir: Path) -> Path:
    """An untouched starter workspace: the static checks reject it before anything builds."""
    ws = tmp_path / "ws"
    r = invoke("workspace", "swish", str(ws), "--backend", "cpu")
    assert r.exit_code == 0, r.output
    return ws


# ---- 1. exit codes -----------------------------------------------------------------------
def test_codes_are_the_documented_ones() -> None:
    assert [int(c) for c in (ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE, ExitCode.INFRA)] == [0, 1, 2, 3]
    assert "0 correct" in (app.info.help or "") and "3 infrastructure" in (app.info.help or "")


def test_evaluate_exits_1_when_the_reward_is_minus_1(starter: Path) -> None:
    r = invoke("evaluate", str(starter))
    assert r.exit_code == ExitCode.FAILED, r.output
    assert "reward -1" in r.output
    from cuda_agent.backends import get_backend  # refused before the judge ran: still the device's name

    assert f" on {get_backend('cpu').device_name()}" in r.output, r.output
    r = invoke("evaluate", str(starter), "--json")
    assert r.exit_code == ExitCode.FAILED and json.loads(r.output)["reward"] == -1


def test_workspace_scripts_stop_a_shell_chain_at_a_failing_verify(starter: Path) -> None:
    out = subprocess.run(["sh", "-c", "./verify.sh >/dev/null && echo REACHED; echo rc=$?"], cwd=starter,
                         capture_output=True, text=True, timeout=120)
    assert "REACHED" not in out.stdout and "rc=1" in out.stdout, out.stdout + out.stderr
    out = subprocess.run(["./profile.sh", "--json"], cwd=starter, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and json.loads(out.stdout)["stage"] == "guard", out.stderr


USAGE_ERRORS = [
    (["workspace", "/nonexistent/task.py", "OUT"], "no such task file: /nonexistent/task.py"),
    (["workspace", "no_such_example", "OUT"], "neither a file nor a bundled example"),
    (["workspace", "swish", "OUT", "--backend", "gpu"], "unknown backend"),
    (["build", "NOWS"], "not a cuda-agent workspace"),
    (["evaluate", "NOWS"], "not a cuda-agent workspace"),
    (["examples", "--only", "nosuch"], "no bundled example named nosuch"),
    (["optimize", "/nonexistent/task.py", "--backend", "cpu", "--policy", "scripted"], "/nonexistent/task.py"),
    (["bench", "run", "/nonexistent", "--solutions", "examples", "--out", "OUT"], "/nonexistent"),
    (["bench", "report", "NOWS"], "holds no benchmark run"),
    (["view", "NOWS"], "holds no trajectories"),
    (["bench", "compare", "NOWS", "NOWS"], "holds no benchmark run"),
    (["bench", "export-timing", "NOWS", "OUT"], "holds no benchmark run"),
    (["data", "report", "NOWS"], "no candidates.jsonl"),
    (["data", "similarity", "/nonexistent/task.py", "examples"], "/nonexistent/task.py"),
    (["data", "synth", "OUT", "--window", "5", "1"], "window_ms"),
    (["train", "filter", "/nonexistent.jsonl", "-o", "OUT"], "/nonexistent.jsonl"),
    (["train", "verl-data", "/nonexistent", "-o", "OUT"], "/nonexistent"),
    (["train", "rft", "-c", "/nonexistent.yaml"], "/nonexistent.yaml"),
    (["train", "rl", "-c", "/nonexistent.yaml"], "/nonexistent.yaml"),
]


@pytest.mark.parametrize("args,needle", USAGE_ERRORS, ids=[" ".join(a[:2]) for a, _ in USAGE_ERRORS])
def test_every_verb_reports_bad_input_in_one_error_line_and_exits_2(tmp_path: Path, args: list[str],
                                                                     needle: str) -> None:
    (tmp_path / "NOWS").mkdir()
    subs = {"OUT": str(tmp_path / "out"), "NOWS": str(tmp_path / "NOWS")}
    r = invoke(*[subs.get(a, a) for a in args])
    assert_one_error(r, ExitCode.USAGE, needle)


def test_typer_usage_errors_exit_2_too() -> None:
    r = invoke("evaluate", "--trials", "zero")
    assert r.exit_code == ExitCode.USAGE
    r = invoke("train", "verl-configs")  # --model and --data are required
    assert r.exit_code == ExitCode.USAGE


def _verbs(cmd, path: str = "cuda-agent"):  # type: ignore[no-untyped-def]
    """Every leaf command of the app (typer may vendor click: duck-typed, not isinstance)."""
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _verbs(sub, f"{path} {name}")
    else:
        yield path, cmd


def test_every_verb_goes_through_the_one_error_path() -> None:
    """A verb added later is guarded too: guard_all runs after the layers register."""
    def guarded(fn) -> bool:  # type: ignore[no-untyped-def]
        while fn is not None:
            if getattr(fn, "__cuda_agent_guarded__", False):
                return True
            fn = getattr(fn, "__wrapped__", None)
        return False

    verbs = list(_verbs(get_command(app)))
    assert len(verbs) >= 20
    assert [p for p, c in verbs if not guarded(c.callback)] == []


def test_an_unexpected_error_is_one_line_and_exit_3_and_ctrl_c_is_130(monkeypatch) -> None:
    demo = typer.Typer()

    @demo.command()
    def boom(kind: str) -> None:
        if kind == "crash":
            raise RuntimeError("the device went away\nsecond line")
        if kind == "module":
            raise ModuleNotFoundError("No module named 'trl'", name="trl")
        raise KeyboardInterrupt

    @demo.command()
    def other() -> None:
        pass

    guard_all(demo)
    r = runner.invoke(demo, ["boom", "crash"])
    assert_one_error(r, ExitCode.INFRA, "the device went away", "RuntimeError")
    assert "second line" not in r.output
    r = runner.invoke(demo, ["boom", "module"])
    assert_one_error(r, ExitCode.INFRA, "'trl'", "cuda-agent[")
    r = runner.invoke(demo, ["boom", "ctrl-c"])
    assert_one_error(r, ExitCode.INTERRUPTED, "interrupted")
    monkeypatch.setenv("CUDA_AGENT_TRACEBACK", "1")
    r = runner.invoke(demo, ["boom", "crash"])
    assert r.exit_code == ExitCode.INFRA and "Traceback" in r.output


def test_a_missing_compiler_is_an_infrastructure_fault(tmp_path: Path, cache_dir: Path) -> None:
    ws = tmp_path / "ws"
    assert invoke("workspace", "swish", str(ws), "--backend", "cpu", "--with-solution").exit_code == 0
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "CUDA_AGENT_CACHE": str(tmp_path / "fresh-cache")}
    out = subprocess.run([sys.executable, "-m", "cuda_agent", "build", str(ws)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == ExitCode.INFRA, out.stdout + out.stderr
    assert "compiler not found" in out.stdout


# ---- 2. bounded waits --------------------------------------------------------------------
@pytest.mark.parametrize("verb,option", [("evaluate", "--timeout"), ("examples", "--timeout"),
                                         ("bench run", "--timeout"), ("optimize", "--eval-timeout")])
def test_every_evaluating_verb_takes_a_timeout(verb: str, option: str) -> None:
    cmd = get_command(app)
    for part in verb.split():
        cmd = cmd.commands[part]  # type: ignore[attr-defined]
    assert any(option in p.opts for p in cmd.params), f"{verb} has no {option}"


@pytest.mark.slow
def test_a_hanging_forward_is_stopped_at_the_timeout_given(tmp_path: Path, cache_dir: Path) -> None:
    ws = tmp_path / "ws"
    assert invoke("workspace", "swish", str(ws), "--backend", "cpu", "--with-solution").exit_code == 0
    model = ws / "model_new.py"
    model.write_text(model.read_text().replace("    def forward(self, x):\n",
                                               "    def forward(self, x):\n        while x.numel() > 0:\n"
                                               "            pass\n"))
    t0 = time.monotonic()
    r = invoke("evaluate", str(ws), "--timeout", "5", "--no-compile-baseline", "--json")
    took = time.monotonic() - t0
    assert r.exit_code == ExitCode.FAILED, r.output
    result = json.loads(r.output)
    assert result["reward"] == -1 and "timed out" in result["reason"]
    assert took < 90, f"a 5 s limit took {took:.0f} s"  # build + worker start on a busy box, not 600 s
    assert result["stage"] == "verify" and "5 s" in result["reason"], result["reason"]  # names stage and limit


# ---- 5. the baselines before any kernel exists --------------------------------------------
def test_profile_shows_the_baselines_of_an_untouched_starter(starter: Path) -> None:
    out = subprocess.run(["./profile.sh", "--baselines", "--no-compile-baseline", "--json"], cwd=starter,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    base = json.loads(out.stdout)
    assert base["eager"]["median"] > 0 and base["compile"] is None
    assert "--baselines" in (starter / "SKILL.md").read_text()


# ---- 3, 6. inputs that cannot be loaded ---------------------------------------------------
@pytest.fixture()
def folder_with_a_bad_task(tmp_path: Path) -> Path:
    from cuda_agent.examples import get_example

    d = tmp_path / "tasks"
    d.mkdir()
    (d / "1_broken.py").write_text("import torch\nclass Model(:\n")
    (d / "2_swish.py").write_text(get_example("swish").task.source)
    return d


def test_verl_data_on_a_folder_with_a_bad_task_is_one_error_line(folder_with_a_bad_task: Path, tmp_path: Path):
    r = invoke("train", "verl-data", str(folder_with_a_bad_task), "-o", str(tmp_path / "v.parquet"))
    assert_one_error(r, ExitCode.USAGE, "1_broken.py", "does not parse")


def test_bench_run_counts_and_shows_a_task_it_cannot_load(folder_with_a_bad_task: Path, tmp_path: Path):
    empty = tmp_path / "no-solutions"
    empty.mkdir()
    r = invoke("bench", "run", str(folder_with_a_bad_task), "--solutions", str(empty), "--backend", "cpu",
               "--out", str(tmp_path / "run"), "--no-report")
    assert r.exit_code == ExitCode.FAILED, r.output
    assert "could not load" in r.output and "1_broken.py" in r.output
    assert "1 of 2 task(s) could not be loaded" in r.output


def test_similarity_counts_and_shows_a_task_it_cannot_load(folder_with_a_bad_task: Path) -> None:
    r = invoke("data", "similarity", str(folder_with_a_bad_task / "2_swish.py"), str(folder_with_a_bad_task))
    assert r.exit_code == ExitCode.FAILED, r.output
    assert r.output.startswith("1.000") and "1_broken.py" in r.output and "1 of 2 input task(s)" in r.output


# ---- 4. rule ids survive human output ------------------------------------------------------
def test_human_output_keeps_the_rule_ids(starter: Path) -> None:
    r = invoke("evaluate", str(starter))
    assert "[tensor-arithmetic]" in r.output or "[torch-compute]" in r.output, r.output


# ---- 7. reports degrade without matplotlib ---------------------------------------------------
def test_bench_report_without_matplotlib_writes_the_rest(tmp_path: Path, monkeypatch) -> None:
    from cuda_agent.benchmark import RunInfo, TaskRecord
    from cuda_agent.benchmark.store import ResultStore
    from cuda_agent.evaluation import EvalConfig

    store = ResultStore(tmp_path / "run")
    store.begin(RunInfo(suite="s", solutions="x", backend="cpu", config=EvalConfig(backend="cpu"),
                        tasks=["level1/1_x"], levels={"level1/1_x": 1}))
    store.append(TaskRecord(task="level1/1_x", level=1,
                            result=EvalResult(task="level1/1_x", task_hash="h", backend="cpu")))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    r = invoke("bench", "report", str(tmp_path / "run"))
    assert r.exit_code == ExitCode.OK, r.output
    assert "Traceback" not in r.output and "report.html skipped" in r.output and "matplotlib" in r.output
    assert (tmp_path / "run" / "report.md").is_file() and (tmp_path / "run" / "report.json").is_file()
    assert not (tmp_path / "run" / "report.html").exists()


# ---- 8. tables and help --------------------------------------------------------------------
def test_the_results_table_never_cuts_a_task_name_at_80_columns() -> None:
    names = ["examples/matmul_scale_gelu", "examples/gemm_bias_relu", "level2/76_Gemm_Add_ReLU"]
    results = [EvalResult(task=n, task_hash="h", backend="cpu", reward=3, seconds=42.0,
                          time_ms=TimeMs(eager=1.234, compile=1.1, candidate=0.5),
                          speedup_vs_eager=2.47, speedup_vs_compile=2.2) for n in names]
    console = Console(width=80, record=True, force_terminal=False)
    console.print(results_table(results))
    text = console.export_text()
    for n in names:
        assert n in text, text


def test_every_option_of_every_verb_has_help_text() -> None:
    missing = [f"{path} {p.opts[0]}" for path, cmd in _verbs(get_command(app)) for p in cmd.params
               if p.param_type_name == "option" and p.name != "help" and not (getattr(p, "help", "") or "").strip()]
    assert missing == []


# ---- 9. progress while the examples run ----------------------------------------------------
@pytest.mark.slow
def test_examples_show_progress_and_exit_by_result(tmp_path: Path, cache_dir: Path) -> None:
    """One example under a 1 s worker limit: cheap, fails, and the output says what ran."""
    r = invoke("examples", "--backend", "cpu", "--only", "swish", "--timeout", "1", "--no-compile-baseline")
    assert r.exit_code == ExitCode.FAILED, r.output
    lines = r.output.splitlines()
    start = next(i for i, l in enumerate(lines) if "[1/1] swish: evaluating" in l)
    done = next(i for i, l in enumerate(lines) if "[1/1] swish: reward -1" in l)
    assert start < done and "s each the first time" in r.output


def test_examples_script_says_what_it_does_before_the_long_part() -> None:
    text = (REPO / "scripts" / "examples.sh").read_text()
    assert "minutes" in text and "cuda-agent examples" in text


def test_a_folder_held_by_a_live_run_is_an_input_error(tmp_path: Path) -> None:
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from cuda_agent.isolation.processes import RunLock; "
                               "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = invoke("bench", "run", "examples", "--only", "swish", "--solutions", "examples", "--backend", "cpu",
                   "--out", str(out), "--no-report")
        assert_one_error(r, ExitCode.USAGE, str(holder.pid))
    finally:
        holder.kill()
        holder.wait()


def test_workspace_takes_a_language_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    r = invoke("workspace", "swish", str(tmp_path / "t"), "--backend", "cuda", "--language", "triton",
               "--with-solution")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "t" / "SKILL.md").read_text().lower().count("triton") > 0
    assert any(p.suffix == ".py" for p in (tmp_path / "t" / "kernels").iterdir())
    bad = invoke("workspace", "swish", str(tmp_path / "u"), "--backend", "cpu", "--language", "cobol")
    assert bad.exit_code != 0 and "unknown language" in bad.output


# ---- issue 28: what a newcomer meets --------------------------------------------------------
@pytest.fixture()
def no_cuda(monkeypatch):  # type: ignore[no-untyped-def]
    """This machine as a CPU box, also where a GPU is present (a CPU-only torch is one already)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


GPU_VERBS_WITHOUT_A_GPU = [
    ["examples", "--backend", "cuda", "--only", "swish"],
    ["optimize", "swish", "--backend", "cuda", "--policy", "scripted"],
    ["bench", "run", "examples", "--solutions", "examples", "--backend", "cuda", "--out", "OUT"],
    ["evaluate", "CUDA_WS"],
    ["evaluate", "CUDA_WS", "--baselines"],
]


@pytest.mark.parametrize("args", GPU_VERBS_WITHOUT_A_GPU, ids=[" ".join(a[:2]) for a in GPU_VERBS_WITHOUT_A_GPU])
def test_a_gpu_verb_without_a_gpu_says_so_in_one_line_before_any_work(tmp_path: Path, no_cuda, args) -> None:
    ws = tmp_path / "cuda_ws"
    r = invoke("workspace", "swish", str(ws), "--backend", "cuda", "--with-solution")
    assert r.exit_code == 0 and "note: its scripts cannot run on this machine" in r.output, r.output
    subs = {"OUT": str(tmp_path / "out"), "CUDA_WS": str(ws)}
    t0 = time.monotonic()
    r = invoke(*[subs.get(a, a) for a in args])
    assert_one_error(r, ExitCode.INFRA, "the cuda backend cannot run here", "--backend cpu")
    assert time.monotonic() - t0 < 10, "refused before any build or worker"
    assert not (tmp_path / "out").exists() and not (ws / "build").exists()


def test_the_device_check_names_the_cause() -> None:
    from cuda_agent.backends import missing_device

    assert missing_device("cpu") is None
    import torch

    why = missing_device("cuda")
    if torch.version.cuda is None:
        assert why and "build without cuda support" in why and torch.__version__ in why
    elif not torch.cuda.is_available():
        assert why and "no cuda device" in why
    else:
        assert why is None


@pytest.mark.parametrize("verb", [[], ["optimize"], ["bench"], ["bench", "run"], ["data", "synth"], ["train", "rl"],
                                  ["evaluate"], ["examples"]])
def test_help_is_never_cut_at_80_columns(verb: list[str]) -> None:
    r = runner.invoke(app, [*verb, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert r.exit_code == 0, r.output
    assert "…" not in r.output and "╭" not in r.output, r.output
    assert all(len(line) <= 80 for line in r.output.splitlines()), r.output
    cmd = get_command(app)
    for part in verb:
        cmd = cmd.commands[part]  # type: ignore[attr-defined]
    text = " ".join(r.output.split())
    for p in cmd.params:
        for opt in p.opts if p.param_type_name == "option" else ():
            assert opt in text, f"{opt} missing from the help of {verb}"
    for name, sub in getattr(cmd, "commands", {}).items():  # a group lists each command's whole first sentence
        first = " ".join((sub.help or "").split(".")[0].split())
        assert first in text and "..." not in text.replace("[ARGS]...", "").replace("TASKS...", ""), text


def test_version() -> None:
    from importlib.metadata import version

    r = invoke("--version")
    assert r.exit_code == 0 and r.output.strip() == f"cuda-agent {version('cuda-agent')}"


USAGE_MISTAKES = [
    (["bench", "run", "examples", "--solutions", "examples"], "Missing option '--out'", " bench run --help)"),
    (["evaluate", "--no-such-flag"], "No such option: --no-such-flag", " evaluate --help)"),
    (["evaluate", "--trials", "zero"], "'--trials'", " evaluate --help)"),
    (["evalute"], "No such command 'evalute'", "(see "),
    (["train", "verl-configs"], "Missing option", " train verl-configs --help)"),
]


@pytest.mark.parametrize("args,needle,where", USAGE_MISTAKES, ids=[" ".join(a[:2]) for a, _, _ in USAGE_MISTAKES])
def test_a_usage_mistake_is_the_one_documented_error_line(args: list[str], needle: str, where: str) -> None:
    r = invoke(*args)
    assert_one_error(r, ExitCode.USAGE, needle, where)
    assert "╭" not in r.output and len(r.output.strip().splitlines()) == 1, r.output


POLICY_MISTAKES = [
    (["--policy", "anthropic", "--model", "claude-x"], "ANTHROPIC_API_KEY"),
    (["--policy", "anthropic", "--model", "claude-x", "--api-key-env", "MY_KEY"], "$MY_KEY"),
    (["--policy", "openai"], "--model"),
    (["--policy", "anthropic"], "--model"),
    (["--policy", "skynet"], "'openai', 'anthropic', 'local' or 'scripted'"),
    (["--policy", "scripted", "--script", "/nonexistent/replies.json"], "/nonexistent/replies.json"),
]


@pytest.mark.parametrize("opts,needle", POLICY_MISTAKES, ids=[" ".join(o[:2]) + str(i) for i, (o, _) in
                                                             enumerate(POLICY_MISTAKES)])
def test_policy_settings_are_checked_before_any_episode(tmp_path: Path, monkeypatch, opts, needle) -> None:
    for var in ("ANTHROPIC_API_KEY", "MY_KEY", "CUDA_AGENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    for var in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):  # what optimize sets for a log: undone after
        monkeypatch.setenv(var, "1")
    out = tmp_path / "run"
    t0 = time.monotonic()
    r = invoke("optimize", "swish", "--backend", "cpu", "--out", str(out), *opts)
    assert_one_error(r, ExitCode.USAGE, needle)
    assert time.monotonic() - t0 < 10 and not out.exists(), "refused before the run folder or a worker"


def test_a_closed_pipe_does_not_turn_into_an_error(tmp_path: Path) -> None:
    """`cuda-agent ... | head -1`: the reader leaves early; the verb finishes and exits by its result."""
    proc = subprocess.Popen([sys.executable, "-m", "cuda_agent", "workspace", "swish", str(tmp_path / "ws"),
                             "--backend", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    proc.stdout.close()  # type: ignore[union-attr]  # the reader is gone before the first line
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.wait(timeout=120) == 0, err
    assert "error" not in err and "Traceback" not in err and "BrokenPipe" not in err, err
    assert (tmp_path / "ws" / "model_new.py").is_file()


def _paper_workdir(tmp_path: Path, cpu: bool) -> Path:
    import shutil

    from tests.languages.cpp.test_paper import CPU_BINDING, CPU_KERNEL, FIXTURE

    root = tmp_path / "agent_workdir"
    shutil.copytree(FIXTURE, root)
    if cpu:  # the same files with the kernel in C++ (test_paper.py builds exactly these: cached by then)
        (root / "kernels" / "axpby.cu").unlink()
        (root / "kernels" / "axpby.cpp").write_text(CPU_KERNEL)
        (root / "kernels" / "axpby_binding.cpp").write_text(CPU_BINDING)
    return root


def test_adopted_fixed_files_are_checked_against_the_release(tmp_path: Path) -> None:
    import hashlib

    from cuda_agent.languages.cpp.paper import RELEASE_SHA256, differs_from_release

    root = _paper_workdir(tmp_path, cpu=True)
    differ = differs_from_release(root)
    # the test fixture is this project's own edition: every file whose bytes are not the release's is named
    assert differ == [rel for rel, sha in RELEASE_SHA256.items()
                      if hashlib.sha256((root / rel).read_bytes()).hexdigest() != sha]
    (root / "utils" / "__init__.py").write_text("")  # the release's is empty: this one matches
    assert "utils/__init__.py" not in differs_from_release(root)
    (root / "binding.cpp").unlink()
    assert "binding.cpp" in differs_from_release(root)


def test_the_release_agent_workdir_is_named_and_adopted_by_one_command(tmp_path: Path, cache_dir: Path,
                                                                        no_cuda) -> None:
    root = _paper_workdir(tmp_path, cpu=False)
    r = invoke("evaluate", str(root))  # not a workspace yet: the error says what to run
    assert_one_error(r, ExitCode.USAGE, "agent_workdir", "--adopt")
    r = invoke("evaluate", str(root), "--adopt")  # its kernels are .cu: the cuda backend, absent here
    assert_one_error(r, ExitCode.INFRA, "the cuda backend cannot run here")


@pytest.mark.slow
def test_evaluate_adopt_rewards_the_release_layout_and_then_guards_its_fixed_files(tmp_path: Path,
                                                                                   cache_dir: Path) -> None:
    root = _paper_workdir(tmp_path, cpu=True)
    r = invoke("evaluate", str(root), "--adopt", "--no-timing", "--json")
    assert r.exit_code == ExitCode.OK, r.output
    result = json.loads(r.output.splitlines()[-1])
    assert result["reward"] == 1 and result["correct"] and result["task"] == "paper/agent_workdir"
    assert "adopted" in r.output and result["build"]["library"].endswith(".pyext.so")
    (root / "utils" / "verification.py").write_text("print('[PASS] verify success')\n")
    r = invoke("evaluate", str(root), "--adopt", "--no-timing", "--json")  # reopened, not re-adopted as found
    assert r.exit_code == ExitCode.FAILED, r.output
    result = json.loads(r.output.splitlines()[-1])
    assert result["reward"] == -1 and "utils/verification.py" in result["reason"], result["reason"]


def test_workspace_scripts_survive_a_moved_clone(tmp_path: Path) -> None:
    """The interpreter a script names is gone (the clone moved): the python3 on PATH runs it, or
    one line says what to activate (exit 3)."""
    from cuda_agent.languages.base import tool_scripts

    script = tmp_path / "compile.sh"
    script.write_text(tool_scripts()["compile.sh"].replace(f"py={sys.executable}", "py=/moved/away/python", 1))
    script.chmod(0o755)
    assert "/moved/away/python" in script.read_text()
    venv_bin = str(Path(sys.executable).parent)  # holds a python3 with cuda_agent (PYTHONPATH: this checkout)
    env = {**os.environ, "PATH": f"{venv_bin}:/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == ExitCode.USAGE and "not a cuda-agent workspace" in out.stderr, out.stderr  # it ran
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/usr/bin/false")  # a python3 without cuda_agent
    out = subprocess.run([str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": f"{bare}:/usr/bin:/bin", "PYTHONPATH": ""})
    assert out.returncode == ExitCode.INFRA and out.stderr.count("error:") == 1, out.stderr
    assert "activate the .venv" in out.stderr
