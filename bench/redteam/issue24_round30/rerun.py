"""Rerun an earlier round's reproducer with this round's driver (results land in this folder's results.jsonl).
Usage: python rerun.py ../issue24_round15/p2_one_preadv.py ARGS..."""
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402,F401  (preloaded: the old script's `import common` gets this one)

script = Path(sys.argv[1]).resolve()
sys.argv = [str(script)] + sys.argv[2:]
sys.path.insert(0, str(script.parent))
runpy.run_path(str(script), run_name="__main__")
