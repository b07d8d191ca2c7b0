"""C++ kernels: CUDA C++ on the cuda backend and C++/OpenMP on cpu (`language.py`), and the CUDA Agent
paper's workspace layout (`paper.py`) over the same rules (`source_rules.py`, `symbols.py`) and build."""

from pathlib import Path

TEMPLATES_DIR = Path(__file__).parent / "templates"  # SKILL.md per backend, binding.cpp, binding_registry.h, paper/
