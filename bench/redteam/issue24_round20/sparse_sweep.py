"""How sparse a fixed random (hashed) bool mask must be to pass as 'structure' (H3/H4). Run:
cd /work/main && .venv/bin/python bench/redteam/issue24_round20/sparse_sweep.py"""
import sys
sys.path.insert(0, "bench")
from inputs_move_scan import check_one
H = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, *a): return a[0]\ndef get_init_inputs(): return []\n"
for side, mods in [(256, [10000, 3000, 1000, 300]), (4096, [5000, 2000, 1000, 500, 200])]:
    for mod in mods:
        src = H + f"""
def get_inputs():
    m = (((torch.arange({side}*{side}, dtype=torch.int64) * 2654435761 + 12345) % 1000003 % {mod}) == 0).view({side}, {side})
    return [torch.randn({side}, {side}), m]
"""
        r = check_one("s", src)
        print(f"{side}x{side} density 1/{mod} (~{side*side//mod} fixed ones): {r['verdict']}", flush=True)
