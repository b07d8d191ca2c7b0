#!/usr/bin/env bash
# Data synthesis at scale on one GPU host (1-8 GPUs), resumable across 10-minute device calls:
# catalogue, synth (workers spread over every GPU), audit, reports; everything lands in $OUT/data_run.tar.gz.
#   run: bash bench/data_gpu.sh        carry: .carry .carry-data   (`bash ../shared/gpu/carry.sh` lays out .carry:
#        wheels in .carry/whl, KernelBench levels 1-3 in .carry/KernelBench; `.whl` and .carry-data/KernelBench also work)
# Resume: put the previous call's $OUT/data_run.tar.gz at .carry-data/resume/data_run.tar.gz (or RESUME_TAR=path);
# each call continues synth until COUNT are accepted, then the audit, then writes the reports.
# Env: COUNT (2000), CALL_S (seconds this call may use, 540), WORKERS_PER_GPU (8), WORKERS (overrides),
#      AUDIT_WORKERS_PER_GPU (8), BACKEND (cuda), COMPILE_BACKEND (inductor), QUIET=1 (--quiet-timing), TIMEOUT (90),
#      EVAL (.carry-data/KernelBench, else .carry/KernelBench), SKIP_AUDIT=1,
#      MIN_SYNTH_S (150: less left than this, no synth this call), AUDIT_SAMPLE=N (audit N random rows instead of the whole set) and OPS6K=path (the same N rows' audit
#      of that Ops-6K table beside ours, then audit_compare.md), AUDIT_SEED (0).
set -uo pipefail
T0=$SECONDS
WHEELS=.whl; ls .whl/*.whl >/dev/null 2>&1 || WHEELS=.carry/whl
if ls $WHEELS/*.whl >/dev/null 2>&1 && ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHEELS/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/root/.cache/cuda-agent}
OUT=${OUT:-/tmp/data-gpu-out}; mkdir -p "$OUT"
BACKEND=${BACKEND:-cuda}; COUNT=${COUNT:-2000}; CALL_S=${CALL_S:-540}; QUIET=${QUIET:-}; TIMEOUT=${TIMEOUT:-90}
COMPILE_BACKEND=${COMPILE_BACKEND:-inductor}; EVAL=${EVAL:-.carry-data/KernelBench}
[ -d "$EVAL" ] || [ ! -d .carry/KernelBench ] || EVAL=.carry/KernelBench
AUDIT_SAMPLE=${AUDIT_SAMPLE:-}; OPS6K=${OPS6K:-}; AUDIT_SEED=${AUDIT_SEED:-0}
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); [ "$BACKEND" = cuda ] && [ "$NGPU" -ge 1 ] || NGPU=1
DEVICES=$(seq -s, 0 $((NGPU - 1)))
WORKERS=${WORKERS:-$(( ${WORKERS_PER_GPU:-8} * NGPU ))}; AUDIT_WORKERS=${AUDIT_WORKERS:-$(( ${AUDIT_WORKERS_PER_GPU:-8} * NGPU ))}
DEV_ARG=(); [ "$BACKEND" = cuda ] && DEV_ARG=(--devices "$DEVICES")
RUN=/tmp/data-run-$BACKEND; STATE=/tmp/data-state-$BACKEND; rm -rf "$RUN" "$STATE"  # STATE: not in RUN (the store wants it clean)
RESUME_TAR=${RESUME_TAR:-.carry-data/resume/data_run.tar.gz}
CALL=1
if [ -f "$RESUME_TAR" ]; then
  tar -xzf "$RESUME_TAR" -C /tmp || exit 1
  CALL=$(( $(cat "$STATE/calls" 2>/dev/null || echo 1) + 1 ))
  [ -d "$STATE/catalogue" ] && mkdir -p "$CUDA_AGENT_CACHE/data" && cp -n "$STATE"/catalogue/* "$CUDA_AGENT_CACHE/data/" 2>/dev/null
fi
mkdir -p "$STATE"; echo "$CALL" > "$STATE/calls"
left() { echo $(( CALL_S - (SECONDS - T0) )); }
PY=${PYTHON:-python3}
LOG="$OUT/log_call$CALL.txt"
# the host beside the run, every 10 s (issue 30: four GPUs made a fifth of one H100's tasks per GPU and
# nothing recorded how many processes, how much CPU, how busy the GPUs were): in the state, so in the tarball
( while :; do
    echo "t=$((SECONDS - T0)) procs=$(ls -d /proc/[0-9]* 2>/dev/null | wc -l) load=$(cut -d' ' -f1-3 /proc/loadavg)" \
         "gpu%=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null | tr '\n' ',')" \
         "fsync_ms=$($PY -c "import os, time; f = os.open('$STATE/.fsync_probe', os.O_WRONLY | os.O_CREAT)
t = time.perf_counter(); os.write(f, b'x' * 2048); os.fsync(f); print(round((time.perf_counter() - t) * 1e3, 2))" 2>&1)" \
         "top=$(ps -eo pcpu,comm --sort=-pcpu --no-headers 2>/dev/null | head -4 | tr -s ' ' | tr '\n' '|')"
    sleep 10
  done ) >> "$STATE/host_call$CALL.txt" 2>&1 &
SAMPLER=$!
{
  echo "== call $CALL: $NGPU GPU(s) [$DEVICES], $WORKERS synth workers, $AUDIT_WORKERS audit workers, count $COUNT"
  nvidia-smi -L 2>/dev/null; $PY -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
  echo "== catalogue"; t0=$SECONDS; $PY -m cuda_agent data catalogue --json; echo "catalogue wall $((SECONDS - t0)) s"
  mkdir -p "$STATE/catalogue"; cp "$CUDA_AGENT_CACHE"/data/catalogue-*.json "$STATE/catalogue/" 2>/dev/null
  accepted=$( [ -f "$RUN/tasks.jsonl" ] && wc -l < "$RUN/tasks.jsonl" || echo 0 )
  if [ "$accepted" -lt "$COUNT" ] && [ "$(left)" -gt "${MIN_SYNTH_S:-150}" ]; then
    budget=$(( $(left) - TIMEOUT - 40 ))  # in-flight candidates finish (up to TIMEOUT) after dispatch stops
    [ "$budget" -ge 1 ] || budget=1  # 0 would mean no deadline to synth
    echo "== synth ($accepted accepted so far; dispatching for ${budget} s)"; t0=$SECONDS
    timeout $(( $(left) - 20 )) $PY -m cuda_agent data synth "$RUN" --count "$COUNT" --seed 0 --backend "$BACKEND" \
        --workers "$WORKERS" "${DEV_ARG[@]}" --eval-set "$EVAL" --time-budget "$budget" --timeout "$TIMEOUT" \
        --compile-backend "$COMPILE_BACKEND" ${QUIET:+--quiet-timing} --no-report
    echo "synth exit $? after $((SECONDS - t0)) s"
  fi
  accepted=$( [ -f "$RUN/tasks.jsonl" ] && wc -l < "$RUN/tasks.jsonl" || echo 0 )
  echo "accepted: $accepted of $COUNT"
  audit() {  # $1 table, $2 out jsonl (resumed), $3 seconds; AUDIT_SAMPLE: N rows drawn under AUDIT_SEED, else all
    echo "== audit of ${AUDIT_SAMPLE:-all} rows of $1 (for up to $3 s; rows are saved as they finish)"; t0=$SECONDS
    timeout "$3" $PY -m cuda_agent data audit "$1" --out "$2" ${AUDIT_SAMPLE:+--sample "$AUDIT_SAMPLE" --seed "$AUDIT_SEED"} \
        --backend "$BACKEND" --workers "$AUDIT_WORKERS" "${DEV_ARG[@]}" --eval-set "$EVAL" --timeout "$TIMEOUT" \
        --compile-backend "$COMPILE_BACKEND" ${QUIET:+--quiet-timing} --json
    echo "audit exit $? after $((SECONDS - t0)) s; rows audited: $(wc -l < "$2" 2>/dev/null || echo 0)"
  }
  [ -n "$AUDIT_SAMPLE" ] || OPS6K=  # Ops-6K beside ours only on samples of one size
  if [ "$accepted" -ge "$COUNT" ] && [ -z "${SKIP_AUDIT:-}" ] && [ "$(left)" -gt 90 ]; then
    share=$(( $(left) - 60 )); [ -n "$OPS6K" ] && share=$(( share / 2 ))  # both sets get their half of the call
    audit "$RUN/tasks.parquet" "$RUN/audit.jsonl" "$share"
    [ -n "$OPS6K" ] && [ "$(left)" -gt 90 ] && audit "$OPS6K" "$RUN/audit_ops6k.jsonl" $(( $(left) - 60 ))
    [ -f "$RUN/audit_ops6k.jsonl" ] && $PY -c "from cuda_agent.data.report import audit_comparison as c
print(open(c({'ours': '$RUN/audit.jsonl', 'Ops-6K': '$RUN/audit_ops6k.jsonl'}, '$RUN/audit_compare.md')).read())"
  fi
  echo "== reports"
  [ -f "$RUN/candidates.jsonl" ] && $PY -m cuda_agent data report "$RUN" >/dev/null
  AUD=(); [ -f "$RUN/audit.jsonl" ] && AUD=(--audit "$RUN/audit.jsonl")
  [ -f "$RUN/tasks.jsonl" ] && $PY -m cuda_agent data set-report "$RUN/tasks.jsonl" --out "$RUN" --eval-set "$EVAL" "${AUD[@]}"
  [ -f "$RUN/audit.jsonl" ] && $PY -c "from cuda_agent.data.report import audit_report; audit_report('$RUN/audit.jsonl')"
  $PY bench/data_first_call.py "$RUN/candidates.jsonl" "$RUN/audit.jsonl" > "$STATE/first_call.json" 2>/dev/null
  echo "call $CALL done after $((SECONDS - T0)) s"
} 2>&1 | tee "$LOG"
kill "$SAMPLER" 2>/dev/null
cp "$LOG" "$STATE/" 2>/dev/null
# the tarball first and few files beside it: the device tool brings back only so many files, and the
# tarball holds everything (reports, tasks, audits, the host samples, the logs)
mkdir -p "$RUN"; tar -czf "$OUT/data_run.tar.gz" -C /tmp "$(basename "$RUN")" "$(basename "$STATE")"
for f in summary.json audit_compare.md dataset_report.md; do
  cp "$RUN/$f" "$OUT/" 2>/dev/null
done
ls -la "$OUT"
