"""The trajectory viewer: `cuda-agent view RUN_DIR` serves a local page listing a run's episodes
(optimize, bench, train) and showing each one's conversation, tool calls and outputs, file diffs
between turns, and every evaluation's breakdown on a timeline."""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {"ViewerServer": "server", "EpisodeRow": "sources", "RunIndex": "sources", "scan": "sources"}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
