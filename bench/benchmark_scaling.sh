#!/usr/bin/env bash
# 1 -> 2 GPU scaling of the benchmark's local pool (docs/benchmark.md), one device-tool call on
# nvidia-h200-x2 carrying `.whl`: the bundled examples with their CUDA solutions (default
# evaluation: builds on the CPU pool, eager + torch.compile baselines, candidate timing) run
# once on GPU 0 alone and once on GPUs 0,1, each with an empty environment cache so both do the
# same work. Efficiency = T(1 GPU) / (2 * T(2 GPUs)). Writes $OUT/scaling.json and the records.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; RUNS=/tmp/scaling; rm -rf "$RUNS"; mkdir -p "$OUT" "$RUNS"
ORDER=${ORDER:-0 0,1}
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
: > "$OUT/walls.txt"
for gpus in $ORDER; do
  name=gpus_${gpus//,/_}
  echo "== $(date -u +%T) $name" | tee -a "$OUT/log.txt"
  t0=$(date +%s.%N)
  CUDA_AGENT_CACHE=$RUNS/cache_$name timeout "${RUN_S:-260}" python3 -m cuda_agent bench run examples \
    --solutions examples --backend cuda --gpus "$gpus" --out "$RUNS/$name" --no-report 2>&1 | tee -a "$OUT/log.txt"
  rc=${PIPESTATUS[0]}
  echo "$name $rc $(python3 -c "import time; print(round(time.time() - $t0, 2))")" | tee -a "$OUT/walls.txt"
done
python3 - "$OUT" "$RUNS" <<'PY'
import json, sys, pathlib
out, runs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
walls = {n: (int(rc), float(w)) for n, rc, w in (l.split() for l in (out / "walls.txt").read_text().splitlines())}
res = {}
for name, (rc, wall) in walls.items():
    recs = [json.loads(l) for l in (runs / name / "results.jsonl").read_text().splitlines() if l.strip()] \
        if (runs / name / "results.jsonl").exists() else []
    res[name] = {"exit": rc, "wall_s": wall, "tasks": len(recs),
                 "correct": sum(bool((r.get("result") or {}).get("correct")) for r in recs)}
one, two = res.get("gpus_0"), res.get("gpus_0_1")
if one and two and one["tasks"] == two["tasks"] and two["wall_s"] > 0:
    res["speedup"] = round(one["wall_s"] / two["wall_s"], 3)
    res["efficiency"] = round(one["wall_s"] / (2 * two["wall_s"]), 3)
(out / "scaling.json").write_text(json.dumps(res, indent=1))
print(json.dumps(res, indent=1))
PY
tar czf "$OUT/scaling_runs.tgz" -C "$RUNS" --exclude='cache_*' --exclude=workspaces .
