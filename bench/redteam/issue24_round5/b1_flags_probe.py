"""What `// @flags:` accepts (each flag alone on the relu kernel; the evaluation stops at the first
failure, so a refused flag costs ~1 s). FLAGS... on the command line, one evaluation per flag."""
import sys
from common import *
for flag in sys.argv[1:]:
    run("b1_flags", RELU_MODEL_NEW, {"relu.cpp": f"// @flags: {flag}\n" + RELU_KERNEL, "relu_binding.cpp": RELU_BINDING},
        note=f"flag {flag}", timing=TimingConfig(budget_s=0.2, min_trials=3))
