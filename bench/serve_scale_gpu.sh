#!/usr/bin/env bash
# `cuda-agent serve` on 1 and on 2 GPUs of one host: the same batch, the throughput ratio
# (issue 27's target: >= 1.8x). One device-tool call on nvidia-h100-x2 (or nvidia-h200-x2):
#   here:   bash bench/serve_scale_gpu.sh prepare    wheels the GPU image lacks -> .whl (py3.12)
#   device: bash bench/serve_scale_gpu.sh            carry [".whl"], timeout_s 600
# The batch (bench/serve_scale.py): the CUDA solutions of swish, softmax, layernorm and
# sum_reduction, COPIES (8) distinct copies each = 32 evaluations with timing (no torch.compile
# baseline), after a warm pass that builds the kernels and measures the eager baselines on both
# GPUs. Run 1: `--devices 0`; run 2: `--devices 0,1`; each a fresh service and store, judges
# warmed before the clock. Everything lands in $OUT; the whole run is cut at DEADLINE_S (570 s).
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="pydantic==2.13.4 pydantic_core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 fastapi==0.165.0
        starlette==1.10.0 uvicorn==0.54.0 annotated-doc==0.0.7 opentelemetry-api==1.45.2 importlib_metadata==10.2.0
        zipp==4.1.2 pyelftools==0.33 typing_extensions==4.16.0"

if [ "${1:-}" = prepare ]; then
  grep -qx "/.whl/" .gitignore || { echo "/.whl/ must be git-ignored"; exit 2; }
  mkdir -p .whl && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .whl $WHEELS
  exit
fi

OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
export PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/tmp/serve-scale-cache}
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, sys; print(torch.__version__, torch.version.cuda, sys.version.split()[0], torch.cuda.device_count(), 'GPUs')"
  nproc; } 2>&1 | tee "$OUT/gpu.txt"
python3 -c "import fastapi, uvicorn, prometheus_client, cuda_agent.serve.app" || { echo "serve dependencies missing"; exit 1; }
[ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ] || { echo "needs 2 GPUs"; exit 1; }

timeout -k 10 "${DEADLINE_S:-570}" python3 bench/serve_scale.py --backend cuda --runs 0 0,1 \
  --copies "${COPIES:-8}" --run-timeout-s "${RUN_S:-240}" --out "$OUT" 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
rm -rf "$OUT/cache" "$OUT"/stores/*.sqlite*   # the slot logs stay (stores/*-logs)
echo "exit $rc (124: cut at DEADLINE_S)" | tee -a "$OUT/log.txt"
exit "$rc"
