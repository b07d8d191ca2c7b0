"""Stage 2 on one GPU: supervised fine-tuning on the RFT rows through TRL's SFTTrainer. Rows are
tokenised here straight from the JSON (an Arrow table would null-fill the differing tool schemas
and change the rendered prompt); the loss covers the assistant's tokens only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import RFTConfig, start_run
from .metrics import JsonlLog
from .rft import load_sft_rows


def run_rft(cfg: RFTConfig) -> Path:
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import SFTConfig, SFTTrainer

    from ..backends import model_backend
    from .chat import tokenize_conversation
    from .models import load_model_and_tokenizer

    out, report = start_run(cfg)
    be = model_backend()
    model, tokenizer = load_model_and_tokenizer(cfg.model, be.torch_device)
    rows = load_sft_rows(cfg.dataset)
    if not rows:
        raise ValueError(f"{cfg.dataset} holds no rows: the filter kept nothing (see its .report.json)")
    encoded = [tokenize_conversation(tokenizer, r["messages"], r.get("tools"), max_length=cfg.max_length)
               for r in rows]
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


__all__ = ["run_rft"]
