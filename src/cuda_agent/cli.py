"""`cuda-agent <verb>`: a thin layer over the Python API."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .evaluation.config import RULES_HELP, RulesProfile
from .exit_codes import ExitCode, OneLineErrors, checked_backend, fail, for_rewards, guard_all

app = typer.Typer(add_completion=False, no_args_is_help=True, cls=OneLineErrors, rich_markup_mode=None,
                  help="Turn a PyTorch Model into a faster, verified custom kernel. Exit codes: 0 correct / "
                       "success, 1 evaluated and failed, 2 usage or input error, 3 infrastructure fault.")
console = Console(highlight=False)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"cuda-agent {version('cuda-agent')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            print("cuda-agent (not installed: run from a source tree)")
        raise typer.Exit(int(ExitCode.OK))


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Turn a PyTorch Model into a faster, verified custom kernel. Exit codes: 0 correct / success,
    1 evaluated and failed, 2 usage or input error, 3 infrastructure fault (docs/cli.md)."""

TIMEOUT_HELP = "seconds the evaluation's worker may run before it is stopped (default 600)"
ATOL_HELP = "absolute tolerance of the correctness check (default 1e-2, or the task's own)"
RTOL_HELP = "relative tolerance of the correctness check (default 1e-2, or the task's own)"


def _config(backend: Optional[str], timing: bool, compile_baseline: bool, trials: int,
            atol: Optional[float], rtol: Optional[float], guards: bool = True, timeout: Optional[float] = None,
            rules: RulesProfile = RulesProfile.paper):
    from .evaluation import EvalConfig

    return EvalConfig.from_options(backend, measure=timing, trials=trials, compile_baseline=compile_baseline,
                                   guards=guards, atol=atol, rtol=rtol, timeout_s=timeout, rules=rules.value)


@app.command()
def workspace(
    task: str = typer.Argument(..., help="a KernelBench .py file, or a bundled example name"),
    directory: Path = typer.Argument(..., help="where to create the workspace"),
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    force: bool = typer.Option(False, help="overwrite a non-empty directory"),
    with_solution: bool = typer.Option(False, help="bundled examples: also copy the reference solution"),
    language: str = typer.Option("cpp", help="what the kernels are written in: cpp (CUDA C++ / C++), triton, "
                                 "or paper (the CUDA Agent release's agent_workdir layout)"),
    rules: RulesProfile = typer.Option(RulesProfile.paper, help=RULES_HELP + "; SKILL.md states it"),
) -> None:
    """Create a workspace for one task."""
    from .examples import get_example, list_examples
    from .tasks import load_tasks
    from .workspace import create_workspace

    be = checked_backend(backend, need="name")  # laying out files needs no device; a note says so below
    example = None
    if Path(task).exists():
        loaded = load_tasks(task)
    elif Path(task).suffix == ".py" or "/" in task or "\\" in task:
        raise fail(f"no such task file: {task}")
    else:
        try:
            example = get_example(task)
        except KeyError:
            raise fail(f"{task} is neither a file nor a bundled example (examples: "
                       f"{', '.join(e.name for e in list_examples())})")
        loaded = [example.task]
    if len(loaded) != 1:
        raise fail(f"{task} holds {len(loaded)} tasks; a workspace takes one")
    try:
        ws = create_workspace(loaded[0], directory, be, overwrite=force, language=language, rules=rules.value)
    except (KeyError, ValueError) as exc:
        raise fail(str(exc.args[0]) if isinstance(exc, KeyError) else str(exc))
    if with_solution:
        if example is None:
            raise fail("--with-solution only applies to bundled examples")
        example.install_solution(ws.root, "triton" if language == "triton" else be)
    console.print(f"workspace for [bold]{ws.task.name}[/] ({be}) at {ws.root}\n"
                  f"next: cd {ws.root} && ./compile.sh && ./verify.sh && ./profile.sh")
    why = missing_device(be)
    if why:
        console.print(f"note: its scripts cannot run on this machine: {why}", markup=False, soft_wrap=True)


