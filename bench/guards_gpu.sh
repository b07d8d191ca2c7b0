#!/usr/bin/env bash
# One device-tool call for the guards (issue 3): GPU tests incl. the CUDA hack variants,
# then the bundled examples with every guard on. Logs in $OUT.
#   device run: bash bench/guards_gpu.sh   (carry .whl)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/root/.cache/cuda-agent
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
uname -r | tee -a "$OUT/gpu.txt"
step=${1:-all}
if [ "$step" = all ] || [ "$step" = tests ]; then
  timeout 330 python3 -m pytest -q -s -m gpu tests/evaluation/test_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/guards_gpu_tests.log"
fi
if [ "$step" = all ] || [ "$step" = examples ]; then
  timeout 230 python3 -m cuda_agent examples --backend cuda --out "$OUT/examples.jsonl" 2>&1 | tee "$OUT/examples.log"
fi
if [ "$step" = bench ]; then
  timeout 300 python3 bench/guard_bench.py --backend cuda --repeats 3 --only swish softmax conv2d_relu mlp_block \
    --out "$OUT/h100_guard_bench.json" 2>&1 | tee "$OUT/guard_bench.log"
  timeout 200 python3 bench/env_bench.py --backend cuda --skip build latency --unchanged-per-task 2 \
    --out "$OUT/h100_unchanged.json" 2>&1 | tee "$OUT/unchanged.log"
fi
