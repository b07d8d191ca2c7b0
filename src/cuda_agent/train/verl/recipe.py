"""The paper's four-stage recipe (SPEC §4) as verl 0.9.1 configs, its hyperparameters as defaults:
1. single-turn PPO warm-up (32K context) rewarded on the shared GPU pool; then RFT data from
stage-1 rollouts; 2. rejection fine-tuning with verl's multi-turn SFT trainer; 3. critic warm-up
(actor frozen); 4. agentic multi-turn PPO (150 steps, batch 1024, 131K context).

Each stage is a Hydra config extending verl's own, so verl checks every field when it starts.
`launch.sh` runs the stages on a Ray cluster and merges each stage's latest checkpoint into the
Hugging Face folder the next one names (`ckpt.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ...agent.limits import TRAIN_MAX_TURNS

CONTEXT_STAGE1 = 32_768
CONTEXT_AGENTIC = 131_072
PROMPT_AGENTIC = 8_192


class RecipeConfig(BaseModel):
    model_path: str = Field(description="base model (Hugging Face folder) visible from every node")
    data_dir: str = Field(description="holds stage1.parquet, rft.parquet, agentic.parquet")
    ckpt_dir: str = "checkpoints/cuda_agent"
    nnodes: int = 16
    gpus_per_node: int = 8
    eval_workers: int | None = Field(default=None, description="cap on evaluation-pool actors; None: one per "
                                     "declared cuda_agent_eval unit; 0: evaluate in the rollout/reward workers")
    eval_gpus_per_worker: float = 1.0
    rft_tasks: str = Field(default="", description="tasks the stage-1 policy is rolled out on for RFT data "
                           "(launch.sh; default: the agentic parquet's source is not known, so set it)")
    rft_episodes_per_task: int = 4
    actor_lr: float = 3e-6
    critic_lr: float = 6e-6
    gamma: float = 1.0
    lam: float = 0.95
    clip_low: float = 0.2
    clip_high: float = 0.28
    batch_size: int = 1024
    agentic_steps: int = 150
    stage1_steps: int = 50
    critic_warmup_steps: int = 20
    sft_epochs: int = 2
    sft_lr: float = 1e-5
    max_turns: int = TRAIN_MAX_TURNS
    rollout_engine: str = "vllm"
    tensor_parallel: int = 4
    ppo_mini_batch_size: int = 256
    project: str = "cuda_agent"


def stage_configs(r: RecipeConfig) -> dict[str, dict[str, Any]]:
    """name -> Hydra config (a plain mapping, dumped as YAML)."""
    ppo_common = _ppo_common(r)
    stage1 = _merge(ppo_common, {
        "data": {"train_files": f"{r.data_dir}/stage1.parquet", "max_prompt_length": 4096,
                 "max_response_length": CONTEXT_STAGE1 - 4096},
        "actor_rollout_ref": {"model": {"path": r.model_path},
                              "rollout": {"agent": {"default_agent_loop": "single_turn_agent"},
                                          "multi_turn": {"enable": False}}},
        "reward": {"custom_reward_function": {"path": "pkg://cuda_agent.train.verl.reward", "name": "compute_score",
                                              "reward_kwargs": _pool_section(r)}},
        "trainer": {"total_training_steps": r.stage1_steps, "experiment_name": "stage1_single_turn_ppo",
                    "default_local_dir": f"{r.ckpt_dir}/stage1"},
    })
    agentic = _merge(ppo_common, {
        "data": {"train_files": f"{r.data_dir}/agentic.parquet", "max_prompt_length": PROMPT_AGENTIC,
                 "max_response_length": CONTEXT_AGENTIC - PROMPT_AGENTIC},
        "actor_rollout_ref": {"model": {"path": f"{r.ckpt_dir}/stage2/hf"},
                              "rollout": {"agent": {"default_agent_loop": "cuda_agent",
                                                    "agent_loop_config_path": str(Path(__file__).with_name("agent_loop.yaml"))},
                                          "multi_turn": {"enable": True, "max_assistant_turns": r.max_turns,
                                                         "max_tool_response_length": 30_000}}},
        "cuda_agent": {**_pool_section(r), "max_turns": r.max_turns},
    })
    # verl (v1 and legacy trainers) updates the actor once critic_warmup <= global_steps, and
    # global_steps starts at 1: steps + 1 keeps the actor frozen for every step of this stage
    stage3 = _merge(agentic, {"trainer": {"total_training_steps": r.critic_warmup_steps,
                                          "critic_warmup": r.critic_warmup_steps + 1,
                                          "experiment_name": "stage3_critic_warmup",
                                          "default_local_dir": f"{r.ckpt_dir}/stage3"}})
    stage4 = _merge(agentic, {"trainer": {"total_training_steps": r.agentic_steps, "critic_warmup": 0,
                                          "experiment_name": "stage4_agentic_ppo",
                                          "default_local_dir": f"{r.ckpt_dir}/stage4"},
                              "critic": {"model": {"path": f"{r.ckpt_dir}/stage3/critic_hf"}}})
    stage2 = {
        "hydra": {"searchpath": ["pkg://verl.trainer.config"]},
        "defaults": ["sft_trainer_engine", "_self_"],
        "data": {"train_files": f"{r.data_dir}/rft.parquet", "messages_key": "messages", "tools_key": "tools",
                 "max_length": CONTEXT_AGENTIC, "truncation": "right", "train_batch_size": 64,
                 "micro_batch_size_per_gpu": 1, "max_token_len_per_gpu": CONTEXT_AGENTIC,
                 "custom_cls": {"path": "pkg://cuda_agent.train.verl.sft_dataset", "name": "CudaAgentSFTDataset"}},
        "model": {"path": f"{r.ckpt_dir}/stage1/hf"},
        "optim": {"lr": r.sft_lr},
        "trainer": {"total_epochs": r.sft_epochs, "project_name": r.project, "experiment_name": "stage2_rft",
                    "default_local_dir": f"{r.ckpt_dir}/stage2", "logger": ["console", "tensorboard"],
                    "nnodes": r.nnodes, "n_gpus_per_node": r.gpus_per_node},
    }
    return {"stage1_single_turn_ppo": stage1, "stage2_rft_sft": stage2, "stage3_critic_warmup": stage3,
            "stage4_agentic_ppo": stage4}


def _ppo_common(r: RecipeConfig) -> dict[str, Any]:
    return {
        "hydra": {"searchpath": ["pkg://verl.trainer.config"]},
        "defaults": ["ppo_trainer", "_self_"],
        "algorithm": {"adv_estimator": "gae", "gamma": r.gamma, "lam": r.lam, "use_kl_in_reward": False,
                      # log the rollout/training importance ratios (the collapse signal) without reweighting
                      "rollout_correction": {"rollout_is": None, "rollout_rs": None}},
        "data": {"train_batch_size": r.batch_size, "return_raw_chat": True, "filter_overlong_prompts": True,
                 "truncation": "error"},
        "actor_rollout_ref": {
            "actor": {"optim": {"lr": r.actor_lr}, "clip_ratio_low": r.clip_low, "clip_ratio_high": r.clip_high,
                      "ppo_mini_batch_size": r.ppo_mini_batch_size, "use_dynamic_bsz": True,
                      "ppo_max_token_len_per_gpu": CONTEXT_AGENTIC, "use_kl_loss": False,
                      "loss_agg_mode": "token-mean"},
            "rollout": {"name": r.rollout_engine, "mode": "async", "calculate_log_probs": True,
                        "tensor_model_parallel_size": r.tensor_parallel, "n": 1, "temperature": 1.0,
                        "gpu_memory_utilization": 0.6},
            "model": {"use_remove_padding": True, "enable_gradient_checkpointing": True},
        },
        "critic": {"optim": {"lr": r.critic_lr}, "ppo_max_token_len_per_gpu": CONTEXT_AGENTIC,
                   "model": {"path": r.model_path}},
        "trainer": {"project_name": r.project, "nnodes": r.nnodes, "n_gpus_per_node": r.gpus_per_node,
                    "use_v1": True,  # needs TransferQueue: the [verl] extra brings it
                    "logger": ["console", "tensorboard"], "save_freq": 10, "test_freq": -1,
                    "val_before_train": False, "resume_mode": "auto"},
    }


def write_recipe(r: RecipeConfig, out: str | Path) -> list[Path]:
    import yaml

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, cfg in stage_configs(r).items():
        p = out / f"{name}.yaml"
        p.write_text(f"# {name}: generated by `cuda-agent train verl-configs` (paper defaults, SPEC §4)\n"
                     + yaml.safe_dump(cfg, sort_keys=False))
        paths.append(p)
    launch = out / "launch.sh"
    launch.write_text(_LAUNCH.format(dir=out.resolve(), ckpt=r.ckpt_dir, data=r.data_dir, tp=r.tensor_parallel,
                                     rft_tasks=r.rft_tasks, episodes=r.rft_episodes_per_task))
    launch.chmod(0o755)
    return [*paths, launch]


_LAUNCH = """#!/usr/bin/env bash
# The four stages in the paper's order on a Ray cluster (ray start --head ...; ray start --address ...
# on every node; evaluation nodes add --resources '{{"cuda_agent_eval": <their GPUs>}}').
# Needs `pip install 'cuda-agent[verl]'` plus vLLM on every node, the same paths for data and models.
# Between stages the previous stage's latest checkpoint (latest_checkpointed_iteration.txt ->
# global_step_N/...) is merged into the Hugging Face folder the next config names.
set -euo pipefail
CFG={dir}
CKPT={ckpt}
PY=${{PYTHON:-python3}}
merge() {{ "$PY" -m cuda_agent.train.verl.ckpt "$@"; }}

