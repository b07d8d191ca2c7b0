"""The TRL engine (one GPU): SFT (`sft.py`), multi-turn GRPO (`env.py`, `rl.py`), a service reward (`reward.py`)."""
