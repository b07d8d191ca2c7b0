"""Stage 2 on one GPU: supervised fine-tuning on the RFT rows through TRL's SFTTrainer. Rows are
tokenised here straight from the JSON (an Arrow table would null-fill the differing tool schemas
and change the rendered prompt); the loss covers the assistant's tokens only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import RFTConfig, TrainInputError, start_run
from ..metrics import JsonlLog
from ..rft import load_sft_rows


def run_rft(cfg: RFTConfig) -> Path:
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import SFTConfig, SFTTrainer

    from ...backends import model_backend
    from ..models import load_model, load_tokenizer

    # the input is checked (model path, every row against max_length) before any weights load
    tokenizer = load_tokenizer(cfg.model)
    encoded = encode_rows(cfg, tokenizer)
    out, report = start_run(cfg)
    be = model_backend()
    model = load_model(cfg.model, tokenizer, be.torch_device)
    for e in encoded:  # explicit labels: -100 everywhere but the assistant's tokens
        e["labels"] = [t if m else -100 for t, m in zip(e["input_ids"], e["assistant_masks"])]
    dataset = Dataset.from_list(encoded)
    args = SFTConfig(
        output_dir=str(out), num_train_epochs=cfg.epochs, max_steps=cfg.max_steps, learning_rate=cfg.learning_rate,
        per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.grad_accum,
        max_length=cfg.max_length, seed=cfg.seed,
        # rows arrive tokenised with `assistant_masks`, which TRL always applies: the loss is on the
        # assistant's tokens only (its `assistant_only_loss` flag is for rows it tokenises itself)
        assistant_only_loss=False, save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, logging_steps=cfg.logging.logging_steps, report_to=report,
        use_cpu=not be.gpu, bf16=be.gpu and cfg.model.bf16_autocast, gradient_checkpointing=be.gpu,
    )
    jsonl = JsonlLog(out / "metrics.jsonl")

    class _Jsonl(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if logs:
                jsonl.write(state.global_step, logs)
            loss = (logs or {}).get("loss")
            if cfg.stop_at_loss is not None and loss is not None and loss <= cfg.stop_at_loss:
                control.should_training_stop = True  # the trainer then saves, and final/ is written below

    trainer = SFTTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=dataset,
                         callbacks=[_Jsonl()])
    last = get_last_checkpoint(str(out)) if cfg.resume and out.is_dir() else None
    trainer.train(resume_from_checkpoint=last)
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(str(out / "final"))
    return out


def encode_rows(cfg: RFTConfig, tokenizer: Any) -> list[dict[str, list[int]]]:
    """Every row of `cfg.dataset` as `input_ids` + `assistant_masks`; a row with nothing to learn
    within `max_length` is a `TrainInputError` naming the row and the max_length that would keep it."""
    from ..chat import NothingToLearn, tokenize_conversation

    if not Path(cfg.dataset).is_file():
        raise TrainInputError(f"dataset {cfg.dataset} does not exist (RFT rows: `cuda-agent train filter` "
                              "or `cuda-agent train demos` write them)")
    try:
        rows = load_sft_rows(cfg.dataset)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TrainInputError(f"dataset {str(exc).splitlines()[0]}") from exc
    if not rows:
        raise TrainInputError(f"dataset {cfg.dataset} holds no rows: the filter kept nothing (see its .report.json)")
    encoded, short = [], []
    for n, row in enumerate(rows, start=1):
        try:
            encoded.append(tokenize_conversation(tokenizer, row["messages"], row.get("tools"),
                                                 max_length=cfg.max_length))
        except NothingToLearn as exc:
            short.append((n, row, exc))
    if short:
        n, row, exc = short[0]
        meta = row.get("meta") or {}
        what = ", ".join(f"{k} {meta[k]}" for k in ("task", "episode_id") if meta.get(k))
        need = max(e.total for _, _, e in short)
        others = f" (and {len(short) - 1} more rows)" if len(short) > 1 else ""
        fix = (f"set max_length to at least {need} (--set max_length={need}) or drop the row"
               if all(e.first is not None for _, _, e in short)
               else "drop the row (the filter keeps only episodes with assistant turns)")
        raise TrainInputError(f"dataset {cfg.dataset} row {n}{f' ({what})' if what else ''}: {exc}{others}: {fix}")
    return encoded


__all__ = ["run_rft", "encode_rows"]
