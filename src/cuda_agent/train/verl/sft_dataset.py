"""verl's multi-turn SFT dataset over our RFT parquet, whose `messages` and `tools` are JSON
strings (see data.py for why). Named in stage 2's config as `data.custom_cls`; imports
verl at module level, so load it only where verl is installed."""

from __future__ import annotations

import json

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset


class CudaAgentSFTDataset(MultiTurnSFTDataset):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.messages = [json.loads(m) if isinstance(m, str) else m for m in self.messages]
        if self.tools is not None:
            self.tools = [json.loads(t) if isinstance(t, str) else t for t in self.tools]

    def _build_messages(self, example: dict):
        raw = example[self.messages_key]
        example = {**example, self.messages_key: json.loads(raw) if isinstance(raw, str) else raw}
        return super()._build_messages(example)
