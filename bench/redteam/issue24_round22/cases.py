"""Round 22's load checks (the judge's real `Judge.task_state`, in-process, no client; `load.py`).
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round22/cases.py [substring]"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import load  # noqa: E402

HEAD = "import torch\nimport torch.nn as nn\n"
TAIL = "\ndef get_init_inputs():\n    return []\n"

CASES = {
    # a declared input with no fixed part at all: accepted? (then a declaration turns its scaling off wholesale)
    "L1 declared, nothing fixed": HEAD + '''
class Model(nn.Module):
    def forward(self, x):
        return torch.exp(2 * torch.sin(x)).mean(dim=1)
def get_inputs():
    return [torch.rand(64, 4096)]
FIXED_INPUTS = [0]
''' + TAIL,
    # g1's task (12.5% register columns, declared)
    "L2 g1 declared": (Path(__file__).resolve().parent / "g1_declared_prefix.py").read_text().split("TASK = '''")[1].split("'''")[0],
    # the same undeclared: refused as it should be (names the declaration)
    "L3 g1 undeclared": (Path(__file__).resolve().parent / "g1_declared_prefix.py").read_text().split("TASK = '''")[1].split("'''")[0].replace("FIXED_INPUTS = [0]", ""),
    # a declared input with only a 1% fixed part (a single register column block), the rest i.i.d.
    "L4 declared, 1% fixed": HEAD + '''
REG = torch.sin(torch.arange(40, dtype=torch.float32) ** 1.5)
class Model(nn.Module):
    def forward(self, x):
        return torch.exp(2 * torch.sin(x)).mean(dim=1)
def get_inputs():
    return [torch.cat([torch.rand(64, 4056), REG.expand(64, 40)], dim=1)]
FIXED_INPUTS = [0]
''' + TAIL,
}

if __name__ == "__main__":
    want = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, src in CASES.items():
        if want in name:
            row = load(name, src)
            print(json.dumps(row), flush=True)
            with open(Path(__file__).resolve().parent / "results.jsonl", "a") as fh:
                fh.write(json.dumps({"kind": "load", **row}) + "\n")
