"""What a model's tokens cost (USD per 1M prompt and completion tokens), for the cost budget.

The built-in table holds a few public list prices; a JSON file `{"model-or-glob": {"input": 3.0,
"output": 15.0}}` (`--prices`, `CUDA_AGENT_PRICES`) extends or overrides it. The most specific
match wins (an exact name, then the longest glob); local and scripted policies cost nothing.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from .trajectory import Usage


class Price(BaseModel):
    input: float = Field(ge=0, description="USD per 1M prompt tokens")
    output: float = Field(ge=0, description="USD per 1M completion tokens")

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.input + usage.completion_tokens * self.output) / 1e6


# List prices (USD / 1M tokens) as published by the providers in early 2026.
BUILTIN: dict[str, Price] = {
    "claude-opus-4-5*": Price(input=5.0, output=25.0),
    "claude-sonnet-4*": Price(input=3.0, output=15.0),
    "claude-haiku-4-5*": Price(input=1.0, output=5.0),
    "gpt-5": Price(input=1.25, output=10.0),
    "gpt-5-mini": Price(input=0.25, output=2.0),
    "gpt-4.1": Price(input=2.0, output=8.0),
    "gpt-4o": Price(input=2.5, output=10.0),
    "gpt-4o-mini": Price(input=0.15, output=0.6),
}
FREE_KINDS = frozenset({"local", "scripted"})


class PriceTableError(ValueError):
    """A price file that cannot be read (the message names it)."""


def load_table(path: str | Path | None = None) -> dict[str, Price]:
    """The built-in table with the user's file on top (`path`, else $CUDA_AGENT_PRICES)."""
    table = dict(BUILTIN)
    source = path or os.environ.get("CUDA_AGENT_PRICES")
    if source:
        try:
            raw = json.loads(Path(source).read_text())
            if not isinstance(raw, dict):
                raise PriceTableError(f"{source}: a price table is a JSON object of model -> {{input, output}}")
            table.update({str(k): Price.model_validate(v) for k, v in raw.items()})
        except (OSError, json.JSONDecodeError, ValidationError) as exc:
            raise PriceTableError(f"cannot read price table {source}: {str(exc).splitlines()[0]}") from None
    return table


def price_for(kind: str, model: str | None, table: dict[str, Price]) -> Price | None:
    """The price of `model` under policy `kind`; None when the table does not know it."""
    if kind in FREE_KINDS:
        return Price(input=0.0, output=0.0)
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]
    for key in (model, name):
        if key in table:
            return table[key]
    globs = sorted((k for k in table if any(c in k for c in "*?[")), key=len, reverse=True)
    for pattern in globs:
        if fnmatch.fnmatchcase(model, pattern) or fnmatch.fnmatchcase(name, pattern):
            return table[pattern]
    return None


__all__ = ["Price", "BUILTIN", "PriceTableError", "load_table", "price_for"]