@app.command()
def build(directory: Path = typer.Argument(Path("."), help="workspace directory"),
          json_out: bool = typer.Option(False, "--json", help="print the result as JSON")) -> None:
    """Compile kernels/ into the extension (cached, parallel)."""
    from .backends import get_backend
    from .evaluation import EvalConfig
    from .isolation.paths import default_cache_dir
    from .languages import get_language
    from .workspace import open_workspace

    ws = open_workspace(directory)
    checked_backend(ws.backend, need="build")  # a build needs the device's torch headers, not the device
    backend = get_backend(ws.backend)
    lang = get_language(ws.language)  # the same build the evaluation runs: C++, Triton or the paper's layout
    res = lang.build(ws.root, backend, cache_dir=default_cache_dir(), timeout_s=EvalConfig().build_timeout_s)
    if json_out:
        print(res.model_dump_json())
    elif res.ok:
        lang.publish(ws.root, backend, res.library)
        console.print(f"[green]built[/] in {res.seconds:.1f}s ({res.compiled_units} compiled, "
                      f"{res.cached_units} cached)")
    else:
        console.print("[red]compile error[/]")
        console.print(res.log, markup=False)
    raise typer.Exit(int(ExitCode.OK if res.ok else ExitCode.INFRA if _toolchain_missing(res.log) else ExitCode.FAILED))


@app.command()
def evaluate(
    directory: Path = typer.Argument(Path("."), help="workspace directory"),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="--no-timing: build and verify only"),
    compile_baseline: bool = typer.Option(True, "--compile-baseline/--no-compile-baseline",
                                          help="time torch.compile too"),
    trials: int = typer.Option(5, min=1, help="correctness trials on fresh inputs"),
    atol: Optional[float] = typer.Option(None, help=ATOL_HELP),
    rtol: Optional[float] = typer.Option(None, help=RTOL_HELP),
    timeout: Optional[float] = typer.Option(None, min=1.0, help=TIMEOUT_HELP),
    guards: bool = typer.Option(True, "--guards/--no-guards", help="anti-hacking checks (research only: off)"),
    json_out: bool = typer.Option(False, "--json", help="print the breakdown as one JSON object"),
    baselines: bool = typer.Option(False, "--baselines", help="only time the reference (eager and torch.compile), "
                                   "no kernel needed: the times to beat"),
    rules: RulesProfile = typer.Option(RulesProfile.paper, help=RULES_HELP),
    adopt: bool = typer.Option(False, "--adopt", help="DIRECTORY is the CUDA Agent release's agent_workdir (or a "
                               "trajectory's copy of it): take it as it is, its model.py as the task"),
) -> None:
    """Build, verify and time a workspace; print the reward. Exit 0 if correct, 1 if not."""
    from .evaluation import evaluate as run_evaluation

    ws = _adopted(directory) if adopt else _opened(directory)
    checked_backend(ws.backend)
    if baselines:
        from .evaluation import measure_baselines

        base = measure_baselines(ws, _config(None, True, compile_baseline, trials, atol, rtol, guards, timeout, rules))
        if json_out:
            print(base.model_dump_json())
        else:
            comp = f"{base.compile.median:.4g} ms" if base.compile else "not measured"
            console.print(f"baselines for {ws.task.name}: eager {base.eager.median:.4g} ms, torch.compile {comp} "
                          f"(median per call; a kernel earns reward 2 / 3 when clearly faster than these)")
        raise typer.Exit(int(ExitCode.OK))
    result = run_evaluation(ws, _config(None, timing, compile_baseline, trials, atol, rtol, guards, timeout, rules))
    if json_out:
        print(result.model_dump_json())
    else:
        _print_result(result)
    raise typer.Exit(int(_exit_for(result)))


