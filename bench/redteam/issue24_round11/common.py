"""Shared driver for round-11 reproducers: round 10's (chaining to 9, 8, 7: EvalConfig(backend="cpu"), every
guard on, only cache_dir set), workspaces under /tmp/redteam-r11, results kept beside this file."""
import importlib.util, json, sys
from pathlib import Path

_here = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("round10_common", _here.parent / "issue24_round10" / "common.py")
_round10 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_round10)
_round7 = _round10._round7
_round7.ROOT = Path("/tmp/redteam-r11"); _round7.ROOT.mkdir(exist_ok=True)
RESULTS = _round7.RESULTS = _here / "results.jsonl"
globals().update({k: v for k, v in vars(_round10).items() if not k.startswith("__") and k not in ("RESULTS", "record", "ROOT")})
ROOT = _round7.ROOT

def record(**kw):
    print("RECORD", json.dumps(kw, default=str)[:4000])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(kw, default=str) + "\n")
