"""Stage 4 on one GPU: multi-turn, critic-free RL (GRPO-style group baseline) through TRL.

The loop is TRL's: `num_generations` multi-turn rollouts per task in our environment
(`env.py`), the final workspace's milestone reward, PPO's clipped objective (eps 0.2 / 0.28).
This module adds the config, checkpoints and resumption, and the metrics (episode verdicts and
importance-ratio statistics).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ..chat import task_prompt
from ..config import RLConfig, start_run
from ..metrics import JsonlLog, episode_metrics, merge_means, ratio_metrics
from ..progress import PhaseClock, make_progress_callback


def run_rl(cfg: RLConfig) -> Path:
    """Train; returns the output directory (checkpoints, metrics.jsonl, TensorBoard runs)."""
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer

    from ...agent.shell import ShellConfig
    from ...agent.tools import ToolConfig
    from ...backends import default_backend_name, model_backend
    from ..models import check_model_path, load_model_and_tokenizer, resolve_tasks
    from .env import EpisodeLog, make_env_class

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    check_model_path(cfg.model.path)  # bad input says so before the run folder or any weights exist
    out, report = start_run(cfg)
    backend = cfg.backend or default_backend_name()
    model_be = model_backend(backend)
    device = model_be.torch_device
    tasks = resolve_tasks(cfg.tasks, cfg.task_limit)
    heldout = resolve_tasks(cfg.heldout_tasks) if cfg.heldout_tasks else []
    if overlap := {t.name for t in tasks} & {t.name for t in heldout}:
        raise ValueError(f"held-out tasks are also training tasks: {sorted(overlap)}")
    model, tokenizer = load_model_and_tokenizer(cfg.model, device)
    eval_cfg = cfg.eval.model_copy(update={"backend": backend})
    log = EpisodeLog()
    tools = ToolConfig(bash_timeout_s=cfg.bash_timeout_s, bash_max_timeout_s=max(cfg.bash_timeout_s, 900.0),
                       shell=ShellConfig(seal=cfg.seal_shell))
    clock = PhaseClock()
    env_cls = make_env_class([*tasks, *heldout], backend=backend, eval_config=eval_cfg, tool_config=tools,
                             workdir=cfg.workdir, log=log, eval_concurrency=cfg.eval_concurrency, clock=clock)
    # TRL draws prompts_per_step x steps_per_rollout distinct rows per rollout batch and drops a short
    # last chunk: repeat the task rows so that a batch can always be filled
    rows = _rows(tasks, backend)
    need = cfg.prompts_per_step * cfg.steps_per_rollout
    dataset = Dataset.from_list(rows * -(-need // len(rows)))
    gen = cfg.generation

    args = GRPOConfig(**grpo_kwargs(cfg, out, report, gpu=model_be.gpu, n_heldout=len(heldout)))
    jsonl = JsonlLog(out / "metrics.jsonl")
    started = time.monotonic()

    class _Jsonl(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if logs:
                jsonl.write(state.global_step, logs)

        last_end = started
        longest = 0.0

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            # a lent machine's budget: end cleanly (save, measure held-out) when the next step, as long
            # as the longest so far (a rollout step; an update-only step is short), would overrun it
            now = time.monotonic()
            self.longest, self.last_end = max(self.longest, now - self.last_end), now
            if cfg.max_seconds is not None and now - started + self.longest > cfg.max_seconds:
                control.should_training_stop = True

    trainer_cls = _trainer_class(GRPOTrainer)
    printer = make_progress_callback(clock, heartbeat_s=cfg.heartbeat_s)
    budget = _Jsonl()
    trainer = trainer_cls(model=model, processing_class=tokenizer, args=args, train_dataset=dataset,
                          environment_factory=env_cls, callbacks=[budget, printer])
    trainer.remove_callback(PrinterCallback)  # its metrics dict per step would bury the step line
    trainer.episode_log = log
    trainer.clock = clock
    trainer.generation_autocast = gen.autocast_bf16 and model_be.gpu
    # TRL builds its GenerationConfig with compilation off; transformers compiles the decoding step of a
    # static cache only when it is on
    trainer.generation_config.disable_compile = not (gen.compile and model_be.gpu)
    if gen.engine == "fast":
        trainer.fast_generator = make_fast_generator(model, gen, gpu=model_be.gpu)
    last = get_last_checkpoint(str(out)) if cfg.resume and out.is_dir() else None
    try:
        if heldout and cfg.heldout_before and not (out / "heldout_before.json").is_file():
            clock.label = "held-out (before training)"
            # set by the training loop, read by TRL's scoring; before train() it is not there yet
            trainer.current_gradient_accumulation_steps = args.gradient_accumulation_steps
            summary = measure_heldout(trainer, log, heldout, backend, out / "heldout_before.json",
                                      cfg.heldout_max_new_tokens)
            print(f"[rl] held-out before training: reward mean {summary.get('heldout/reward_mean', float('nan')):+.2f}, "
                  f"pass rate {summary.get('heldout/pass_rate', 0.0):.2f}", flush=True)
            clock.label = None
            clock.take()  # that time is not the first step's
            budget.last_end = time.monotonic()  # nor is it a step's length for the max_seconds estimate
        trainer.train(resume_from_checkpoint=last)
        trainer.save_model(str(out / "final"))
        if heldout:
            clock.label = "held-out"
            summary = measure_heldout(trainer, log, heldout, backend, out / "heldout.json", cfg.heldout_max_new_tokens)
            print(f"[rl] held-out after training: reward mean {summary.get('heldout/reward_mean', float('nan')):+.2f}, "
                  f"pass rate {summary.get('heldout/pass_rate', 0.0):.2f}", flush=True)
    finally:
        printer.close()
    return out


def grpo_kwargs(cfg: RLConfig, out: Path, report: list[str], *, gpu: bool, n_heldout: int) -> dict[str, Any]:
    """TRL's GRPOConfig arguments for this run: one place maps our config onto TRL's."""
    gen = cfg.generation
    batch = cfg.prompts_per_step * cfg.num_generations
    return dict(
        output_dir=str(out), max_steps=cfg.steps, per_device_train_batch_size=batch,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_completion_tokens,
        max_tool_calling_iterations=cfg.max_tool_calls, learning_rate=cfg.learning_rate, beta=cfg.beta,
        epsilon=cfg.epsilon_low, epsilon_high=cfg.epsilon_high, num_iterations=cfg.num_iterations,
        temperature=cfg.temperature, max_grad_norm=cfg.max_grad_norm, seed=cfg.seed,
        save_steps=cfg.save_steps, save_total_limit=cfg.save_total_limit, logging_steps=cfg.logging.logging_steps,
        report_to=report, use_cpu=not gpu,
        # TRL casts the model itself to bf16 before continuous batching when bf16 is on: that would round the
        # fp32 master weights, so that engine runs in fp32 throughout
        bf16=gpu and cfg.model.bf16_autocast and gen.engine != "continuous_batching",
        use_transformers_continuous_batching=gen.engine == "continuous_batching",
        transformers_continuous_batching_config=dict(gen.continuous_batching) or None,
        loss_type="grpo", scale_rewards="group", lr_scheduler_type="constant", warmup_steps=0,
        dataloader_num_workers=0, remove_unused_columns=False, shuffle_dataset=True,
        per_device_eval_batch_size=max(1, n_heldout) * cfg.heldout_generations,
        num_generations_eval=cfg.heldout_generations,
        steps_per_generation=cfg.steps_per_rollout, gradient_checkpointing=cfg.gradient_checkpointing,
        cache_implementation=gen.cache if gen.cache != "dynamic" else None, pad_to_multiple_of=gen.pad_to_multiple_of,
        generation_kwargs={"max_new_tokens": gen.max_new_tokens} if gen.max_new_tokens else None,
        disable_tqdm=True,  # the step line below replaces the bar and the printed metrics dict
    )


def make_fast_generator(model: Any, gen: Any, *, gpu: bool) -> Any:
    """The rollouts' static-cache sampler (`fastgen.py`) over `model`'s weights, or None (with a line
    saying why) when it cannot run this model: the trainer then generates with plain `generate`."""
    import torch

    from ..fastgen import FastGenerator

    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}.get(gen.fast_dtype)
    if dtype is None:  # auto
        dtype = torch.bfloat16 if gpu else next(model.parameters()).dtype
    try:
        fast = FastGenerator(model, dtype=dtype, graphs=gpu and gen.fast_graphs)
    except ValueError as exc:  # a model it cannot run (`fastgen.unsupported` says why)
        print(f"[rl] generation.engine=fast: {exc}; plain generate instead", flush=True)
        return None
    print(f"[rl] generation: static-cache sampler, {str(dtype).removeprefix('torch.')}, "
          f"{'CUDA graphs' if fast.graphs else 'eager steps'}", flush=True)
    return fast


def measure_heldout(trainer: Any, log: Any, heldout: list[Any], backend: str, path: Path,
                    max_new_tokens: int | None = None) -> dict[str, Any]:
    """The policy on tasks it never trained on (TRL's evaluation loop: same rollouts and
    environment, no update); writes and returns the episodes and their aggregate. `max_new_tokens`
    replaces the per-turn and total token budgets for these episodes."""
    from datasets import Dataset

    log.drain()  # verdicts of the last training batch were already logged
    saved = trainer.generation_config.max_new_tokens, trainer.max_completion_length
    if max_new_tokens:
        trainer.generation_config.max_new_tokens = max_new_tokens
        trainer.max_completion_length = max(trainer.max_completion_length, max_new_tokens + 512)
    try:
        trl_metrics = trainer.evaluate(eval_dataset=Dataset.from_list(_rows(heldout, backend)))
    finally:
        trainer.generation_config.max_new_tokens, trainer.max_completion_length = saved
    episodes = log.drain()
    report = {"step": trainer.state.global_step, "episodes": episodes,
              **episode_metrics(episodes, prefix="heldout/"), "trl": trl_metrics}
    path.write_text(json.dumps(report, indent=1, default=str))
    return report


def _rows(tasks: list[Any], backend: str) -> list[dict[str, Any]]:
    return [{"prompt": task_prompt(t, backend), "task_name": t.name} for t in tasks]


def _trainer_class(base: type) -> type:
    """GRPOTrainer plus our metrics: episode verdicts and importance-ratio statistics per step."""

    class CudaAgentGRPOTrainer(base):  # type: ignore[misc, valid-type]
        episode_log = None
        _ratio_inputs: dict[str, Any] | None = None
        _ratio_rows: list[dict[str, float]] = []

        clock: PhaseClock | None = None
        generation_autocast = False
        fast_generator: Any = None  # fastgen.FastGenerator when generation.engine is 'fast'

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            if self.clock is None:
                return super()._generate_and_score_completions(inputs)
            self.clock.new_batch()
            self._turn = 0
            with self.clock.phase("rollout", f"{len(inputs)} episodes: tokenising, scoring, old log-probabilities"):
                return super()._generate_and_score_completions(inputs)

        def _generate_single_turn(self, prompt_ids: Any, *args: Any, **kwargs: Any) -> Any:
            import torch

            self._turn = getattr(self, "_turn", 0) + 1
            budget = self.generation_config.max_new_tokens
            detail = (f"turn {self._turn}: {len(prompt_ids)} episodes, up to {budget} new tokens each, "
                      f"longest prompt {max(len(p) for p in prompt_ids)} tokens")
            autocast = (torch.autocast(self.accelerator.device.type, dtype=torch.bfloat16) if self.generation_autocast
                        else contextlib.nullcontext())
            with (self.clock.phase("generation", detail) if self.clock else contextlib.nullcontext()), autocast:
                fast = self._fast_turn(prompt_ids)
                completion_ids, logprobs = fast if fast is not None else \
                    super()._generate_single_turn(prompt_ids, *args, **kwargs)
            if self.clock is not None:
                self.clock.add_tokens(sum(len(c) for c in completion_ids))
            return completion_ids, logprobs

        def _fast_turn(self, prompt_ids: Any) -> tuple[list[list[int]], None] | None:
            """The turn through the static-cache sampler, with TRL's sampling settings; None when there
            is none or the settings need a logits processor it does not have (TRL's path then runs)."""
            gc = self.generation_config
            if self.fast_generator is None or (gc.repetition_penalty not in (None, 1.0)) or gc.min_p:
                return None
            try:
                completions = self.fast_generator.generate(
                    [list(p) for p in prompt_ids], max_new_tokens=gc.max_new_tokens, eos_token_ids=self.eos_token_ids,
                    pad_token_id=self._tokenizer.pad_token_id, do_sample=gc.do_sample, temperature=gc.temperature or 1.0,
                    top_k=gc.top_k, top_p=gc.top_p)
            except Exception as exc:  # noqa: BLE001 - the run goes on with TRL's own path, and says so
                # the sampler has already dropped its graphs and restored the caller's stream and the
                # default CUDA generator (FastGenerator.reset), so TRL's sampling `generate` can run
                print(f"[rl] the static-cache sampler failed ({type(exc).__name__}: {str(exc)[:200]}): "
                      "plain generate from now on", flush=True)
                self.fast_generator = None
                return None
            return completions, None

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            self._ratio_inputs = inputs
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._ratio_inputs = None

        def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                               logits_to_keep: int, *args: Any, **kwargs: Any) -> Any:
            result = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                                *args, **kwargs)
            inputs = self._ratio_inputs
            if inputs is not None:
                logps = result[0]
                old = inputs.get("old_per_token_logps")
                log_ratio = (logps - old) if old is not None else logps * 0
                mask = inputs["completion_mask"]
                if "tool_mask" in inputs:
                    mask = mask * inputs["tool_mask"]
                self._ratio_rows = [*self._ratio_rows,
                                    ratio_metrics(log_ratio, logps, mask, clip_high=self.epsilon_high)]
            return result

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            if "loss" in logs:
                if self._ratio_rows:
                    logs.update(merge_means(self._ratio_rows))
                    self._ratio_rows = []
                if self.episode_log is not None:
                    logs.update(episode_metrics(self.episode_log.drain()))
                if self.clock is not None:
                    logs.update(self.clock.take())
            super().log(logs, start_time)

    return CudaAgentGRPOTrainer


__all__ = ["run_rl", "grpo_kwargs", "make_fast_generator", "measure_heldout"]
