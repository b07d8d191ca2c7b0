#!/usr/bin/env bash
# Quickstart job: evaluate every bundled example's hand-written solution on this machine's
# device (CUDA if torch sees a GPU, else CPU) and print the reward table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec cuda-agent examples "$@"