# 1. single-turn PPO warm-up
ray job submit --working-dir . -- python3 -m verl.trainer.main_ppo --config-path $CFG --config-name stage1_single_turn_ppo
merge $CKPT/stage1 actor $CKPT/stage1/hf

# RFT data from the stage-1 policy (as in the paper): serve it, roll it out in the agentic
# environment, keep rewarded episodes with clean tool use. RFT_TASKS: the task source.
RFT_TASKS=${{RFT_TASKS:-{rft_tasks}}}
if [ -z "$RFT_TASKS" ]; then echo "launch.sh: set RFT_TASKS (tasks for the stage-1 rollouts)" >&2; exit 2; fi
vllm serve $CKPT/stage1/hf --port 8011 --tensor-parallel-size {tp} & VLLM=$!
trap 'kill $VLLM 2>/dev/null || true' EXIT
until curl -sf localhost:8011/v1/models >/dev/null; do sleep 10; kill -0 $VLLM; done
cuda-agent optimize $RFT_TASKS --policy openai --model $CKPT/stage1/hf --base-url http://localhost:8011/v1 \\
    --tool-format text --samples {episodes} --out $CKPT/stage1/rollouts
kill $VLLM; wait $VLLM || true; trap - EXIT
cuda-agent train filter $CKPT/stage1/rollouts/trajectories.jsonl -o {data}/rft.jsonl --verl-parquet {data}/rft.parquet

