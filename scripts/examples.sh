#!/usr/bin/env bash
# Quickstart job: evaluate every bundled example's hand-written solution on this machine's
# device (CUDA if torch sees a GPU, else CPU) and print the reward table.
# How long: setup once (minutes if pip must install the package and its test extra), then the
# 8 examples: about 5 minutes on an idle 2-core CPU box the first time (the torch header PCH and
# each torch.compile baseline are made then), about 2 minutes once cached; more on a busy box
# (bench/examples_time.py, docs/cli.md). Exit code: 0 when every example is correct.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[setup] .venv with cuda-agent (first time: installs the package; an installed torch is reused)"
bash scripts/setup.sh
. .venv/bin/activate
echo "[examples] building, verifying and timing the 8 bundled examples (about 5 minutes on a 2-core CPU the" \
     "first time, 2 once cached); one line per example as each finishes"
exec cuda-agent examples "$@"
