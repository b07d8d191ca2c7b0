#!/usr/bin/env bash
# A/B of warm re-evaluation latency, old vs new code alternating in one device call.
# Carry .whl and .ab (.ab/old_src: git archive OLD_COMMIT src | tar -x -C .ab/old_src).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/root/.cache/cuda-agent
for round in 1 2; do
  for which in old new; do
    src=$PWD/src; [ $which = old ] && src=$PWD/.ab/old_src/src
    echo "== $(date -u +%T) $which $round" | tee -a $OUT/log.txt
    PYTHONPATH=/tmp/site:$src timeout 140 python3 bench/judge_latency.py --example swish --backend cuda --repeats 4 --out $OUT/ab_${which}_$round.json > $OUT/ab_${which}_$round.log 2>&1
    tail -1 $OUT/ab_${which}_$round.log | cut -c1-300 | tee -a $OUT/log.txt
  done
done
