"""A tiny, randomly initialised chat model built offline, for smoke runs and CPU tests: the whole
training path must run in CI without network or weights. A byte-level BPE tokenizer is trained
in a second on text the model will see; the model is a two-layer Llama. Its reward is -1, which
is the point: the pipeline is under test, not the policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHATML_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tool_chat_template() -> str:
    """The Qwen2.5 chat template (ChatML + hermes `<tool_call>` JSON) shipped with TRL: it suits any
    ChatML tokenizer, and TRL parses its tool calls and has its training variant."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return qwen2_5_chat_template


def _training_corpus() -> list[str]:
    from .. import languages
    from ..examples import list_examples

    templates = Path(languages.__file__).parent.glob("*/templates/*")  # every language's, by file name
    texts = [p.read_text() for p in sorted(templates, key=lambda p: p.name) if p.is_file()]
    for ex in list_examples():
        texts.append(ex.task.source)
        for f in sorted(ex.root.rglob("*")):
            if f.is_file() and f.suffix in (".py", ".cu", ".cpp", ".h"):
                texts.append(f.read_text())
    texts.append('<tool_call>\n{"name": "read_file", "arguments": {"path": "model.py"}}\n</tool_call>')
    texts.append("<tool_response>\n</tool_response> You are a helpful assistant. # Tools <tools></tools>")
    return texts


def build_tiny_tokenizer(vocab_size: int = 1024):
    """A ChatML byte-level BPE tokenizer with the tool-calling chat template, trained offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=CHATML_SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_training_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.chat_template = tool_chat_template()
    fast.padding_side = "left"
    return fast


def build_tiny_model(tokenizer, *, hidden: int = 64, layers: int = 2, heads: int = 4, seed: int = 0,
                     max_positions: int = 8192):
    """A two-layer Llama with random weights sized to `tokenizer`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=max_positions, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def save_tiny_model(directory: str | Path, **kwargs: Any) -> Path:
    """Build the tiny tokenizer + model and save both as a normal Hugging Face checkpoint."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer()
    model = build_tiny_model(tokenizer, **kwargs)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    return out
