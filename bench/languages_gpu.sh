#!/usr/bin/env bash
# One device-tool call for issue 14 item 1 (languages). Carry `.whl` (pydantic & co for py3.12,
# as bench/judge_gpu.sh). Runs the CPU-side language tests for a sanity check, then
# bench/languages_gpu.py: Triton solutions of swish / softmax / layernorm / sum_reduction beside
# their CUDA C++ ones, the Triton runtime attacks, and the paper's agent_workdir (fixture).
# Everything lands in $OUT (languages.jsonl, summary.json, log.txt).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/root/.cache/cuda-agent
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton, sys; print(torch.__version__, torch.version.cuda, triton.__version__, sys.version.split()[0])"
  python3 -c "from cuda_agent.languages.triton.language import triton_executables as t; print(*t(), sep='\n')"
  nproc; } 2>&1 | tee "$OUT/gpu.txt"
echo "== $(date -u +%T) static + sandbox tests" | tee -a "$OUT/log.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/languages/triton tests/languages/test_registry.py 2>&1 | tail -15 | tee "$OUT/cpu_tests.log"
echo "== $(date -u +%T) evaluations" | tee -a "$OUT/log.txt"
timeout "${LANG_S:-420}" python3 bench/languages_gpu.py --out "$OUT" ${ONLY:+--only $ONLY} 2>&1 | tee -a "$OUT/log.txt"
echo "== $(date -u +%T) done t=${SECONDS}s" | tee -a "$OUT/log.txt"
