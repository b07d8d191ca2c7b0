"""A model_new.py whose runtime code holds a 1000-term sum (`k = 1+1+...+1`): check_model_new
raises RecursionError (ast visitor / construction). What does evaluate() make of it?
Arg: number of terms (default 1000)."""
import sys
from common import *
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
MODEL = RELU_MODEL_NEW.replace("    def forward(self, x):\n", "    def forward(self, x):\n        k = " + "+".join(["1"] * n) + "\n")
try:
    run(f"f1_recursion_{n}", MODEL, note=f"terms={n}")
except BaseException as e:
    import traceback; tb = traceback.format_exc()
    print("EVALUATE RAISED", type(e).__name__, tb[-1500:])
    with open(RESULTS, "a") as f:
        f.write(json.dumps(dict(name=f"f1_recursion_{n}", note=f"terms={n}", reward=None, raised=type(e).__name__, tb=tb[-1500:])) + "\n")
