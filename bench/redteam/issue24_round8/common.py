"""Shared driver for round-8 reproducers: round 7's (`../issue24_round7/common.py`: default
EvalConfig(backend="cpu") with every guard on, only cache_dir set), its results kept beside this
file, plus what clients left on the host."""
import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("round7_common", Path(__file__).resolve().parents[1] / "issue24_round7" / "common.py")
_round7 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_round7)
_round7.RESULTS = Path(__file__).resolve().parent / "results.jsonl"
globals().update({k: v for k, v in vars(_round7).items() if not k.startswith("__")})

# ---- round 7b additions: host leftovers seen from outside ----
import glob, subprocess as _sp
def leftovers():
    """What candidate clients left on the host: pids cgroups, scratch dirs, logs, processes."""
    groups = sorted(glob.glob("/sys/fs/cgroup/pids/cuda-agent-*"))
    procs = _sp.run(["bash", "-c", "ps -eo pid,ppid,stat,etime,args | grep -E 'cuda_agent|candidate' | grep -v grep"],
                    capture_output=True, text=True).stdout.strip().splitlines()
    return dict(cgroups=[(g.split("/")[-1], open(g + "/pids.current").read().strip()) for g in groups],
                scratch=len(glob.glob("/tmp/cuda-agent-scratch-*")), logs=len(glob.glob("/tmp/cuda-agent-candidate-*")),
                procs=procs)
def record(**kw):
    print(json.dumps(kw, default=str)[:4000])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(kw, default=str) + "\n")
