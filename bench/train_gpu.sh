#!/usr/bin/env bash
# The small real run of docs/training.md on one lent GPU: RFT of SmolLM2-135M-Instruct on scripted
# successful episodes of the four level-1 examples, then RL (TRL, critic-free) on those tasks in
# the real CUDA environment, then the final policy on the four held-out level-2 examples.
# The 98 MB GGUF is over one call's 64 MiB, so it travels in two halves over two calls:
#   bash bench/train_gpu.sh prepare   # here: wheels, GGUF halves, a snapshot of src/ (see below)
#   device call 1: bash bench/train_gpu.sh setup   carry [".scratch/train-carry1"]
#   device call 2 (right after; files live while the machine is warm):
#                  bash bench/train_gpu.sh run     carry [".scratch/train-carry2"]
# src/ travels as a snapshot (git HEAD + the working tree's train/ and exit_codes.py) so that work in progress
# elsewhere in a shared working tree cannot change what runs.
set -uo pipefail
cd "$(dirname "$0")/.."
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
OUT=${OUT:-/tmp/train_gpu_out}
mkdir -p "$OUT"
export CUDA_AGENT_CACHE=/root/.cache/cuda-agent PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false
C1=.scratch/train-carry1 C2=.scratch/train-carry2
WHEELS="pydantic==2.13.4 pydantic-core==2.46.4 annotated-types typing-inspection trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gguf==0.19.0"
CLI="python3 -m cuda_agent"

