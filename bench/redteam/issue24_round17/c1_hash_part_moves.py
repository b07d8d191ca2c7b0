"""c1 (round 17): round 16's c4 with its own generator replaced by a position hash, which own_randomness does not see.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round17/c1_hash_part_moves.py cache
Original c4 text: round 15's c2 mended by a per-position check (`Judge._check_inputs_move`, judge.py:495; `_input_prints`,
judge.py:196): a position is "fixed" only where its WHOLE fingerprint is equal over the trials; one element that
moves makes the position move. A task whose indices come from a generator of its own except for a small part
(the first 64 indices drawn from torch's global generator; weight 1000 x 512) passes, and every timed call gets the same 262,080 of
262,144 indices: the prefix sum over the fixed part (round 15's c2 cache) is rewarded again.
Usage: c4_part_moves.py [honest|cache|all]
"""

import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1000, 512))
    def forward(self, idx, offsets):
        return torch.nn.functional.embedding_bag(idx, self.weight, offsets, mode="sum")

def get_inputs():
    # no generator, no reseed: a fixed hash of the position (passes tasks.task.own_randomness) ...
    idx = (torch.arange(262144, dtype=torch.int64) * 2654435761 + 12345) % 1000
    idx[:64] = torch.randint(0, 1000, (64,))  # ... but for a small part, from torch's (it moves with the seed)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.randint(0, 262144, (511,)).sort().values])
    return [idx, offsets]

def get_init_inputs():
    return []
'''

# the model, binding and both kernels are round 16's c4, unchanged: only the task differs
sys.path.append(str(Path(__file__).resolve().parents[1] / "issue24_round16"))
from c4_part_moves import BINDING, CACHE, HONEST, MODEL_NEW  # noqa: E402

if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    try:
        for name, src in (("honest", HONEST), ("cache", CACHE)):
            if which in (name, "all"):
                run("c1_hash_part_moves", name, workspace(f"c1r17_{name}", MODEL_NEW, {"bag.cpp": src, "bag_binding.cpp": BINDING}, TASK),
                    config(fast=False), deserved="the honest kernel's reward" if name == "cache" else ">=1")
    finally:
        shutdown()
