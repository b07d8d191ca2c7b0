#!/usr/bin/env bash
# Ops-6K rows whose inputs are made at import (30, 4398), the reference as its own solution, on the GPU: what a
# draw through the source run again (`_ImportedAgain`) costs there (red team rounds 18-19: ~113 s an evaluation
# on a loaded CPU). After bench/gpu_acceptance.sh (its /tmp/site); carry .carry and .carry-data.
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/imported" /tmp/imported
python3 - <<'PY'
import pyarrow.parquet as pq
rows = pq.read_table(".carry-data/ops6k.parquet").to_pylist()
with open("/tmp/imported/list.txt", "w") as f:
    for i in (30, 4398):
        path = f"/tmp/imported/ops6k_{i:05d}.py"
        open(path, "w").write(rows[i]["code"])
        print(path, file=f)
PY
timeout "${IMPORTED_S:-90}" python3 -m cuda_agent bench run /tmp/imported/list.txt --solutions reference --backend cuda \
  --no-compile-baseline --out "$OUT/imported" --fresh --no-report > "$OUT/imported/run.log" 2>&1
python3 - "$OUT/imported/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: r.get(k) for k in ("name", "reward", "reason", "seconds", "phases")})[:600])
PY