case "${1:-}" in
  prepare)
    rm -rf "$C1" "$C2" && mkdir -p "$C1/whl" "$C2"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d "$C1/whl" $WHEELS || exit 1
    src=$(${PYTHON:-.venv/bin/python} -c "from cuda_agent.agent.policies.local import smollm2_gguf_path as p; print(p())")
    echo "$SHA  $src" | sha256sum -c - || exit 1
    head -c 50000000 "$src" > "$C1/smol.part0" && tail -c +50000001 "$src" > "$C2/smol.part1"
    for c in "$C1" "$C2"; do
      git archive HEAD src | tar -x -C "$c" && rm -rf "$c/src/cuda_agent/train" && cp -r src/cuda_agent/train "$c/src/cuda_agent/" && cp src/cuda_agent/exit_codes.py "$c/src/cuda_agent/"
      cp configs/train/rft_smollm2_gpu.yaml configs/train/rl_smollm2_gpu.yaml "$c/"
    done
    du -sh "$C1" "$C2"
    ;;
  prepare1)  # one call: the model re-quantised to 3 bits (bench/train_gpu_pack.py) fits beside the wheels
    bash "$0" prepare >/dev/null || exit 1
    C=.scratch/train-carry && rm -rf "$C" && mkdir -p "$C" && mv "$C1/whl" "$C1/src" "$C1"/*.yaml "$C/"
    ${PYTHON:-.venv/bin/python} bench/train_gpu_pack.py pack "$C/smol3" || exit 1
    cp bench/train_gpu_pack.py "$C/" && rm -rf "$C1" "$C2" && du -sh "$C"
    ;;
  one)  # device call: carry [".scratch/train-carry"]
    C=.scratch/train-carry
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$C"/whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD/$C/src
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
    python3 "$C/train_gpu_pack.py" unpack "$C/smol3" /root/smol3 2>&1 | tail -1
    cd "$C" && t0=$(date +%s)
    (setsid nohup $CLI examples --only swish --only softmax --only sum_reduction --only layernorm \
      --no-compile-baseline > /root/warm.log 2>&1 < /dev/null &)
    $CLI train demos examples:level=1 -o /root/rft_demos.jsonl --backend cuda 2>&1 | tee "$OUT/run.log"
    $CLI train rft -c rft_smollm2_gpu.yaml --set model.path=/root/smol3 --set dataset=/root/rft_demos.jsonl \
      --set output_dir=/root/rft 2>&1 | grep -v -E "it/s\]|s/it\]|Warning|warnings.warn" | tee -a "$OUT/run.log"
    echo "rft done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/run.log"; tail -3 /root/warm.log | tee -a "$OUT/run.log"
    $CLI train rl -c rl_smollm2_gpu.yaml --set model.path=/root/rft/final --set output_dir=/root/rl \
      --set workdir=/root/episodes --set max_seconds="${RL_SECONDS:-170}" 2>&1 \
      | grep -v -E "it/s\]|s/it\]|Warning|warnings.warn" | tee -a "$OUT/run.log"
    echo "rl done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/run.log"
    cp /root/rft/metrics.jsonl "$OUT/rft_metrics.jsonl"; cp /root/rl/metrics.jsonl "$OUT/rl_metrics.jsonl"
    cp /root/rl/heldout.json "$OUT/heldout.json" 2>/dev/null; cp /root/warm.log "$OUT/warm.log"
    tar czf "$OUT/configs_tb.tgz" -C /root rft/config.yaml rl/config.yaml rft/tensorboard rl/tensorboard 2>/dev/null
    ;;
  setup)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$C1"/whl/*.whl || exit 1
    mkdir -p /root/smol /root/src && cp "$C1/smol.part0" /root/smol/ && cp -r "$C1/src" "$C1"/*.yaml /root/src/
    export PYTHONPATH=/tmp/site:/root/src/src
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
    python3 -c "import torch, transformers, trl, datasets, pydantic, cuda_agent.train.trl_rl; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tee -a "$OUT/gpu.txt"
    # Warm the build cache with the training tasks' reference solutions while call 2 is being sent
    # (a new session outlives this call); exact reproductions by the policy then build in no time.
    cd /root/src && setsid nohup $CLI examples --only swish --only softmax --only sum_reduction --only layernorm \
      --no-compile-baseline > /root/warm.log 2>&1 < /dev/null &
    sleep 2; echo "warm-up started"
    ;;
  run)
    export PYTHONPATH=/tmp/site:/root/src/src
    [ -f /root/smol/smol.part0 ] || { echo "part 0 missing: call 'setup' first, on the same machine"; exit 3; }
    cat /root/smol/smol.part0 "$C2/smol.part1" > /root/smol/$GGUF && echo "$SHA  /root/smol/$GGUF" | sha256sum -c - || exit 4
    cd /root/src
    t0=$(date +%s)
    $CLI train demos examples:level=1 -o /root/rft_demos.jsonl --backend cuda 2>&1 | tee "$OUT/run.log"
    $CLI train rft -c rft_smollm2_gpu.yaml --set model.path=/root/smol/$GGUF --set dataset=/root/rft_demos.jsonl \
      --set output_dir=/root/rft 2>&1 | grep -v -E "it/s\]|s/it\]|Warning|warnings.warn" | tee -a "$OUT/run.log"
    echo "rft done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/run.log"
    tail -3 /root/warm.log | tee -a "$OUT/run.log"
    $CLI train rl -c rl_smollm2_gpu.yaml --set model.path=/root/rft/final --set output_dir=/root/rl \
      --set workdir=/root/episodes --set max_seconds="${RL_SECONDS:-230}" 2>&1 \
      | grep -v -E "it/s\]|s/it\]|Warning|warnings.warn" | tee -a "$OUT/run.log"
    echo "rl done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/run.log"
    cp /root/rft/metrics.jsonl "$OUT/rft_metrics.jsonl"; cp /root/rl/metrics.jsonl "$OUT/rl_metrics.jsonl"
    cp /root/rl/heldout.json "$OUT/heldout.json" 2>/dev/null; cp /root/warm.log "$OUT/warm.log"
    tar czf "$OUT/configs_tb.tgz" -C /root rft/config.yaml rl/config.yaml rft/tensorboard rl/tensorboard 2>/dev/null
    ;;
  *) echo "usage: $0 prepare|setup|run|prepare1|one"; exit 2 ;;
esac
