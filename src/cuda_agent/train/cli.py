"""`cuda-agent train ...`: filter trajectories, fine-tune (RFT), RL on one GPU, verl configs.

Only typer and rich are imported here; the engines load inside the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from ..exit_codes import ExitCode, OneLineErrors, describe, fail

console = Console()

train_app = typer.Typer(no_args_is_help=True, cls=OneLineErrors, rich_markup_mode=None,
                        help="Training: RFT data, SFT, RL (TRL, one GPU), verl configs.")

_SET = typer.Option(None, "--set", help="override a config field: key.sub=value (repeatable)")


def register(app: typer.Typer) -> None:
    app.add_typer(train_app, name="train")


@train_app.command("filter")
def filter_cmd(
    trajectories: list[Path] = typer.Argument(..., help="trajectory JSONL files (from `cuda-agent optimize`)"),
    out: Path = typer.Option(..., "--out", "-o", help="RFT dataset to write (JSONL)"),
    min_reward: int = typer.Option(0, help="keep final reward strictly above this"),
    max_repeats: int = typer.Option(2, help="most identical consecutive tool calls"),
    max_malformed: int = typer.Option(0, help="most malformed tool calls"),
    max_per_task: Optional[int] = typer.Option(None, help="keep at most N episodes per task"),
    verl_parquet: Optional[Path] = typer.Option(None, help="also write verl's SFT parquet here"),
) -> None:
    """Rejection fine-tuning data: keep rewarded episodes with clean tool use."""
    from .rft import RFTFilterConfig, build_rft_dataset

    cfg = RFTFilterConfig(min_reward=min_reward, max_repeats=max_repeats, max_malformed_calls=max_malformed,
                          max_per_task=max_per_task)
    try:
        report = build_rft_dataset(trajectories, out, cfg)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc))
    console.print(report.summary())
    console.print(f"wrote {out} and {out}.report.json")
    if verl_parquet:
        from .verl.data import rft_rows_to_verl_parquet

        rft_rows_to_verl_parquet(out, verl_parquet)
        console.print(f"wrote {verl_parquet}")
    if report.kept == 0:
        raise typer.Exit(int(ExitCode.FAILED))


@train_app.command("demos")
def demos_cmd(
    tasks: list[str] = typer.Argument(..., help="bundled examples ('examples', 'examples:level=1', 'examples:NAME')"),
    out: Path = typer.Option(..., "--out", "-o", help="RFT rows to write (JSONL, the format `train rft` reads)"),
    backend: Optional[str] = typer.Option(None, help="whose solutions: cuda or cpu (default: cuda)"),
) -> None:
    """RFT rows from the bundled examples' solutions: scripted successful episodes (write the
    kernel, binding and model_new.py, then stop), for a policy that cannot call tools yet."""
    from ..backends import PRIMARY_BACKEND
    from .demos import example_solution_rows
    from .rft import write_sft_rows

    try:
        rows = example_solution_rows(tasks, backend or PRIMARY_BACKEND)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise fail(str(exc))
    write_sft_rows(rows, out)
    console.print(f"wrote {len(rows)} rows to {out}")


@train_app.command("rft")
def rft_cmd(config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML/JSON RFTConfig"),
            overrides: Optional[list[str]] = _SET) -> None:
    """Stage 2 on one GPU: SFT on RFT rows (assistant tokens only) with TRL."""
    from .config import RFTConfig
    from .trl.sft import run_rft

    _train(run_rft, RFTConfig, config, overrides)


@train_app.command("rl")
def rl_cmd(config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML/JSON RLConfig"),
           overrides: Optional[list[str]] = _SET) -> None:
    """Stage 4 on one GPU: multi-turn critic-free RL in the real environment with TRL."""
    from .config import RLConfig
    from .trl.rl import run_rl

    _train(run_rl, RLConfig, config, overrides)


@train_app.command("verl-data")
def verl_data_cmd(
    tasks: list[str] = typer.Argument(..., help="task sources (paths, 'examples', 'examples:level=1', ...)"),
    out: Path = typer.Option(..., "--out", "-o", help="parquet for verl's RL trainer"),
    backend: Optional[str] = typer.Option(None, help="backend the prompts and rewards are for: cuda or cpu "
                                          "(default: cuda)"),
    limit: Optional[int] = typer.Option(None, help="only the first N tasks"),
    single_turn: bool = typer.Option(False, help="stage 1: single-turn rows (no tools)"),
) -> None:
    """Tasks -> verl RL parquet (prompt, agent_name, the task in extra_info)."""
    from ..backends import PRIMARY_BACKEND
    from .models import resolve_tasks
    from .verl.data import tasks_to_verl_parquet

    try:
        chosen = resolve_tasks(tasks, limit)
    except (KeyError, ValueError) as exc:  # a TaskError names the file or row that cannot be loaded
        raise fail(str(exc.args[0]) if isinstance(exc, KeyError) else str(exc))
    n = tasks_to_verl_parquet(chosen, out, backend=backend or PRIMARY_BACKEND, single_turn=single_turn)
    console.print(f"wrote {n} rows to {out}")


@train_app.command("verl-configs")
def verl_configs_cmd(
    out: Path = typer.Option(Path("runs/verl"), "--out", "-o", help="folder for the stage configs"),
    model: str = typer.Option(..., help="base model path (Hugging Face folder) on the cluster"),
    data: Path = typer.Option(..., help="folder holding train parquet files (stage1.parquet, rft.parquet, "
                              "agentic.parquet)"),
    nnodes: int = typer.Option(16, help="cluster nodes"), gpus_per_node: int = typer.Option(8, help="GPUs per node"),
    eval_workers: Optional[int] = typer.Option(None, help="cap on evaluation-pool actors (default: one per declared "
                                               "cuda_agent_eval unit; 0: evaluate in the rollout workers)"),
    rft_tasks: str = typer.Option("", help="tasks the stage-1 policy is rolled out on for RFT data (launch.sh)"),
) -> None:
    """Write the four stage configs (paper defaults) and a launch script for a Ray cluster."""
    from .verl.recipe import RecipeConfig, write_recipe

    paths = write_recipe(RecipeConfig(model_path=model, data_dir=str(data), nnodes=nnodes,
                                      gpus_per_node=gpus_per_node, eval_workers=eval_workers,
                                      rft_tasks=rft_tasks), out)
    for p in paths:
        console.print(f"wrote {p}")


@train_app.command("verl-merge")
def verl_merge_cmd(
    stage_dir: Path = typer.Argument(..., help="a stage's trainer.default_local_dir"),
    role: str = typer.Argument("actor", help="actor, critic, or model (the SFT trainer's step folder)"),
    target: Optional[Path] = typer.Option(None, "--target", help="Hugging Face folder to write (default: print "
                                          "the resolved checkpoint only)"),
) -> None:
    """Resolve a verl stage's latest checkpoint (latest_checkpointed_iteration.txt -> global_step_N/ROLE)
    and merge it with verl's model merger: how launch.sh chains the stages."""
    from .verl.ckpt import latest_checkpoint, merge_latest

    try:
        path = latest_checkpoint(stage_dir, role)
        if target is not None:
            merge_latest(stage_dir, role, target)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc))
    console.print(f"{path}" + (f" -> {target}" if target is not None else ""))


def _train(run, cls, config: Optional[Path], overrides: Optional[list[str]]) -> None:
    """A training run from its config file and overrides; its bad input (config key, model path, dataset
    row) is one line and exit 2, found before any weights load."""
    from pydantic import ValidationError

    from .config import TrainInputError, load_config

    try:
        cfg = load_config(cls, config, overrides)
    except (FileNotFoundError, ValueError, ValidationError) as exc:
        raise fail(describe(exc))
    try:
        out = run(cfg)
    except TrainInputError as exc:
        raise fail(str(exc))
    console.print(f"done: checkpoints and metrics in {out}")
