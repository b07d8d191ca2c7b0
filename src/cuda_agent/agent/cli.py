"""`cuda-agent optimize TASK...`: run the agent on tasks, a dataset, or a bundled example.

Only typer and rich are imported here; the agent loads inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..evaluation.config import RULES_HELP, RulesProfile
from ..exit_codes import ExitCode, checked_backend, describe, fail
from .limits import EVAL_MAX_TURNS

console = Console()

SMOKE_WARNING = ("[bold yellow]No endpoint configured: using the offline default, SmolLM2-135M-Instruct. It is a "
                 "SMOKE-TEST policy that exercises the loop; it does not write useful kernels.[/] Point "
                 "--base-url/--model (or OPENAI_BASE_URL, ANTHROPIC_API_KEY + CUDA_AGENT_MODEL) at a real model.")


def register(app: typer.Typer) -> None:
    app.command()(optimize)


def optimize(
    tasks: list[str] = typer.Argument(..., help="task .py files, folders, Ops-6K parquet/JSONL, an HF dataset id, "
                                                 "or bundled example names"),
    out: Path = typer.Option(Path("runs/optimize"), help="results folder; re-running resumes it"),
    backend: Optional[str] = typer.Option(None, help="cuda or cpu (default: the local device)"),
    policy: Optional[str] = typer.Option(None, help="openai | anthropic | local | scripted (default: from the "
                                                     "environment, else the offline smoke-test model)"),
    model: Optional[str] = typer.Option(None, envvar="CUDA_AGENT_MODEL", help="model id, or a local HF folder / .gguf"),
    base_url: Optional[str] = typer.Option(None, envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint"),
    api_key_env: Optional[str] = typer.Option(None, help="variable holding the key (default OPENAI_API_KEY / "
                                                          "ANTHROPIC_API_KEY)"),
    tool_format: str = typer.Option("native", help="native tool calls, or 'text' (<tool_call> blocks)"),
    temperature: Optional[float] = typer.Option(None, help="sampling temperature (default: the policy's own)"),
    max_tokens: Optional[int] = typer.Option(None, help="most tokens per reply (default 8192; 512 offline)"),
    timeout: float = typer.Option(300.0, help="seconds per model request (connecting: 10 s)"),
    retries: int = typer.Option(4, help="retries per request (timeouts, 429, 5xx)"),
    script: Optional[Path] = typer.Option(None, help="scripted policy: JSON list of replies"),
    max_turns: int = typer.Option(EVAL_MAX_TURNS, help="turns per episode"),
    context_tokens: int = typer.Option(131_072, help="context budget in tokens"),
    samples: int = typer.Option(1, help="episodes per task"),
    workers: Optional[int] = typer.Option(None, help="concurrent episodes (default: one per GPU, 1 on CPU)"),
    limit: Optional[int] = typer.Option(None, help="only the first N tasks"),
    compile_baseline: bool = typer.Option(True, "--compile-baseline/--no-compile-baseline",
                                          help="time torch.compile too in every evaluation"),
    trials: int = typer.Option(5, help="correctness trials per evaluation"),
    nudges: Optional[int] = typer.Option(None, help="remind an agent that stops before verifying (default: 2 for "
                                                     "local models, else 0)"),
    eval_timeout: Optional[float] = typer.Option(None, min=1.0, help="seconds each evaluation's worker may run "
                                                 "(default 600; --timeout is the model request's)"),
    rules: RulesProfile = typer.Option(RulesProfile.paper, help=RULES_HELP + "; the workspace's SKILL.md states it"),
    max_seconds: Optional[float] = typer.Option(None, min=1.0, help="wall-clock budget per episode (seconds)"),
    max_total_tokens: Optional[int] = typer.Option(None, min=1, help="token budget per episode (prompt + reply, "
                                                   "all turns)"),
    max_cost: Optional[float] = typer.Option(None, min=0.0, help="cost budget per episode in USD (needs the model's "
                                             "price: built-in table or --prices)"),
    prices: Optional[Path] = typer.Option(None, help="JSON price table {MODEL: {input, output}} (USD per 1M "
                                          "tokens) on top of the built-in one"),
    system_prompt: Optional[Path] = typer.Option(None, help="system-prompt template file ($skill, $task, $backend, "
                                                 "$task_name)"),
    seal: Optional[bool] = typer.Option(None, "--seal/--no-seal", help="run the agent's bash in its own mount view "
                                        "(bubblewrap; default: yes, unless CUDA_AGENT_SEAL=0); --no-seal only for "
                                        "machines without it"),
) -> None:
    """Run the agent: each episode ends with a verified reward; best kernels are kept."""
    _quiet_progress_bars_in_logs()
    from ..evaluation import EvalConfig
    from ..tasks import TaskError
    from .batch import EpisodeWorkerDied, run_batch
    from .loop import AgentConfig
    from .policies.base import PolicyError
    from .prompts import load_template

    try:
        loaded = _load(tasks)
    except (TaskError, KeyError, FileNotFoundError, ValueError) as exc:
        raise fail(str(exc.args[0]) if isinstance(exc, KeyError) else str(exc))
    loaded = loaded[:limit] if limit else loaded
    be = checked_backend(backend)
    pcfg = resolve_policy(policy, model, base_url, api_key_env, tool_format, temperature, max_tokens, timeout,
                          retries, script)
    if pcfg.problem():
        raise fail(pcfg.problem())
    if pcfg.smoke_test:
        console.print(SMOKE_WARNING)
    n_workers, devices = _slots(be, workers)
    eval_cfg = EvalConfig.from_options(be, trials=trials, compile_baseline=compile_baseline, timeout_s=eval_timeout,
                                       rules=rules.value)
    acfg = AgentConfig(backend=be, max_turns=max_turns, context_tokens=context_tokens, eval=eval_cfg,
                       nudges=nudges if nudges is not None else (2 if pcfg.kind == "local" else 0),
                       max_seconds=max_seconds, max_total_tokens=max_total_tokens, max_cost_usd=max_cost or None,
                       price_table=str(prices) if prices else None,
                       system_prompt=str(system_prompt) if system_prompt else None,
                       **({} if seal is None else {"seal_shell": seal}))
    try:  # a bad template or price table, or a budget without a price, fails before any episode
        if acfg.system_prompt:
            load_template(acfg.system_prompt)
        acfg.price(pcfg.kind, pcfg.model)
    except ValueError as exc:
        raise fail(str(exc))
    console.print(f"{len(loaded)} task(s) x {samples} sample(s) on [bold]{be}[/], policy "
                  f"[bold]{pcfg.kind}[/] {pcfg.model or ''}, {n_workers} worker(s); results in {out}")
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from ..isolation.processes import RunBusy, Terminated, terminate_on_sigterm
    from .batch import episode_id
    from .live import BoardProgress, JournalBoard

    terminate_on_sigterm()  # SIGTERM unwinds like Ctrl-C: workers and tool processes are stopped
    board = JournalBoard(out, [episode_id(t, s) for t in loaded for s in range(samples)])
    with BoardProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       board=board, console=console, refresh_per_second=2) as progress:
        bar = progress.add_task("episodes", total=None)

        def started(total: int, todo: int) -> None:
            progress.update(bar, total=total, completed=total - todo)
            if total - todo:
                console.print(f"resuming: {total - todo} finished episode(s) skipped")

        def finished(t: Any) -> None:
            progress.advance(bar)
            s = t.summary()
            kept = (f" (best state delivered: {s['delivered_reward']:+d})"
                    if s["delivered_reward"] != s["final_reward"] else "")
            console.print(f"  {s['task']} s{t.sample}: final {s['final_reward']:+d} best {s['best_reward']:+d}{kept} "
                          f"({s['stop']}, {s['turns']} turns, {s['seconds']}s)"
                          + (f" [red]{(s['error'] or '').splitlines()[0]}[/]" if s["error"] else ""))

        try:
            summary = run_batch(loaded, pcfg, acfg, out, samples=samples, workers=n_workers, devices=devices,
                                on_start=started, on_result=finished)
        except EpisodeWorkerDied as exc:
            raise fail(str(exc), ExitCode.INFRA)
        except (PolicyError, RunBusy) as exc:
            raise fail(str(exc))
        except Terminated:
            raise fail("terminated; finished episodes are saved and unfinished ones resume from their journals: "
                       "re-run the same command", ExitCode.INTERRUPTED)
    console.print(summary_table(summary))
    if len(loaded) == 1 and samples == 1:
        _print_best(out)
    if pcfg.smoke_test:
        console.print("[yellow](smoke-test policy: these results say the loop works, not that kernels were found)[/]")
    raise typer.Exit(int(ExitCode.OK if summary.failed == 0 else ExitCode.FAILED))  # an episode that errored


def _quiet_progress_bars_in_logs() -> None:
    """Output to a log, not a terminal: no carriage-return progress bars (a local model's loading)
    in it. Set before the model libraries import tqdm (it reads these once); workers inherit them."""
    import os
    import sys

    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_DISABLE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def resolve_policy(kind: Optional[str], model: Optional[str], base_url: Optional[str], api_key_env: Optional[str],
                   tool_format: str, temperature: Optional[float], max_tokens: Optional[int], timeout: float,
                   retries: int, script: Optional[Path]) -> Any:
    """Flags first, then the environment; with nothing configured, the offline smoke-test model."""
    from .policies.base import PolicyConfig

    try:
        return PolicyConfig.from_options(kind, model, script=str(script) if script else None, base_url=base_url,
                                         api_key_env=api_key_env, tool_format=tool_format, temperature=temperature,
                                         max_tokens=max_tokens, timeout_s=timeout, max_retries=retries)
    except ValueError as exc:
        raise fail(describe(exc)) from None


def summary_table(s: Any) -> Table:
    table = Table(title="agent results")
    table.add_column("metric")
    table.add_column("value", justify="right")

    def pct(x: float) -> str:
        return f"{100 * x:.1f}%"

    def fx(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}x"

    rows = [("episodes (finished / failed / skipped)", f"{s.finished} / {s.failed} / {s.skipped}"),
            ("final reward distribution", "  ".join(f"{k}: {v}" for k, v in s.rewards.items()) or "-"),
            ("best reward distribution", "  ".join(f"{k}: {v}" for k, v in s.best_rewards.items()) or "-"),
            ("pass rate (correct, delivered state)", pct(s.pass_rate)), ("faster than eager", pct(s.faster_than_eager)),
            ("faster than torch.compile", pct(s.faster_than_compile)),
            ("geomean speedup vs eager (correct)", fx(s.geomean_speedup_vs_eager)),
            ("geomean speedup vs compile (correct)", fx(s.geomean_speedup_vs_compile)),
            ("mean turns", f"{s.mean_turns:.1f}"), ("tokens", str(s.tokens))]
    for k, v in rows:
        table.add_row(k, v)
    return table


def _load(specs: list[str]) -> list[Any]:
    from ..examples import get_example
    from ..tasks import load_tasks

    out = []
    for spec in specs:
        if not Path(spec).exists():
            try:
                out.append(get_example(spec).task)
                continue
            except KeyError:
                pass
        out.extend(load_tasks(spec))
    if not out:
        raise ValueError("no tasks found")
    return out


def _slots(backend: str, workers: Optional[int]) -> tuple[int, list[str] | None]:
    """Episode workers and the devices they rotate over: by default one worker per GPU."""
    from ..backends import backend_class
    from ..backends.devices import visible_gpu_count

    if not backend_class(backend).gpu:
        return workers or 1, None

    n = visible_gpu_count()
    devices = [str(i) for i in range(n)] or None
    return workers or max(1, n), devices


def _print_best(out: Path) -> None:
    from .batch import TRAJECTORIES
    from .trajectory import load_trajectories

    trajs = load_trajectories(out / TRAJECTORIES, strict=False)
    if trajs and trajs[-1].best is not None:
        b = trajs[-1].best
        console.print(f"best state (reward {b.result.reward:+d}, {b.result.reason}): {b.path}")
