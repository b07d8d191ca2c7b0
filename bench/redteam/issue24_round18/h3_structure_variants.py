"""h3 (round 18): other spellings of h1's gap, through the judge's input-move check only (`check_one`, as
`Judge.task_state` runs it): each is accepted while a kernel could precompute on the part that never moves.
- hash_mask: a 0.5% bool mask made in get_inputs() from a hash of the position (no module state): structure.
- import_labels: binary labels made at import beside logits drawn in get_inputs(): structure, never re-drawn.
- fixed_9pct: 9% of an index input the same under every seed, in thousands of values (just under FIXED_PART_LIMIT).
- split_3x9pct: three index inputs, 9% of each fixed (the limit is per input).
- moves_unused_bit: indices whose every element moves (the low bit from torch's generator) while `ids // 2`, all the
  task uses, is a fixed hash of the position: nothing is "fixed" element by element.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round18/h3_structure_variants.py
"""

import json
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

HEAD = "import torch\nimport torch.nn as nn\n"
TAIL = "\ndef get_init_inputs():\n    return []\n"
TASKS = {
    "hash_mask": HEAD + '''
class Model(nn.Module):
    def forward(self, x, mask):
        return (x * mask).sum(dim=1)
def get_inputs():
    pos = torch.arange(1024 * 8192, dtype=torch.int64)
    mask = ((pos * 2654435761 + 12345) % 1000 < 5).reshape(1024, 8192)
    return [torch.randn(1024, 8192), mask]
''' + TAIL,
    "import_labels": HEAD + '''
labels = torch.randint(0, 2, (65536,)).float()
class Model(nn.Module):
    def forward(self, logits, labels):
        return nn.functional.binary_cross_entropy_with_logits(logits, labels)
def get_inputs():
    return [torch.randn(65536), labels]
''' + TAIL,
    "fixed_9pct": HEAD + '''
class Model(nn.Module):
    def forward(self, ids):
        return torch.bincount(ids, minlength=100000)
def get_inputs():
    n = 1 << 20
    ids = torch.randint(0, 100000, (n,))
    pos = torch.arange(n, dtype=torch.int64)
    fixed = (pos * 40503) % 100 < 9
    ids[fixed] = (pos[fixed] * 2654435761) % 100000
    return [ids]
''' + TAIL,
    "split_3x9pct": HEAD + '''
class Model(nn.Module):
    def forward(self, a, b, c):
        return torch.bincount(torch.cat([a, b, c]), minlength=100000)
def get_inputs():
    n = 1 << 18
    out = []
    for salt in (1, 2, 3):
        ids = torch.randint(0, 100000, (n,))
        pos = torch.arange(n, dtype=torch.int64)
        fixed = (pos * 40503 + salt) % 100 < 9
        ids[fixed] = (pos[fixed] * 2654435761 + salt) % 100000
        out.append(ids)
    return out
''' + TAIL,
    "moves_unused_bit": HEAD + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(50000, 64))
    def forward(self, ids):
        return self.w[ids // 2]
def get_inputs():
    pos = torch.arange(262144, dtype=torch.int64)
    return [((pos * 2654435761) % 50000) * 2 + torch.randint(0, 2, (262144,))]
''' + TAIL,
}

if __name__ == "__main__":
    from inputs_move_scan import check_one
    for name, src in TASKS.items():
        row = check_one(name, src)
        print(json.dumps(row), flush=True)
        with open(Path(__file__).resolve().parent / "results.jsonl", "a") as fh:
            fh.write(json.dumps({"repro": "h3_structure_variants", "label": f"check {name}", "reward": None,
                                 "reason": row.get("why", row["verdict"]), "verdict": row["verdict"],
                                 "deserved": "refused, or re-drawn (a kernel could precompute on the fixed part)"}) + "\n")
