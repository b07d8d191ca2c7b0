"""Shared driver for round-10 reproducers: round 9's (itself round 8's and 7's: EvalConfig(backend="cpu"),
every guard on, only cache_dir set), workspaces under /tmp/redteam-r10, results kept beside this file."""
import importlib.util, json, sys
from pathlib import Path

_here = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("round9_common", _here.parent / "issue24_round9" / "common.py")
_round9 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_round9)
_round7 = _round9._round7
_round7.ROOT = Path("/tmp/redteam-r10"); _round7.ROOT.mkdir(exist_ok=True)
RESULTS = _round7.RESULTS = _here / "results.jsonl"
globals().update({k: v for k, v in vars(_round9).items() if not k.startswith("__") and k not in ("RESULTS", "record", "ROOT")})
ROOT = _round7.ROOT

def record(**kw):
    print("RECORD", json.dumps(kw, default=str)[:4000])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(kw, default=str) + "\n")

def meminfo(key):
    for l in open("/proc/meminfo"):
        if l.startswith(key + ":"):
            return int(l.split()[1]) / 1024
