"""Does the judge recover from j1's decoder crash? One process, one warm judge: the nested-JSON
candidate (every guard on), then the honest relu, then the honest relu again."""
import sys
sys.argv = [sys.argv[0], "so", "at=7"]
import runpy, os
here = os.path.dirname(os.path.abspath(__file__))
runpy.run_path(os.path.join(here, "j1_nested_json.py"), run_name="__main__")
from common import *
run("j1b_honest_after_crash", RELU_MODEL_NEW, note="honest relu in the same process, after j1")
run("j1b_honest_after_crash2", RELU_MODEL_NEW, note="again")
