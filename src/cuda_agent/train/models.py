"""Load the policy to train and the tasks to train it on, from the names configs use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tasks import Task
from .config import ModelConfig, TrainInputError


def load_model_and_tokenizer(cfg: ModelConfig, device: str) -> tuple[Any, Any]:
    """(model, tokenizer) ready for TRL: tool-calling chat template, left padding, pad token set."""
    tokenizer = load_tokenizer(cfg)
    return load_model(cfg, tokenizer, device), tokenizer


def load_tokenizer(cfg: ModelConfig) -> Any:
    """The policy's tokenizer alone (cheap: rows can be checked against it before any weights load),
    with the tool-calling template, left padding and the ChatML end-of-turn as EOS."""
    from transformers import AutoTokenizer

    from .chat import ensure_tool_template

    check_model_path(cfg.path)
    if cfg.path == "tiny-random":
        from .tiny import build_tiny_tokenizer

        tokenizer = build_tiny_tokenizer()
    else:
        folder, kw = _locate(cfg.path)
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, **kw)
        except (OSError, ValueError) as exc:
            raise TrainInputError(f"model.path {cfg.path}: its tokenizer cannot be loaded ({_first_line(exc)}); "
                                  "give a Hugging Face folder with tokenizer files, or a .gguf file") from exc
    ensure_tool_template(tokenizer)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id and im_end is not None:
        tokenizer.eos_token = "<|im_end|>"  # ChatML turns end here; generation must stop here
    return tokenizer


def load_model(cfg: ModelConfig, tokenizer: Any, device: str) -> Any:
    """The weights (fp32 master weights by default) with generation ending where the tokenizer's turns end."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
    if cfg.path == "tiny-random":
        from .tiny import build_tiny_model

        model = build_tiny_model(tokenizer).to(dtype)
    else:
        folder, kw = _locate(cfg.path)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kw)
        if "gguf_file" in kw:
            _as_plain_weights(model)
    if tokenizer.eos_token == "<|im_end|>":
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


_MODEL_NAMES = "a Hugging Face folder (config.json + tokenizer files), a .gguf file, 'smollm2' or 'tiny-random'"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def check_model_path(path: str) -> None:
    """Fail in one line, before anything loads, when `path` cannot be a model: missing, a folder
    without config.json or tokenizer files, or a file that is not .gguf."""
    if path in ("tiny-random", "smollm2"):
        return
    p = Path(path)
    if not p.exists():
        raise TrainInputError(f"model.path {path} does not exist; give {_MODEL_NAMES}")
    if p.is_file():
        if p.suffix != ".gguf":
            raise TrainInputError(f"model.path {path} is a file but not a .gguf; give {_MODEL_NAMES}")
        return
    if not (p / "config.json").is_file():
        raise TrainInputError(f"model.path {path} is a folder without config.json, so not a Hugging Face model; "
                              f"give {_MODEL_NAMES} (a training run's model is its final/ or checkpoint-N/ folder)")
    if not any((p / f).is_file() for f in _TOKENIZER_FILES):
        raise TrainInputError(f"model.path {path} has weights but no tokenizer files ({', '.join(_TOKENIZER_FILES)}); "
                              "copy the base model's tokenizer into it (tokenizer.save_pretrained)")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
    """Each spec as the suite registry reads it: 'examples', 'examples:level=N', 'examples:NAME', a path..."""
    from ..suites.registry import load_suite_tasks

    tasks = [t for spec in specs for t in load_suite_tasks(spec)]
    seen: set[str] = set()
    unique = [t for t in tasks if not (t.name in seen or seen.add(t.name))]
    if not unique:
        raise ValueError(f"no tasks found in {specs}")
    return unique[:limit] if limit else unique


__all__ = ["load_model_and_tokenizer", "load_tokenizer", "load_model", "check_model_path", "resolve_tasks"]
