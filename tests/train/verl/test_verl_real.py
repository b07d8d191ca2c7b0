"""The verl recipe against verl itself (0.9.1, CPU): each stage's config composed with verl's own
Hydra config and checked by verl's own validation; stage 1's reward loaded by verl's loader from
its pkg:// path; the agent loop instantiated the way verl's AgentLoopWorker does (registry file +
hydra.utils.instantiate) and run for one episode against a scripted server; stages chained
through verl's checkpoint layout (tracker file, global_step_N/{actor,critic}) and verl's model
merger; the evaluation pool's size for N agent-loop workers on a local Ray cluster.

Skipped, saying why, where verl is not installed (`scripts/setup.sh` installs it for CI)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.tasks import Task
from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK

verl = pytest.importorskip("verl", reason="verl is not installed (bash scripts/setup.sh test installs it with the [test] extra)")
pytest.importorskip("hydra", reason="verl needs hydra-core")

PPO_STAGES = ("stage1_single_turn_ppo", "stage3_critic_warmup", "stage4_agentic_ppo")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from cuda_agent.train.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", layers=1, hidden=32)


@pytest.fixture(scope="module")
def recipe(tmp_path_factory, tiny_model):
    from cuda_agent.train.verl.recipe import RecipeConfig, write_recipe

    root = tmp_path_factory.mktemp("recipe")
    r = RecipeConfig(model_path=str(tiny_model), data_dir=str(root / "data"), ckpt_dir=str(root / "ckpt"),
                     nnodes=2, gpus_per_node=8, critic_warmup_steps=20, rft_tasks="examples")
    write_recipe(r, root / "cfg")
    return r, root / "cfg"


def _compose(cfg_dir: Path, name: str, overrides: list[str] = (), updates: dict | None = None):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(cfg_dir), version_base=None):
        cfg = compose(config_name=name, overrides=list(overrides))
    for key, value in (updates or {}).items():  # test-only settings (the CPU evaluation config)
        OmegaConf.set_struct(cfg, False)
        OmegaConf.update(cfg, key, value, merge=False)
    return cfg


def _models(path: Path) -> list[str]:
    return [f"actor_rollout_ref.model.path={path}", f"critic.model.path={path}"]


def _leaves(node, prefix=""):
    from omegaconf import DictConfig

    if isinstance(node, (dict, DictConfig)):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1]


# ---- 1. configs start on verl 0.9.1 ---------------------------------------------------------------
@pytest.mark.parametrize("stage", PPO_STAGES)
def test_ppo_stage_composes_with_verls_config_and_passes_verls_validation(recipe, tiny_model, stage):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    r, cfg_dir = recipe
    cfg = _compose(cfg_dir, stage, _models(tiny_model))
    # what verl.trainer.main_ppo.main does before it starts Ray
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert need_critic(cfg) and cfg.algorithm.adv_estimator == "gae"
    assert omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout).multi_turn is not None  # AgentLoopWorker's view
    # every key we set is one verl knows (ours live under cuda_agent / reward_kwargs only)
    import yaml

    ours = yaml.safe_load((cfg_dir / f"{stage}.yaml").read_text())
    plain = _compose_plain_ppo()
    for key in _leaves({k: v for k, v in ours.items() if k not in ("hydra", "defaults", "cuda_agent")}):
        if key.startswith("reward.custom_reward_function.reward_kwargs"):
            continue
        assert _has(plain, key), f"{stage}: {key} is not a verl 0.9.1 config key"
    # the v1 trainer (verl's default) and what it imports at start: TransferQueue comes with [verl]
    assert cfg.trainer.use_v1 is True
    pytest.importorskip("transfer_queue", reason="TransferQueue (the [verl] extra) is not installed")
    from verl.trainer.ppo.v1 import get_trainer_cls

    assert get_trainer_cls(cfg.trainer.v1.trainer_mode).__name__ == "PPOTrainerSync"


def test_stage2_sft_config_keys_all_exist_in_verls_sft_trainer_config(recipe):
    """Stage 2 (RFT through verl's SFT trainer) against verl's own `sft_trainer_engine` schema: every
    key we set is one verl knows, and the composed config keeps our values."""
    import yaml
    from hydra import compose, initialize_config_module

    r, cfg_dir = recipe
    ours = yaml.safe_load((cfg_dir / "stage2_rft_sft.yaml").read_text())
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        plain = compose(config_name="sft_trainer_engine")
    keys = list(_leaves({k: v for k, v in ours.items() if k not in ("hydra", "defaults")}))
    assert len(keys) > 10
    for key in keys:
        assert _has(plain, key), f"stage2_rft_sft: {key} is not a verl 0.9.1 sft_trainer_engine key"
    cfg = _compose(cfg_dir, "stage2_rft_sft")
    assert cfg.data.max_length == ours["data"]["max_length"] and cfg.trainer.total_epochs == ours["trainer"]["total_epochs"]


def _compose_plain_ppo():
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose(config_name="ppo_trainer")


def _has(cfg, dotted: str) -> bool:
    from omegaconf import OmegaConf

    node = cfg
    for part in dotted.split("."):
        if not OmegaConf.is_config(node) or part not in node.keys():  # keys(): MISSING (???) values count
            return False
        node = node._get_node(part)
    return True


def test_stage_settings_that_the_issue_names(recipe, tiny_model):
    r, cfg_dir = recipe
    s3 = _compose(cfg_dir, "stage3_critic_warmup", _models(tiny_model))
    # verl updates the actor once critic_warmup <= global_steps (from step 1): never, here
    assert s3.trainer.critic_warmup == s3.trainer.total_training_steps + 1 == 21
    assert not any(s3.trainer.critic_warmup <= step for step in range(1, s3.trainer.total_training_steps + 1))
    s2 = _compose(cfg_dir, "stage2_rft_sft")
    assert s2.trainer.nnodes == r.nnodes == 2 and s2.trainer.n_gpus_per_node == 8
    assert s2.data.custom_cls.path == "pkg://cuda_agent.train.verl.sft_dataset"
    launch = (cfg_dir / "launch.sh").read_text()
    assert "verl.trainer.sft_trainer_ray" in launch and "--nnodes=1" not in launch and "/latest/" not in launch
    # RFT data comes from the stage-1 policy: stage 1, merge, rollouts, filter, then stage 2
    order = [launch.index(x) for x in ("stage1_single_turn_ppo", "merge $CKPT/stage1 actor", "cuda-agent optimize",
                                       "cuda-agent train filter", "stage2_rft_sft", "stage3_critic_warmup",
                                       "merge $CKPT/stage3 critic", "stage4_agentic_ppo")]
    assert order == sorted(order)
    s4 = _compose(cfg_dir, "stage4_agentic_ppo", _models(tiny_model))
    assert s4.cuda_agent.pool_workers is None  # sized by the declared cuda_agent_eval resource


# ---- 2. stage 1's reward, loaded as verl loads it --------------------------------------------------
def _relu_answer() -> str:
    return (f"```python\n{RELU_MODEL_NEW}```\n```cpp\n// relu.cpp\n{RELU_KERNEL}```\n"
            f"```cpp\n// relu_binding.cpp\n{RELU_BINDING}```\n")


def test_stage1_reward_loads_through_verls_loader_and_scores(recipe, tiny_model, fast_config):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from cuda_agent.train.verl.data import task_row
    r, cfg_dir = recipe
    cfg = _compose(cfg_dir, "stage1_single_turn_ppo",
                   [*_models(tiny_model), "reward.custom_reward_function.reward_kwargs.pool_workers=0"],
                   {"reward.custom_reward_function.reward_kwargs.eval": fast_config.model_dump(mode="json")})
    assert cfg.reward.custom_reward_function.path == "pkg://cuda_agent.train.verl.reward"
    fn = get_custom_reward_fn(cfg)  # verl: load_extern_object(path, name) + reward_kwargs, async-aware
    row = task_row(Task.from_source(RELU_TASK, name="relu"), "cpu", single_turn=True)
    args = dict(data_source=row["data_source"], ground_truth="", extra_info=row["extra_info"])
    assert asyncio.run(fn(solution_str=_relu_answer(), **args)) >= 1
    assert asyncio.run(fn(solution_str="no code here", **args)) == -1


# ---- 3. the agent loop, as verl's AgentLoopWorker makes and runs it -------------------------------
class _Out:
    def __init__(self, ids, lps):
        self.token_ids, self.log_probs = ids, lps


class ScriptedServer:
    def __init__(self, tokenizer, turns):
        self.tok, self.turns, self.prompts = tokenizer, list(turns), []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kw):
        self.prompts.append(list(prompt_ids))
        ids = self.tok.encode(self.turns.pop(0), add_special_tokens=False) + [self.tok.eos_token_id]
        return _Out(ids, [-0.5] * len(ids))


def _call(name, **args):
    return f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>'


def test_agent_loop_instantiated_like_verls_worker_runs_an_episode(recipe, tiny_model, fast_config, tmp_path):
    import hydra
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import (AgentLoopOutput, DictConfigWrap, ToolListWrap,
                                                         _agent_loop_registry)
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.import_utils import resolve_config_path

    from cuda_agent.train.verl.data import task_row
    r, cfg_dir = recipe
    cfg = _compose(cfg_dir, "stage4_agentic_ppo",
                   [*_models(tiny_model), "cuda_agent.pool_workers=0", f"+cuda_agent.workdir={tmp_path}",
                    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=6"],
                   {"cuda_agent.eval": fast_config.model_dump(mode="json")})
    # AgentLoopWorker.__init__: load the registry file named by the config
    for entry in OmegaConf.load(resolve_config_path(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path)):
        _agent_loop_registry[entry.name] = entry
    tok = AutoTokenizer.from_pretrained(tiny_model)
    server = ScriptedServer(tok, [
        _call("write_file", path="kernels/relu.cpp", content=RELU_KERNEL)
        + _call("write_file", path="kernels/relu_binding.cpp", content=RELU_BINDING),
        _call("write_file", path="model_new.py", content=RELU_MODEL_NEW) + _call("read_file", path="nope.py"),
        "Done.",
    ])
    row = task_row(Task.from_source(RELU_TASK, name="relu"), "cpu")
    kwargs = {k: v for k, v in row.items() if k != "agent_name"}

    async def run_agent_loop():  # AgentLoopWorker._run_agent_loop: instantiate from the registry, then run
        loop = hydra.utils.instantiate(config=_agent_loop_registry[row["agent_name"]],
                                       trainer_config=DictConfigWrap(config=cfg), server_manager=server,
                                       tokenizer=tok, processor=None, hf_model_type="llama",
                                       dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                                       tools=ToolListWrap([]))
        return loop, await loop.run({"temperature": 1.0}, **kwargs)

    loop, out = asyncio.run(run_agent_loop())

    assert isinstance(out, AgentLoopOutput) and out.reward_score >= 1  # the environment's verdict
    stats = out.extra_fields["cuda_agent"]
    assert stats["tool_calls"] == 4 and stats["tool_errors"] == 1 and stats["correct"]
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    tool_text = tok.decode([t for t, m in zip(out.response_ids, out.response_mask) if not m])
    model_text = tok.decode([t for t, m in zip(out.response_ids, out.response_mask) if m])
    assert "no such file" in tool_text and "write_file" in model_text and "no such file" not in model_text
    # the tool turns went through verl's builder: the last prompt is exactly prompt + response so far
    assert server.prompts[-1] == out.prompt_ids + out.response_ids[: len(server.prompts[-1]) - len(out.prompt_ids)]
    builder_ids = loop.continuous_token_builder.build_initial_tokens(
        [{"role": "user", "content": "x"}], tools=None)
    assert builder_ids  # the same builder object verl's base class made
    assert not any(tmp_path.iterdir())


# ---- 4. stages chain through verl's checkpoint layout ---------------------------------------------
def _write_verl_fsdp_ckpt(folder: Path, model_dir: Path, scale: float) -> dict:
    """What verl's FSDP checkpoint manager leaves for world size 1: shards + fsdp_config.json +
    huggingface/ (config and tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    sd = {k: (v * scale).contiguous() for k, v in model.state_dict().items()}
    folder.mkdir(parents=True)
    torch.save(sd, folder / "model_world_size_1_rank_0.pt")
    (folder / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    model.config.save_pretrained(folder / "huggingface")
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(folder / "huggingface")
    return sd


def test_stages_chain_through_verls_checkpoint_layout_and_model_merger(recipe, tiny_model):
    import torch
    from transformers import AutoModelForCausalLM
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    from cuda_agent.train.verl.ckpt import latest_checkpoint, main, merge_command

    r, cfg_dir = recipe
    stage1 = Path(r.ckpt_dir) / "stage1"
    _write_verl_fsdp_ckpt(stage1 / "global_step_2" / "actor", tiny_model, 0.5)
    sd = _write_verl_fsdp_ckpt(stage1 / "global_step_4" / "actor", tiny_model, 2.0)
    (stage1 / "latest_checkpointed_iteration.txt").write_text("4")
    assert latest_checkpoint(stage1, "actor") == Path(find_latest_ckpt_path(str(stage1))) / "actor"
    assert not (stage1 / "latest").exists()

    # what launch.sh runs: python3 -m cuda_agent.train.verl.ckpt STAGE_DIR ROLE TARGET -> verl.model_merger
    cmd = merge_command(stage1, "actor", stage1 / "hf")
    assert cmd[1:3] == ["-m", "verl.model_merger"] and cmd[cmd.index("--local_dir") + 1].endswith("global_step_4/actor")
    proc = subprocess.run([sys.executable, "-m", "cuda_agent.train.verl.ckpt", str(stage1), "actor",
                           str(stage1 / "hf")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    merged = AutoModelForCausalLM.from_pretrained(stage1 / "hf")
    key = "model.layers.0.mlp.up_proj.weight"
    assert torch.allclose(merged.state_dict()[key].float(), sd[key].bfloat16().float())  # step 4, not 2

    # the next stage's config names that folder, and verl accepts it as a model
    s2 = _compose(cfg_dir, "stage2_rft_sft")
    assert Path(s2.model.path) == stage1 / "hf"
    # stage 2's SFT layout (global_step_N itself) and stage 3's critic resolve too
    stage2 = Path(r.ckpt_dir) / "stage2"
    _write_verl_fsdp_ckpt(stage2 / "global_step_7", tiny_model, 1.0)
    (stage2 / "latest_checkpointed_iteration.txt").write_text("7")
    assert latest_checkpoint(stage2, "model") == stage2 / "global_step_7"
    stage3 = Path(r.ckpt_dir) / "stage3"
    _write_verl_fsdp_ckpt(stage3 / "global_step_21" / "critic", tiny_model, 1.0)
    (stage3 / "latest_checkpointed_iteration.txt").write_text("21")
    assert main([str(stage3), "critic", "unused", "--print-only"]) == 0
    s4 = _compose(cfg_dir, "stage4_agentic_ppo")
    assert s4.critic.model.path == str(stage3 / "critic_hf")
    assert s4.actor_rollout_ref.model.path == str(stage2 / "hf")
    # a stage that never saved: a clear error, exit 2
    assert main([str(Path(r.ckpt_dir) / "stage9"), "actor", "x"]) == 2


# ---- 5. one evaluation pool for N agent-loop workers ----------------------------------------------
def test_pool_size_is_the_declared_resource_whatever_the_worker_count():
    from cuda_agent.train.verl.eval_pool import eval_pool_size

    assert eval_pool_size(16) == 16 and eval_pool_size(16, pool_workers=4) == 4
    assert eval_pool_size(16, pool_workers=64) == 16 and eval_pool_size(8, resource_per_worker=2) == 4
    with pytest.raises(RuntimeError, match="cuda_agent_eval"):
        eval_pool_size(0)


@pytest.mark.slow
def test_n_agent_loop_workers_share_one_pool_that_holds_the_declared_resource(fast_config):
    ray = pytest.importorskip("ray")
    from cuda_agent.train.verl.eval_pool import EVAL_RESOURCE, PoolSettings

    if ray.is_initialized():
        pytest.skip("a Ray session is already running in this process")
    ray.init(num_cpus=2, resources={EVAL_RESOURCE: 3}, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[3])}})
    try:
        settings = PoolSettings(pool_workers=None, pool_gpus_per_worker=0, pool_cpus_per_worker=0,
                                eval=fast_config)

        @ray.remote(num_cpus=0)
        class FakeAgentLoopWorker:  # verl's agent-loop workers are long-lived actors like this one
            def pool(self, cfg_json: str):  # what each does on its first episode (verl/loop.py: shared_evaluator)
                from cuda_agent.train.verl.eval_pool import shared_evaluator

                ev = shared_evaluator(json.loads(cfg_json))
                return ev.service._actor_id.hex(), ray.get(ev.service.size.remote())

        n_workers = 4
        workers = [FakeAgentLoopWorker.remote() for _ in range(n_workers)]
        got = ray.get([w.pool.remote(settings.model_dump_json()) for w in workers])
        assert len({actor for actor, _ in got}) == 1  # one pool service for the job
        assert {size for _, size in got} == {3}  # sized by the declared resource, not by n_workers
        deadline = time.monotonic() + 30
        while ray.available_resources().get(EVAL_RESOURCE, 0) > 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ray.available_resources().get(EVAL_RESOURCE, 0) == 0  # each actor holds one unit

        # stage 1's reward, from a (0-GPU) reward worker, evaluates on that pool
        from cuda_agent.train.verl.data import task_row
        from cuda_agent.train.verl.reward import compute_score

        row = task_row(Task.from_source(RELU_TASK, name="relu"), "cpu", single_turn=True)
        score = asyncio.run(compute_score("x", _relu_answer(), "", row["extra_info"], **settings.model_dump(mode="json")))
        assert score >= 1
    finally:
        ray.shutdown()
