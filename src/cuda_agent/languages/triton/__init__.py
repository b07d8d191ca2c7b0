"""Triton: `kernels/*.py` holding `@triton.jit` kernels and their launchers (`language.py`), read by an
AST allowlist of its own (`rules.py`)."""
