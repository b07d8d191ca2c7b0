#!/usr/bin/env bash
# Quickstart job: evaluate every bundled example's hand-written solution on this machine's
# device (CUDA if torch sees a GPU, else CPU) and print the reward table.
# Setup installs only what this needs (the package, its core dependencies and, when none is
# installed, torch). How long, after setup: about 4 minutes on an idle 2-core CPU box the first
# time (227 s measured: the torch header PCH and each torch.compile baseline are made then),
# about 2 minutes once cached; more on a busy box (docs/cli.md). Exit code: 0 when every
# example is correct.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[setup] .venv with cuda-agent and its core dependencies (first time: installs them; an installed torch is reused)"
bash scripts/setup.sh examples
. .venv/bin/activate
echo "[examples] building, verifying and timing the 8 bundled examples (about 4 minutes on an idle 2-core CPU" \
     "the first time, 2 once cached); one line per example as each finishes"
exec cuda-agent examples "$@"
