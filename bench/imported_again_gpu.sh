#!/usr/bin/env bash
# Ops-6K rows whose inputs are made at import (30, 4398), the reference as its own solution, on the GPU: what a
# draw through the source run again (`_ImportedAgain`) costs there (red team rounds 18-19: ~113 s an evaluation
# on a loaded CPU). Carry .carry and .carry-data.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/*.whl >/dev/null 2>&1
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
  --no-compile-baseline --out /tmp/imported/run --fresh --no-report > "$OUT/run.log" 2>&1
cp /tmp/imported/run/results.jsonl "$OUT/imported/results.jsonl"
python3 - "$OUT/imported/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    rec = json.loads(line)
    res = rec.get("result") or {}
    print(json.dumps({"task": rec.get("task"), "wall_s": rec.get("wall_s"), "reward": res.get("reward"),
                      "reason": (res.get("reason") or "")[:200], "phases": res.get("phases")}))
PY
