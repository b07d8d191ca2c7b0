"""Expose a built extension library as an importable module (`import cuda_extension`).

The library registers its functions as torch ops in a namespace named like the module;
the module forwards attribute access to that namespace, so model_new.py calls
`cuda_extension.relu(x)` exactly as in the paper's released workspace.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any


def install_extension_module(name: str, library: str | Path) -> types.ModuleType:
    """Load `library` and register module `name` in sys.modules."""
    import torch

    path = Path(library)
    if not path.is_file():
        raise ImportError(f"{name}: extension library {path} does not exist; run ./compile.sh first")
    torch.ops.load_library(str(path))
    namespace = getattr(torch.ops, name)
    module = types.ModuleType(name, f"Custom ops built from kernels/ ({path.name}).")
    module.__file__ = str(path)

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        try:
            return getattr(namespace, attr)
        except (AttributeError, RuntimeError):
            raise AttributeError(f"{name} has no op {attr!r}: is it registered with REGISTER_BINDING?") from None

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[name] = module
    return module
