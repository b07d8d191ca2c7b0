#!/usr/bin/env bash
# One device-tool call: install carried wheels, then run the CUDA tests, the examples and
# the environment benchmark. Logs and JSON land in $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
export CUDA_AGENT_CACHE=/root/.cache/cuda-agent
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, sys; print(torch.__version__, sys.version)"
for step in "$@"; do
  case "$step" in
    tests) python3 -m pytest -q -m gpu tests/evaluation/test_gpu.py -x 2>&1 | tee "$OUT/gpu_tests.log" ;;
    examples) python3 -m cuda_agent examples --backend cuda --out "$OUT/examples.jsonl" 2>&1 | tee "$OUT/examples.log" ;;
    smoke) python3 -m cuda_agent examples --backend cuda --only swish --out "$OUT/examples.jsonl" 2>&1 | tee "$OUT/examples.log" ;;
    bench-build) python3 bench/env_bench.py --backend cuda --out "$OUT/bench_build.json" --skip latency unchanged 2>&1 | tee "$OUT/bench_build.log" ;;
    bench) python3 bench/env_bench.py --backend cuda --out "$OUT/bench.json" "${BENCH_ARGS[@]:-}" 2>&1 | tee "$OUT/bench.log" ;;
  esac
done
