#!/usr/bin/env bash
# Idempotent setup: a virtualenv in .venv with cuda-agent installed (editable) and test deps.
# Uses an already-installed torch when the system has one (e.g. a CUDA build); otherwise
# installs a pinned torch (TORCH_SPEC) so pip never resolves a bare, multi-GB `torch`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv --system-site-packages .venv
fi
. .venv/bin/activate
if ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
fi
# re-install when any test dependency is missing (the test extra grows with the layers)
if ! python -c "import cuda_agent, pytest, pytest_timeout, openai, anthropic, trl, ray, matplotlib, tensorboard" 2>/dev/null; then
  python -m pip install -q -e ".[test]"
fi
