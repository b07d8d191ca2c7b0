"""Load the policy to train and the tasks to train it on, from the names configs use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tasks import Task, load_tasks
from .config import ModelConfig


def load_model_and_tokenizer(cfg: ModelConfig, device: str) -> tuple[Any, Any]:
    """(model, tokenizer) ready for TRL: tool-calling chat template, left padding, pad token set."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .chat import ensure_tool_template

    dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
    if cfg.path == "tiny-random":
        from .tiny import build_tiny_model, build_tiny_tokenizer

        tokenizer = build_tiny_tokenizer()
        model = build_tiny_model(tokenizer).to(dtype)
    else:
        folder, kw = _locate(cfg.path)
        tokenizer = AutoTokenizer.from_pretrained(folder, **kw)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kw)
        if "gguf_file" in kw:
            _as_plain_weights(model)
    ensure_tool_template(tokenizer)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id and im_end is not None:
        tokenizer.eos_token = "<|im_end|>"  # ChatML turns end here; generation must stop here
        model.generation_config.eos_token_id = im_end
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _as_plain_weights(model: Any) -> None:
    """A GGUF checkpoint is loaded de-quantised into ordinary float tensors, yet transformers
    keeps its GGUF 'quantizer' attached and then refuses full fine-tuning. Check that every
    weight really is a trainable float tensor, then detach the quantizer."""
    for name, p in model.named_parameters():
        if not p.dtype.is_floating_point or type(p).__name__ != "Parameter":
            raise ValueError(f"{name} stayed quantised ({type(p).__name__}, {p.dtype}): cannot train it in full; "
                             "convert the GGUF to a Hugging Face folder first")
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
    model.is_quantized = False
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config


def _locate(path: str) -> tuple[str, dict[str, Any]]:
    if path == "smollm2":
        from ..agent.policies.local import smollm2_gguf_path

        p = smollm2_gguf_path()
    else:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"model {path} does not exist (a Hugging Face folder, a .gguf file, "
                                    "'smollm2' or 'tiny-random')")
    if p.is_file():
        if p.suffix != ".gguf":
            raise ValueError(f"{p}: a model file must be .gguf (or give a Hugging Face folder)")
        return str(p.parent), {"gguf_file": p.name}
    return str(p), {}


def resolve_tasks(specs: list[str], limit: int | None = None) -> list[Task]:
    """'examples' (all bundled), 'examples:level=N', 'examples:NAME', or anything `load_tasks` reads."""
    from ..examples import get_example, list_examples

    tasks: list[Task] = []
    for spec in specs:
        if spec == "examples":
            tasks += [e.task for e in list_examples()]
        elif spec.startswith("examples:level="):
            level = int(spec.split("=", 1)[1])
            tasks += [e.task for e in list_examples() if e.level == level]
        elif spec.startswith("examples:"):
            tasks.append(get_example(spec.split(":", 1)[1]).task)
        else:
            tasks += list(load_tasks(spec))
    seen: set[str] = set()
    unique = [t for t in tasks if not (t.name in seen or seen.add(t.name))]
    if not unique:
        raise ValueError(f"no tasks found in {specs}")
    return unique[:limit] if limit else unique


__all__ = ["load_model_and_tokenizer", "resolve_tasks"]
