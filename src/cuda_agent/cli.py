"""`cuda-agent <verb>`: a thin layer over the Python API."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Turn a PyTorch Model into a faster, verified custom kernel.")
console = Console()
err = Console(stderr=True)


def _config(backend: Optional[str], timing: bool, compile_baseline: bool, trials: int,
            atol: Optional[float], rtol: Optional[float], guards: bool = True):
    from .evaluation import EvalConfig, GuardConfig

    fields = {"backend": backend, "measure": timing, "trials": trials}
    if not guards:
        fields["guards"] = GuardConfig.off()
    if not compile_baseline:
        fields["compile_mode"] = None
    if atol is not None:
        fields["atol"] = atol
    if rtol is not None:
        fields["rtol"] = rtol
    return EvalConfig(**fields)


@app.command()
def workspace(
    task: str = typer.Argument(..., help="a KernelBench .py file, or a bundled example name"),
    directory: Path = typer.Argument(..., help="where to create the workspace"),
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    force: bool = typer.Option(False, help="overwrite a non-empty directory"),
    with_solution: bool = typer.Option(False, help="bundled examples: also copy the reference solution"),
) -> None:
    """Create a workspace for one task."""
    from .backends import default_backend_name
    from .examples import get_example
    from .tasks import TaskError, load_tasks
    from .workspace import WorkspaceError, create_workspace

    be = backend or default_backend_name()
    example = None
    try:
        if not Path(task).exists():
            example = get_example(task)
            loaded = [example.task]
        else:
            loaded = load_tasks(task)
    except (TaskError, KeyError) as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    if len(loaded) != 1:
        err.print(f"[red]error:[/] {task} holds {len(loaded)} tasks; a workspace takes one")
        raise typer.Exit(2)
    try:
        ws = create_workspace(loaded[0], directory, be, overwrite=force)
    except WorkspaceError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    if with_solution:
        if example is None:
            err.print("[red]error:[/] --with-solution only applies to bundled examples")
            raise typer.Exit(2)
        example.install_solution(ws.root, be)
    console.print(f"workspace for [bold]{ws.task.name}[/] ({be}) at {ws.root}\n"
                  f"next: cd {ws.root} && ./compile.sh && ./verify.sh && ./profile.sh")


@app.command()
def build(directory: Path = typer.Argument(Path("."), help="workspace directory"),
          json_out: bool = typer.Option(False, "--json", help="print the result as JSON")) -> None:
    """Compile kernels/ into the extension (cached, parallel)."""
    from .backends import get_backend
    from .evaluation.build import build_workspace, publish_library
    from .workspace import WorkspaceError, open_workspace

    try:
        ws = open_workspace(directory)
    except WorkspaceError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    backend = get_backend(ws.backend)
    res = build_workspace(ws.root, backend)
    if json_out:
        print(res.model_dump_json())
    elif res.ok:
        publish_library(ws.root, backend.extension_name, res.library)
        console.print(f"[green]built[/] in {res.seconds:.1f}s ({res.compiled_units} compiled, "
                      f"{res.cached_units} cached)")
    else:
        console.print(f"[red]compile error[/]\n{res.log}")
    raise typer.Exit(0 if res.ok else 1)


@app.command()
def evaluate(
    directory: Path = typer.Argument(Path("."), help="workspace directory"),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="--no-timing: build and verify only"),
    compile_baseline: bool = typer.Option(True, "--compile-baseline/--no-compile-baseline",
                                          help="time torch.compile too"),
    trials: int = typer.Option(5, help="correctness trials on fresh inputs"),
    atol: Optional[float] = typer.Option(None), rtol: Optional[float] = typer.Option(None),
    guards: bool = typer.Option(True, "--guards/--no-guards", help="anti-hacking checks (research only: off)"),
    json_out: bool = typer.Option(False, "--json", help="print the breakdown as one JSON object"),
) -> None:
    """Build, verify and time a workspace; print the reward and its breakdown."""
    from .evaluation import evaluate as run_evaluation
    from .workspace import WorkspaceError, open_workspace

    try:
        ws = open_workspace(directory)
    except WorkspaceError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    result = run_evaluation(ws, _config(None, timing, compile_baseline, trials, atol, rtol, guards))
    if json_out:
        print(result.model_dump_json())
    else:
        _print_result(result)


@app.command()
def examples(
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    only: Optional[list[str]] = typer.Option(None, help="run just these examples"),
    compile_baseline: bool = typer.Option(True, "--compile-baseline/--no-compile-baseline"),
    out: Optional[Path] = typer.Option(None, help="also write results as JSON lines here"),
) -> None:
    """Evaluate every bundled example with its hand-written solution (the quickstart job)."""
    from .backends import default_backend_name
    from .evaluation import evaluate as run_evaluation
    from .examples import list_examples
    from .workspace import create_workspace

    be = backend or default_backend_name()
    chosen = [e for e in list_examples() if not only or e.name in only]
    console.print(f"evaluating {len(chosen)} bundled example(s) on the [bold]{be}[/] backend")
    results = []
    with tempfile.TemporaryDirectory(prefix="cuda-agent-examples-") as tmp:
        for ex in chosen:
            ws = create_workspace(ex.task, Path(tmp) / ex.name, be)
            ex.install_solution(ws.root, be)
            with console.status(f"{ex.name} ..."):
                res = run_evaluation(ws, _config(be, True, compile_baseline, 5, None, None))
            results.append(res)
            console.print(f"  {ex.name}: reward {res.reward:+d}  {res.reason.splitlines()[0] if res.reason else ''}")
            if out:
                with out.open("a") as fh:
                    fh.write(res.model_dump_json() + "\n")
    console.print(results_table(results))
    raise typer.Exit(0 if all(r.reward >= 1 for r in results) else 1)


def results_table(results) -> Table:
    table = Table(title="results")
    for col in ("task", "reward", "eager ms", "compile ms", "candidate ms", "vs eager", "vs compile", "eval s"):
        table.add_column(col, justify="right" if col != "task" else "left")

    def f(x, spec=".3f"):
        return "-" if x is None else format(x, spec)

    for r in results:
        table.add_row(r.task, f"{r.reward:+d}", f(r.time_ms.eager), f(r.time_ms.compile), f(r.time_ms.candidate),
                      f(r.speedup_vs_eager, ".2f"), f(r.speedup_vs_compile, ".2f"), f(r.seconds, ".1f"))
    return table


def _print_result(r) -> None:
    color = "green" if r.reward >= 2 else "yellow" if r.reward == 1 else "red"
    console.print(f"[bold {color}]reward {r.reward:+d}[/]  {r.task} on {r.device or r.backend}")
    console.print(f"reason: {r.reason}")
    if r.trials:
        ok = sum(t.ok for t in r.trials)
        console.print(f"correctness: {ok}/{len(r.trials)} trials passed")
    if r.candidate_stats:
        console.print(results_table([r]))
    if r.reward < 0 and r.worker_log.strip():
        console.print("[dim]worker output (tail):[/]\n" + r.worker_log[-1500:])


# Each layer above the environment (agent, data, benchmark, train) owns its commands in
# `cuda_agent/<layer>/cli.py`, which defines `register(app)` and imports nothing heavy at
# module level. A layer that is not installed simply adds no commands.
_LAYERS = ("agent", "data", "benchmark", "train")


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


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
