#!/usr/bin/env bash
# One device-tool call: probe the catalogue, synthesise a few hundred tasks on the GPU, audit them.
#   run: bash bench/data_gpu.sh   (carry: .whl .carry-data; KernelBench levels 1-3 in .carry-data/KernelBench)
# Env knobs (for a local smoke run): BACKEND, COUNT, WORKERS, BUDGET_S, AUDIT_S, COMPILE_BACKEND, QUIET=1 (--quiet-timing).
# RESUME_TAR=<data_run.tar.gz from an earlier call>: continue that run (synth and audit both resume).
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1 && ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/root/.cache/cuda-agent}
OUT=${OUT:-/tmp/data-gpu-out}; mkdir -p "$OUT"
BACKEND=${BACKEND:-cuda}; COUNT=${COUNT:-400}; QUIET=${QUIET:-}; WORKERS=${WORKERS:-8}; BUDGET_S=${BUDGET_S:-200}
AUDIT_S=${AUDIT_S:-150}; COMPILE_BACKEND=${COMPILE_BACKEND:-inductor}
RUN=/tmp/data-run-$BACKEND; rm -rf "$RUN"
[ -n "${RESUME_TAR:-}" ] && tar -xzf "$RESUME_TAR" -C /tmp
PY=${PYTHON:-python3}
{
  nvidia-smi -L 2>/dev/null; $PY -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
  echo "== catalogue"; t0=$SECONDS; $PY -m cuda_agent data catalogue --json; echo "catalogue wall $((SECONDS - t0)) s"
  echo "== synth"; t0=$SECONDS
  $PY -m cuda_agent data synth "$RUN" --count "$COUNT" --seed 0 --backend "$BACKEND" --workers "$WORKERS" \
      --eval-set .carry-data/KernelBench --time-budget "$BUDGET_S" --timeout 90 --compile-backend "$COMPILE_BACKEND" ${QUIET:+--quiet-timing}
  echo "synth wall $((SECONDS - t0)) s"; t0=$SECONDS
  echo "== audit (stopped after ${AUDIT_S} s if not done; rows are saved as they finish)"
  timeout "$AUDIT_S" $PY -m cuda_agent data audit "$RUN/tasks.parquet" --out "$RUN/audit.jsonl" --backend "$BACKEND" \
      --workers "$WORKERS" --eval-set .carry-data/KernelBench --timeout 90 --compile-backend "$COMPILE_BACKEND" ${QUIET:+--quiet-timing} --json
  echo "audit exit $? after $((SECONDS - t0)) s"
  $PY -c "from cuda_agent.data.report import audit_report; print(open(audit_report('$RUN/audit.jsonl')).read()[:3000])"
} 2>&1 | tee "$OUT/log.txt"
cp "$RUN/summary.json" "$OUT/summary.json" 2>/dev/null
cp "$RUN/report.md" "$OUT/report.md" 2>/dev/null
tar -czf "$OUT/data_run.tar.gz" -C /tmp "$(basename "$RUN")"
ls -la "$OUT"
