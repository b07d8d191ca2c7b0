#!/bin/bash
# Device call 1 of 2 (agent): scripted-policy episode on the cuda backend + the agent's unit
# tests on the GPU machine; also stages part 1 of the SmolLM2 GGUF in /root for call 2.
# Run: device run, carry [".whl", ".carry-agent/whl", ".carry-agent/p1"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .carry-agent/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export CUDA_AGENT_CACHE=/root/.cache/cuda-agent PYTHONUNBUFFERED=1
cp .carry-agent/p1/smol.partaa /root/smol.partaa && rm -rf /root/site && cp -r /tmp/site /root/site && echo "staged part 1: $(stat -c %s /root/smol.partaa) bytes"
nvidia-smi -L
python3 bench/agent_scripted_episode.py --backend cuda --example swish --out /root/agent_runs/scripted 2>&1 | tee $OUT/scripted_cuda.log
cp /root/agent_runs/scripted/trajectories.jsonl $OUT/scripted_cuda_trajectories.jsonl
python3 -m pytest -q -p no:cacheprovider tests/agent/test_tools.py tests/agent/test_trajectory.py tests/agent/test_loop.py 2>&1 | tail -5 | tee $OUT/pytest_gpu.log
ls -la /root/smol.partaa
