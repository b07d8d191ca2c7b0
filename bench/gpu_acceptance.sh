#!/usr/bin/env bash
# One device-tool call (<= 9.5 min on one H100): the reward's acceptance run (bench/gpu_acceptance.py).
# Here, first: bash ../shared/gpu/carry.sh   (lays out .carry/: wheels + KernelBench), then carry `.carry`.
#   run: bash bench/gpu_acceptance.sh      (STEPS, BUDGET_S, REPEATS, NAIVE_SHARE, KB_SHARE override the defaults; CONFINE_READS=1
#        turns the candidate's read rules on for the examples, Triton, paper and latency steps)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -e .carry-benchmark ] || ln -s .carry .carry-benchmark   # bench/judge_kb30.txt names ../.carry-benchmark/KernelBench
python3 bench/gpu_acceptance.py --out "$OUT" --steps "${STEPS:-examples,triton,paper,latency,kb}" \
  --budget-s "${BUDGET_S:-540}" --repeats "${REPEATS:-3}" --kb-list "${KB_LIST:-bench/judge_kb30.txt}" \
  --naive-share "${NAIVE_SHARE:-0.42}" --kb-share "${KB_SHARE:-0.55}" ${CONFINE_READS:+--confine-reads} 2>&1 | tee "$OUT/acceptance.log"
