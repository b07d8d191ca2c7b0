#!/usr/bin/env bash
# Issue 26, item 5: every optional extra of pyproject.toml resolves in minutes, as a lab would type it:
# `pip install -e '.[EXTRA]'` in a fresh venv that already holds torch 2.13.0. One fresh venv per extra;
# torch goes in first (the CPU wheel: the resolver sees an installed torch 2.13.0 either way), then pip
# resolves the extra; the extras that pull verl (verl, test) with configs/verl-constraints.txt (the pins
# verl 0.9.1 itself declares), the others as they are. Default: --dry-run (resolution only, what took 25 minutes);
# --install installs for real and imports the extra's top modules.
#
#   bash bench/extras_install.sh [--install] [--limit-s 900] [EXTRA ...]     (default: every extra)
#
# One line per extra in $OUT/extras_install.jsonl (default .scratch/extras): seconds, exit status, the
# versions pip picked for the packages that caused trouble before (verl, transformers, tensordict,
# TransferQueue, trl, ray), and the log file. Exit 1 if any extra failed or ran past --limit-s.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/.scratch/extras}
PY=${PYTHON:-python3}
TORCH=${TORCH:-torch==2.13.0}
TORCH_INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
MODE=--dry-run LIMIT=900 EXTRAS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --install) MODE="" ;;
    --limit-s) LIMIT=$2; shift ;;
    *) EXTRAS+=("$1") ;;
  esac
  shift
done
[ ${#EXTRAS[@]} -gt 0 ] || mapfile -t EXTRAS < <($PY -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']))")
mkdir -p "$OUT"
declare -A IMPORTS=([data]="datasets matplotlib" [agent]="openai anthropic transformers gguf accelerate"
  [train]="trl transformers datasets tensorboard yaml gguf" [verl]="verl transformers tensordict transfer_queue ray"
  [ray]="ray" [serve]="fastapi uvicorn prometheus_client" [bench]="matplotlib"
  [flashinfer]="flashinfer_bench safetensors docstring_parser" [test]="pytest importlinter verl trl")
failed=0
for extra in "${EXTRAS[@]}"; do
  venv=$OUT/venv-$extra log=$OUT/$extra.log report=$OUT/$extra.report.json
  rm -rf "$venv" && $PY -m venv "$venv" || exit 1
  "$venv/bin/python" -m pip install -q --upgrade pip > "$log" 2>&1
  "$venv/bin/python" -m pip install -q "$TORCH" --index-url "$TORCH_INDEX" >> "$log" 2>&1 || { echo "torch install failed: $log"; exit 1; }
  constrain=(); case "$extra" in verl|test) constrain=(-c configs/verl-constraints.txt) ;; esac
  t0=$(date +%s.%N)
  timeout "$LIMIT" "$venv/bin/python" -m pip install $MODE --report "$report" "${constrain[@]}" -e ".[$extra]" >> "$log" 2>&1
  rc=$?
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
  imports=skipped
  if [ -z "$MODE" ] && [ $rc = 0 ]; then
    imports=ok
    for m in ${IMPORTS[$extra]:-}; do "$venv/bin/python" -c "import $m" >> "$log" 2>&1 || imports="failed: $m"; done
  fi
  $PY - "$extra" "$rc" "$secs" "$report" "$log" "$imports" "$LIMIT" <<'EOF' | tee -a "$OUT/extras_install.jsonl"
import json, sys
extra, rc, secs, report, log, imports, limit = sys.argv[1:]
picked = {}
try:
    for item in json.load(open(report)).get("install", []):
        meta = item.get("metadata", {})
        name = meta.get("name", "").lower().replace("_", "-")
        if name in ("verl", "transformers", "tensordict", "transferqueue", "trl", "ray", "torch", "datasets"):
            picked[name] = meta.get("version")
except (OSError, ValueError):
    pass
rc = int(rc)
print(json.dumps({"extra": extra, "ok": rc == 0, "exit": rc, "timed_out": rc == 124, "seconds": round(float(secs), 1),
                  "limit_s": int(limit), "picked": picked, "imports": imports, "log": log}))
EOF
  [ $rc = 0 ] && [ "${imports#failed}" = "$imports" ] || failed=1
  [ -n "${KEEP_VENVS:-}" ] || rm -rf "$venv"
done
exit $failed
