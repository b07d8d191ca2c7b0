#!/usr/bin/env bash
# The input-move check (bench/inputs_move_scan.py) over KernelBench, Ops-6K and the synthetic set on a GPU,
# for at most SCAN_S seconds (default 240); resumable: SCAN_RESUME names an earlier scan.jsonl whose tasks are skipped.
# Here, first: bash ../shared/gpu/carry.sh, and .carry-data/ops6k.parquet; carry `.carry` and `.carry-data`.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -n "${SCAN_RESUME:-}" ] && cp "$SCAN_RESUME" "$OUT/scan.jsonl"  # a results file to go on from
timeout -s INT "${SCAN_S:-240}" python3 bench/inputs_move_scan.py --out "$OUT/scan.jsonl" --device cuda \
  --jobs "${JOBS:-8}" --max-gb "${MAX_GB:-6}" .carry/KernelBench .carry-data/ops6k.parquet \
  release/cuda-agent-synth-2013/tasks.parquet 2>&1 | tail -60 | tee "$OUT/scan_summary.txt"
for f in "$OUT"/scan.*.jsonl; do [ -e "$f" ] && cat "$f" >> "$OUT/scan.jsonl" && rm -f "$f"; done
wc -l "$OUT/scan.jsonl"
