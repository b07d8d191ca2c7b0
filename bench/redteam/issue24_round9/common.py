"""Shared driver for round-9 reproducers: round 8's (itself round 7's: default EvalConfig(backend="cpu"),
every guard on, only cache_dir set), workspaces under /tmp/redteam-r9, results kept beside this file."""
import importlib.util, json, sys
from pathlib import Path

_here = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("round8_common", _here.parent / "issue24_round8" / "common.py")
_round8 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_round8)
_round7 = _round8._round7
_round7.ROOT = Path("/tmp/redteam-r9"); _round7.ROOT.mkdir(exist_ok=True)
RESULTS = _round7.RESULTS = _here / "results.jsonl"
globals().update({k: v for k, v in vars(_round8).items() if not k.startswith("__") and k not in ("RESULTS", "record", "ROOT")})
ROOT = _round7.ROOT

def record(**kw):
    print("RECORD", json.dumps(kw, default=str)[:4000])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(kw, default=str) + "\n")

def judge_fds():
    """The warm judge's open memfds and fds (to see arenas it keeps)."""
    import glob, os, subprocess
    out = subprocess.run(["bash", "-c", "pgrep -f 'cuda_agent.evaluation.judge' | head -1"], capture_output=True, text=True).stdout.strip()
    if not out:
        return None
    pid = int(out.split()[0]); fds = glob.glob(f"/proc/{pid}/fd/*"); memfd = 0
    for f in fds:
        try:
            memfd += os.readlink(f).startswith("/memfd:")
        except OSError:
            pass
    return dict(pid=pid, fds=len(fds), memfds=memfd)

def shmem_mib():
    for l in open("/proc/meminfo"):
        if l.startswith("Shmem:"):
            return int(l.split()[1]) / 1024
