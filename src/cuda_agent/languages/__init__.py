"""Languages a candidate may be written in (CUDA C++, Triton, the paper's workspace layout).

`get_language(name)` gives one; `docs/languages.md` says what adding one takes.
"""

from .base import (DEFAULT_LANGUAGE, LANGUAGE_NAMES, Language, SandboxNeeds, get_language, language_for_artifact,
                   register_language)

__all__ = ["Language", "SandboxNeeds", "LANGUAGE_NAMES", "DEFAULT_LANGUAGE", "get_language",
           "language_for_artifact", "register_language"]