@app.command()
def examples(
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    only: Optional[list[str]] = typer.Option(None, help="run just these examples (repeatable)"),
    compile_baseline: bool = typer.Option(True, "--compile-baseline/--no-compile-baseline",
                                          help="time torch.compile too (its first measurement is cached)"),
    timeout: Optional[float] = typer.Option(None, min=1.0, help=TIMEOUT_HELP),
    out: Optional[Path] = typer.Option(None, help="also write results as JSON lines here"),
    rules: RulesProfile = typer.Option(RulesProfile.paper, help=RULES_HELP),
) -> None:
    """Evaluate every bundled example with its hand-written solution (the quickstart job)."""
    from .backends import backend_class
    from .evaluation import evaluate as run_evaluation
    from .examples import list_examples
    from .workspace import create_workspace

    be = checked_backend(backend)
    known = list_examples()
    unknown = sorted(set(only or []) - {e.name for e in known})
    if unknown:
        raise fail(f"no bundled example named {', '.join(unknown)} (examples: {', '.join(e.name for e in known)})")
    chosen = [e for e in known if not only or e.name in only]
    console.print(f"evaluating {len(chosen)} bundled example(s) on the [bold]{be}[/] backend: each builds, "
                  f"verifies and times{'' if backend_class(be).gpu else _CPU_EXAMPLE_COST}")
    results = []
    with tempfile.TemporaryDirectory(prefix="cuda-agent-examples-") as tmp, _progress(len(chosen)) as step:
        for k, ex in enumerate(chosen, 1):
            ws = create_workspace(ex.task, Path(tmp) / ex.name, be, rules=rules.value)
            ex.install_solution(ws.root, be)
            with step(k, ex.name):
                res = run_evaluation(ws, _config(be, True, compile_baseline, 5, None, None, timeout=timeout,
                                                 rules=rules))
            results.append(res)
            reason = res.reason.splitlines()[0] if res.reason else ""
            console.print(f"  [{k}/{len(chosen)}] {ex.name}: reward {res.reward:+d} in {res.seconds:.0f} s  "
                          f"{escape(reason)}")
            if out:
                with out.open("a") as fh:
                    fh.write(res.model_dump_json() + "\n")
    console.print(results_table(results))
    raise typer.Exit(int(max((_exit_for(r) for r in results), default=ExitCode.FAILED)))


def _opened(directory: Path):  # type: ignore[no-untyped-def]
    from .workspace import WorkspaceError, open_workspace

    try:
        return open_workspace(directory)
    except WorkspaceError as exc:
        if _looks_like_paper_workdir(directory):
            raise fail(f"{directory} looks like the CUDA Agent release's agent_workdir, not yet a cuda-agent "
                       f"workspace: `cuda-agent evaluate {directory} --adopt` evaluates it as it is") from exc
        raise


def _looks_like_paper_workdir(directory: Path) -> bool:
    return all((directory / f).exists() for f in ("binding_registry.h", "utils", "model.py", "model_new.py"))


def _adopted(directory: Path):  # type: ignore[no-untyped-def]
    """The release's agent_workdir as a workspace of the `paper` language: its fixed files are
    hashed as found the first time (a later edit shows as tampered; the judge builds with its own
    interface-compatible binding.cpp and never runs utils/), its model.py is the task, and the
    backend is what its kernels are written for (.cu: cuda). Adopted once; later calls reopen it."""
    from .backends import BACKEND_NAMES, HOST_BACKEND, backend_class
    from .tasks import Task
    from .workspace import WorkspaceError, adopt_workspace, open_workspace

    try:
        return open_workspace(directory)
    except WorkspaceError:
        pass
    if not (directory / "model.py").is_file():
        raise fail(f"{directory} has no model.py: not a CUDA Agent agent_workdir")
    kernels = list((directory / "kernels").glob("*")) if (directory / "kernels").is_dir() else []
    suffixes = {p.suffix for p in kernels}
    be = checked_backend(next((n for n in BACKEND_NAMES if backend_class(n).gpu
                               and backend_class(n).kernel_suffix in suffixes), HOST_BACKEND))
    task = Task.from_source((directory / "model.py").read_text(), name=f"paper/{directory.resolve().name}",
                            origin=str(directory / "model.py"))
    from .languages.cpp.paper import RELEASE, differs_from_release

    changed = differs_from_release(directory)
    ws = adopt_workspace(directory, task, be, "paper")
    console.print(f"adopted {ws.root} as a workspace of the release's layout (paper) on {be}; its fixed files "
                  + (f"are the release's ({RELEASE})" if not changed else
                     f"differ from the release's ({RELEASE}): {', '.join(changed)}"), markup=False)
    return ws


# what one example costs, measured by bench/examples_time.py (docs/cli.md); said before the run
_CPU_EXAMPLE_COST = " (on an idle 2-core CPU about 30 s each the first time, 15 s once cached)"


