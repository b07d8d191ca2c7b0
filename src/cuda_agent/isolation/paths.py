"""Where trusted state lives: the cache of builds, baselines and workspace records.

One home, read by every layer, so the agent's bash tool can keep exactly this folder out of a
candidate's reach and the evaluator can trust what it finds there.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """`CUDA_AGENT_CACHE`, else `~/.cache/cuda-agent`."""
    return Path(os.environ.get("CUDA_AGENT_CACHE", Path.home() / ".cache" / "cuda-agent"))
