#!/bin/bash
# Device call 2 of 2 (agent): assemble the SmolLM2 GGUF from part 1 (left in /root by call 1)
# and part 2 (carried now), then run the agent loop with the local model on the cuda backend.
# Run right after call 1: device run, carry [".whl", ".carry-agent/whl", ".carry-agent/p2"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .carry-agent/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export CUDA_AGENT_CACHE=/root/.cache/cuda-agent PYTHONUNBUFFERED=1
# environment check: does the evaluation worker see the GPU? (call 1 saw "backend cuda is not available")
python3 -c "import torch; print('parent sees cuda:', torch.cuda.is_available(), torch.version.cuda)"
timeout 120 python3 -m cuda_agent examples --backend cuda --only swish --no-compile-baseline 2>&1 | tail -15 | tee $OUT/env_check.log
if [ ! -f /root/smol.partaa ]; then
  echo "PART 1 MISSING: /root/smol.partaa is gone (the machine was recycled between the two calls)."
  echo "The GGUF cannot be assembled in this call; the SmolLM2 GPU run did not happen."
  exit 3
fi
cat /root/smol.partaa .carry-agent/p2/smol.partab > /root/SmolLM2-135M-Instruct.Q4_1.gguf
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  /root/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c || exit 4
nvidia-smi -L
time python3 -m cuda_agent optimize swish --backend cuda --policy local --model /root/SmolLM2-135M-Instruct.Q4_1.gguf \
  --tool-format text --max-turns 6 --out /root/agent_runs/smol 2>&1 | tee $OUT/smollm2_cuda.log
cp /root/agent_runs/smol/trajectories.jsonl $OUT/smollm2_cuda_trajectories.jsonl
python3 - <<'PY'
import json
from cuda_agent.agent import load_trajectories
t = load_trajectories("/root/agent_runs/smol/trajectories.jsonl")[-1]
print(json.dumps(t.summary(), indent=1))
for c in t.tool_calls: print("call", c.turn, c.name, c.ok, (c.error or "")[:120])
for tr in t.turns: print("turn", tr.index, round(tr.model_seconds, 2), tr.usage.prompt_tokens, tr.usage.completion_tokens, tr.finish_reason)
PY