@contextlib.contextmanager
def _progress(total: int):  # type: ignore[no-untyped-def]
    """Live progress for a sequence of slow steps: a ticking bar on a terminal, a line per
    step start when the output is a log (so a piped run still shows it is alive)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    live = console.is_terminal
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console, transient=True, disable=not live)
    with bar:
        tid = bar.add_task("examples", total=total)

        @contextlib.contextmanager
        def step(k: int, name: str):  # type: ignore[no-untyped-def]
            if live:
                bar.update(tid, description=f"{name} (building, verifying, timing)")
            else:
                console.print(f"  [{k}/{total}] {name}: evaluating ...")
            yield
            bar.advance(tid)

        yield step


def missing_device(name: str) -> Optional[str]:
    from .backends import missing_device as why

    return why(name)


def _toolchain_missing(log: str) -> bool:
    """A build that could not start (no compiler) is the machine's fault, not the candidate's."""
    return log.startswith("compiler not found")


def _exit_for(result) -> ExitCode:  # type: ignore[no-untyped-def]
    """0 correct, 1 evaluated and failed, 3 when the build could not run at all."""
    if result.stage == "build" and result.build is not None and _toolchain_missing(result.build.log):
        return ExitCode.INFRA
    return for_rewards([result.reward])


def results_table(results, width: Optional[int] = None) -> Table:
    """The per-task table. Nothing in it is ever cut with an ellipsis: every column gets the
    width of its longest value, and the task name (what a person copies into the next
    command) gets the rest of `width`, folding onto a second line only when it must."""
    from rich import box

    def f(x, spec=".4g"):
        return "-" if x is None else format(x, spec)

    rows = [[r.task, f"{r.reward:+d}", f(r.time_ms.eager), f(r.time_ms.compile), f(r.time_ms.candidate),
             f(r.speedup_vs_eager, ".2f"), f(r.speedup_vs_compile, ".2f")] for r in results]
    headers = ("reward", "eager ms", "compile ms", "kernel ms", "vs eager", "vs compile")  # seconds: per-line
    widths = [max([len(w) for w in h.split()] + [len(row[i + 1]) for row in rows]) for i, h in enumerate(headers)]
    room = (width or console.width) - sum(widths) - 2 * len(headers)  # collapsed padding between columns
    longest = max([len("task")] + [len(row[0]) for row in rows])
    table = Table(title="results", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    table.add_column("task", width=max(12, min(longest, room)), overflow="fold")
    for h, w in zip(headers, widths):
        table.add_column(h, justify="right", width=w, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _device_label(r) -> str:  # type: ignore[no-untyped-def]
    """The device's name, as the judge reports it; for a result refused before the judge ran
    (a static check), this machine's device of that backend, so rows never mix `cpu` with a CPU model."""
    if r.device:
        return r.device
    from .backends import get_backend

    try:
        return get_backend(r.backend).device_name()
    except Exception:  # no device of that backend here: its name is all there is
        return r.backend


def _print_result(r) -> None:
    color = "green" if r.reward >= 2 else "yellow" if r.reward == 1 else "red"
    console.print(f"[bold {color}]reward {r.reward:+d}[/]  {escape(r.task)} on {escape(_device_label(r))}")
    console.print(f"reason: {escape(r.reason)}")
    if r.trials:
        ok = sum(t.ok for t in r.trials)
        console.print(f"correctness: {ok}/{len(r.trials)} trials passed")
    if r.candidate_stats:
        console.print(results_table([r]))
    if r.reward < 0 and r.worker_log.strip():
        console.print("[dim]worker output (tail):[/]\n" + escape(r.worker_log[-1500:]))


# Each layer above the environment (agent, data, benchmark, train) owns its commands in
# `cuda_agent/<layer>/cli.py`, which defines `register(app)` and imports nothing heavy at
# module level. A layer that is not installed simply adds no commands.
_LAYERS = ("agent", "data", "benchmark", "train", "viewer", "serve")


def _register_layers() -> None:
    import importlib

    for layer in _LAYERS:
        module = f"{__package__}.{layer}.cli"
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name in (module, f"{__package__}.{layer}"):
                continue
            raise
        mod.register(app)


_register_layers()
guard_all(app)  # one error path for every verb, the layers' included (cuda_agent.exit_codes)


def main() -> None:
    """The `cuda-agent` entry point: the app, with stdout that outlives its reader."""
    from .exit_codes import tolerate_closed_stdout

    tolerate_closed_stdout()
    app(prog_name="cuda-agent")


if __name__ == "__main__":
    sys.exit(main())
