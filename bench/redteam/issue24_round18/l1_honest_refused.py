"""l1 (round 18): honest tasks of the kinds KernelBench / Ops-6K / PyG hold, run through the judge's input-move check
exactly as `Judge.task_state` runs it (bench/inputs_move_scan.check_one: the module, then `_ImportedAgain` where that
moves them), then the refused ones evaluated in full with an honest candidate (torch ops in forward, so the static
checks and the dispatcher guard are off: the refusal comes at load, before any candidate code matters).
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round18/l1_honest_refused.py [check|eval|all] [name...]
"""

import json
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from common import config, run, shutdown, workspace  # noqa: E402

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport math\n"

TASKS = {
    # PyG-style message passing: every node sends to k random nodes; edge_index's source row is arange
    # repeated (50% of its elements the same under every seed, thousands of values)
    "edge_index_knn": (HEAD + '''
N, D, K = 4096, 64, 8
class Model(nn.Module):
    def forward(self, x, edge_index):
        src, dst = edge_index
        return torch.zeros_like(x).index_add_(0, dst, x[src])
def get_inputs():
    src = torch.arange(N).repeat_interleave(K)
    dst = torch.randint(0, N, (N * K,))
    return [torch.randn(N, D), torch.stack([src, dst])]
def get_init_inputs():
    return []
''', "x.new_zeros(x.shape).index_add_(0, edge_index[1], x[edge_index[0]])"),
    # CoordConv (Liu et al. 2018): an image with two coordinate channels appended (2 of 5 channels fixed)
    "coordconv": (HEAD + '''
B, C, H, W = 16, 3, 64, 64
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(C + 2, 16, 3, padding=1)
    def forward(self, x):
        return self.conv(x)
def get_inputs():
    img = torch.randn(B, C, H, W)
    yy = torch.linspace(-1, 1, H).view(1, 1, H, 1).expand(B, 1, H, W)
    xx = torch.linspace(-1, 1, W).view(1, 1, 1, W).expand(B, 1, H, W)
    return [torch.cat([img, yy, xx], dim=1)]
def get_init_inputs():
    return []
''', None),
    # COO sparse matrix with k nonzeros per row: the row indices are arange repeated
    "coo_rows": (HEAD + '''
N, K, D = 2048, 16, 64
class Model(nn.Module):
    def forward(self, indices, values, dense):
        a = torch.sparse_coo_tensor(indices, values, (N, N))
        return torch.sparse.mm(a, dense)
def get_inputs():
    rows = torch.arange(N).repeat_interleave(K)
    cols = torch.randint(0, N, (N * K,))
    return [torch.stack([rows, cols]), torch.randn(N * K), torch.randn(N, D)]
def get_init_inputs():
    return []
''', None),
    # CLIP-style contrastive loss: the labels are arange(batch) (512 > 256 elements, every one fixed)
    "clip_labels": (HEAD + '''
B, D = 512, 256
class Model(nn.Module):
    def forward(self, img, txt, labels):
        logits = F.normalize(img, dim=-1) @ F.normalize(txt, dim=-1).t() * 14.3
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
def get_inputs():
    return [torch.randn(B, D), torch.randn(B, D), torch.arange(B)]
def get_init_inputs():
    return []
''', None),
    # rotary embedding with its cos / sin tables passed as inputs (LLaMA-style kernels)
    "rope_tables": (HEAD + '''
B, Hh, L, Dh = 4, 8, 256, 64
class Model(nn.Module):
    def forward(self, x, cos, sin):
        x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin
def get_inputs():
    inv = 1.0 / (10000 ** (torch.arange(0, Dh, 2).float() / Dh))
    f = torch.outer(torch.arange(L).float(), inv)
    emb = torch.cat([f, f], dim=-1)
    return [torch.randn(B, Hh, L, Dh), emb.cos(), emb.sin()]
def get_init_inputs():
    return []
''', None),
    # PyG batch vector: which graph each node belongs to (sorted, many values), global mean pool
    "pyg_batch_vector": (HEAD + '''
G, n, D = 64, 32, 128
class Model(nn.Module):
    def forward(self, x, batch):
        s = torch.zeros(G, D).index_add_(0, batch, x)
        return s / torch.bincount(batch, minlength=G).unsqueeze(1)
def get_inputs():
    return [torch.randn(G * n, D), torch.arange(G).repeat_interleave(n)]
def get_init_inputs():
    return []
''', None),
    # Ops-6K style: inputs made at import, with a module-level seed for reproducibility
    "import_seeded": (HEAD + '''
torch.manual_seed(42)
x = torch.randn(64, 4096)
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
def get_inputs():
    return [x]
def get_init_inputs():
    return []
''', None),
    # Ops-6K style: inputs made at import beside a custom op registered at import (a source that cannot run twice)
    "import_custom_op": (HEAD + '''
@torch.library.custom_op("rt18::scaled_gelu", mutates_args=())
def scaled_gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x) * 1.5
@scaled_gelu.register_fake
def _(x):
    return torch.empty_like(x)
x = torch.randn(64, 4096)
class Model(nn.Module):
    def forward(self, x):
        return scaled_gelu(x)
def get_inputs():
    return [x]
def get_init_inputs():
    return []
''', None),
}

CANDIDATES = {  # honest ModelNew for the full evaluation (torch ops; forward as the reference's)
    "edge_index_knn": '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x, edge_index):
        src, dst = edge_index
        return torch.zeros_like(x).index_add_(0, dst, x[src])
''',
    "coordconv": '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(5, 16, 3, padding=1)
    def forward(self, x):
        return self.conv(x)
''',
    "import_seeded": '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
''',
}


def check(names):
    from inputs_move_scan import check_one
    for name in names:
        row = check_one(name, TASKS[name][0])
        print(json.dumps(row), flush=True)
        with open(Path(__file__).resolve().parent / "results.jsonl", "a") as fh:
            fh.write(json.dumps({"repro": "l1_honest_refused", "label": f"check {name}", "reward": None,
                                 "reason": row.get("why", row["verdict"]), "verdict": row["verdict"],
                                 "deserved": "ok (an honest task)"}) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    mode = args[0] if args and args[0] in ("check", "eval", "all") else "all"
    names = [a for a in args if a in TASKS] or list(TASKS)
    from common import config as _c  # noqa: F401
    from cuda_agent.evaluation import GuardConfig
    if mode in ("check", "all"):
        check(names)
    if mode in ("eval", "all"):
        try:
            for name in names:
                if name in CANDIDATES:
                    cfg = config(fast=True, guards=GuardConfig(static_checks=False, symbols=False, torch_compute=False))
                    run("l1_honest_refused", f"eval {name}", workspace(f"l1r18_{name}", CANDIDATES[name], None, TASKS[name][0]),
                        cfg, deserved=">=1 (an honest task, an honest candidate)")
        finally:
            shutdown()
