#!/usr/bin/env bash
# One device-tool call for the judge (issue 12). Carry `.whl` (pydantic & co for py3.12) and,
# for the `kb` step, `.carry-benchmark` (KernelBench levels 1-3). STEPS picks from:
#   symbols  what the examples' libraries import that the allowlist refuses (bench/symbols_report.py)
#   tests    the GPU tests (tests/evaluation/test_gpu.py)
#   latency  cold + warm re-evaluations of swish, timing spread (bench/judge_latency.py)
#   examples the 8 bundled examples' CUDA solutions, default evaluation
#   kb       KB_LIST (default bench/judge_kb30.txt): naive one-process harness, then ours
#            (reference as the solution, every guard on), per-task seconds side by side
# Everything lands in $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/root/.cache/cuda-agent
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-tests latency}
stamp() { echo "== $(date -u +%T) t=${SECONDS}s $*" | tee -a "$OUT/log.txt"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, sys; print(torch.__version__, torch.version.cuda, sys.version.split()[0])"; nproc; } 2>&1 | tee "$OUT/gpu.txt"
for step in $STEPS; do
  stamp "$step"
  case "$step" in
    symbols) timeout 120 python3 bench/symbols_report.py --backend cuda 2>&1 | tee "$OUT/symbols.log" ;;
    tests) timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider -m gpu tests/evaluation/test_gpu.py -s 2>&1 | tee "$OUT/gpu_tests.log" ;;
    latency) timeout "${LAT_S:-240}" python3 bench/judge_latency.py --example swish --backend cuda --repeats 6 --out "$OUT/latency.json" 2>&1 | tee "$OUT/latency.log" ;;
    examples) timeout "${EXAMPLES_S:-300}" python3 -m cuda_agent examples --backend cuda --out "$OUT/examples.jsonl" 2>&1 | tee "$OUT/examples.log" ;;
    kb)
      list=${KB_LIST:-bench/judge_kb30.txt}
      timeout "${NAIVE_S:-240}" python3 bench/naive_harness.py "$list" --out "$OUT/naive.jsonl" 2>&1 | tail -40 | tee "$OUT/naive.log"
      stamp "ours"
      timeout "${OURS_S:-300}" python3 -m cuda_agent bench run "$list" --solutions reference --backend cuda \
        --no-compile-baseline --memory-limit-gb 64 --out /tmp/kb_ours --fresh --no-report 2>&1 | tail -60 | tee "$OUT/ours.log"
      cp /tmp/kb_ours/results.jsonl "$OUT/ours.jsonl" 2>/dev/null ;;
  esac
done
stamp done
