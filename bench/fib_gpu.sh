#!/usr/bin/env bash
# One device-tool call for FlashInfer-Bench (issue 14): bench/fib_gpu.py on the fused_add_rmsnorm_h4096
# fixture definition (our judge on every workload incl. a held-out one, Solution JSON export checked by
# flashinfer-bench's own loader, its own Benchmark run, the FlashInfer-style score). Carry `.whl`
# (pydantic & co, flashinfer-bench 0.1.2, safetensors, docstring-parser for py3.12). Results in $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/root/.cache/cuda-agent
export FIB_CACHE_PATH=/tmp/fib_cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, sys, flashinfer_bench; print(torch.__version__, torch.version.cuda, sys.version.split()[0], 'flashinfer-bench', flashinfer_bench.__version__)"; nproc; } 2>&1 | tee "$OUT/gpu.txt"
timeout "${FIB_S:-450}" python3 bench/fib_gpu.py --out "$OUT" --max-workloads "${MAX_WORKLOADS:-5}" ${FIB_ARGS:-} 2>&1 | tee "$OUT/log.txt"
echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/log.txt"