# 2. RFT: verl's SFT trainer on Ray, on trainer.nnodes x trainer.n_gpus_per_node of the config
ray job submit --working-dir . -- python3 -m verl.trainer.sft_trainer_ray --config-path $CFG --config-name stage2_rft_sft
merge $CKPT/stage2 model $CKPT/stage2/hf

# 3. critic warm-up (actor frozen), then 4. agentic PPO from the warmed critic
ray job submit --working-dir . -- python3 -m verl.trainer.main_ppo --config-path $CFG --config-name stage3_critic_warmup
merge $CKPT/stage3 critic $CKPT/stage3/critic_hf
ray job submit --working-dir . -- python3 -m verl.trainer.main_ppo --config-path $CFG --config-name stage4_agentic_ppo
merge $CKPT/stage4 actor $CKPT/stage4/hf
"""


def _pool_section(r: RecipeConfig) -> dict[str, Any]:
    """Evaluation-pool settings, shared by stage 1's reward (reward_kwargs) and the agent loop
    (the `cuda_agent` section): one pool per job, sized by the declared cuda_agent_eval resource."""
    return {"pool_workers": r.eval_workers, "pool_gpus_per_worker": r.eval_gpus_per_worker,
            "eval": {"trials": 5, "atol": 1e-2, "rtol": 1e-2}}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


__all__ = ["RecipeConfig", "stage_configs", "write_recipe"]
