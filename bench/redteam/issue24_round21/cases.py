"""Round 21: the task load (`Judge.task_state`, real, in-process, CPU) on declared and undeclared tasks.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round21/cases.py [name-substring]
Each line: case, expected, verdict (ok / refused / CRASH), constants, whether the source runs again per draw."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import HERE, load  # noqa: E402

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
ID = "class Model(nn.Module):\n    def forward(self, *a): return a[0] * 2\ndef get_init_inputs(): return []\n"


def task(body: str, model: str = ID) -> str:
    return HEAD + model + body


CASES = {
    # ---- declarations that could break the judge: a clear task error (refused), never a crash
    "D1 duplicate [1, 1]": ("ok", task("def get_inputs(): return [torch.randn(64, 64), torch.tril(torch.ones(64, 64))]\nFIXED_INPUTS = [1, 1]\n")),
    "D2 huge list range(10**6)": ("refused", task("def get_inputs(): return [torch.randn(64, 64), torch.tril(torch.ones(64, 64))]\nFIXED_INPUTS = list(range(10**6))\n")),
    "D3 None": ("refused", task("def get_inputs(): return [torch.randn(64, 64)]\nFIXED_INPUTS = None\n")),
    "D4 numpy int [np.int64(1)]": ("ok?", "import numpy as np\n" + task("def get_inputs(): return [torch.randn(64, 64), torch.tril(torch.ones(64, 64))]\nFIXED_INPUTS = [np.int64(1)]\n")),
    "D5 tuple (1,)": ("ok", task("def get_inputs(): return [torch.randn(64, 64), torch.tril(torch.ones(64, 64))]\nFIXED_INPUTS = (1,)\n")),
    "D6 a non-tensor input declared": ("refused", task("def get_inputs(): return [torch.randn(64, 64), 3]\nFIXED_INPUTS = [1]\n")),
    "D7 an empty tensor declared": ("ok", task("def get_inputs(): return [torch.randn(64, 64), torch.empty(0)]\nFIXED_INPUTS = [1]\n")),
    "D8 huge int 2**70": ("refused", task("def get_inputs(): return [torch.randn(64, 64)]\nFIXED_INPUTS = [2**70]\n")),
    "D9 module __getattr__ that raises (FIXED_INPUTS looked up)": ("refused", task("def get_inputs(): return [torch.randn(64, 64)]\ndef __getattr__(name):\n    raise RuntimeError('no ' + name)\n")),
    "D10 declared a list-of-tensors input": ("refused", task("def get_inputs(): return [torch.randn(64, 64), [torch.ones(3), torch.ones(3)]]\nFIXED_INPUTS = [1]\n")),
    "D11 every input declared, all fixed": ("refused", task("def get_inputs(): return [torch.tril(torch.ones(64, 64))]\nFIXED_INPUTS = [0]\n")),
    "D12 declared int input that moves (random lengths)": ("ok", task("def get_inputs(): return [torch.randn(8, 64), torch.randint(1, 64, (8,))]\nFIXED_INPUTS = [1]\n")),
    # ---- honest declared tasks whose outputs keep a fill that is not 0/-inf: refused?
    "O1 Linear over padded tokens (declared pad mask): padded rows = bias": ("ok (honest)", task(
        "def get_inputs():\n    m = torch.zeros(16, 128, dtype=torch.bool); m[:, 96:] = True\n    return [torch.randn(16, 128, 64), m]\nFIXED_INPUTS = [1]\n",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__(); self.lin = nn.Linear(64, 64)\n"
        "    def forward(self, x, pad):\n        return self.lin(x.masked_fill(pad[..., None], 0.0))\ndef get_init_inputs(): return []\n")),
    "O2 GCN-style scatter_add + bias over a declared graph (isolated nodes = bias)": ("ok (honest)", task(
        "N, E = 4096, 4096\nEI = torch.stack([(torch.arange(E) * 7919) % N, (torch.arange(E) * 104729 + 17) % N // 2])\n"
        "def get_inputs(): return [torch.randn(N, 32), EI]\nFIXED_INPUTS = [1]\n",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__(); self.b = nn.Parameter(torch.randn(32))\n"
        "    def forward(self, x, ei):\n        out = torch.zeros_like(x).index_add_(0, ei[1], x[ei[0]])\n        return out + self.b\ndef get_init_inputs(): return []\n")),
    "O3 masked fill with a learned mask token (declared mask, BERT-style)": ("ok (honest)", task(
        "def get_inputs():\n    m = torch.zeros(32, 256, dtype=torch.bool); m[:, ::7] = True\n    return [torch.randn(32, 256, 64), m]\nFIXED_INPUTS = [1]\n",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__(); self.tok = nn.Parameter(torch.randn(64))\n"
        "    def forward(self, x, m):\n        return torch.where(m[..., None], self.tok, x)\ndef get_init_inputs(): return []\n")),
    "O4 same as O1, NOT declared (padding mask by shape)": ("ok", task(
        "def get_inputs():\n    m = torch.zeros(16, 128, dtype=torch.bool); m[:, 96:] = True\n    return [torch.randn(16, 128, 64), m]\n",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__(); self.lin = nn.Linear(64, 64)\n"
        "    def forward(self, x, pad):\n        return self.lin(x.masked_fill(pad[..., None], 0.0))\ndef get_init_inputs(): return []\n")),
    # ---- undeclared tasks whose output depends on structure inputs only: no output check at all
    "U1 HF rotary embedding (x, position_ids): cos/sin fixed, undeclared": ("refused? (output fixed)", task(
        "B, S, D = 8, 2048, 128\ndef get_inputs(): return [torch.randn(B, S, D), torch.arange(S).expand(B, S).contiguous()]\n",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer('inv_freq', 1.0 / (10000 ** (torch.arange(0, 128, 2).float() / 128)))\n"
        "    def forward(self, x, pos):\n        f = (self.inv_freq[None, :, None] @ pos[:, None, :].float()).transpose(1, 2)\n"
        "        e = torch.cat((f, f), dim=-1)\n        return e.cos().to(x.dtype), e.sin().to(x.dtype)\ndef get_init_inputs(): return []\n")),
    "U2 same rotary task, DECLARED [1]": ("refused (output fixed)", task(
        "B, S, D = 8, 2048, 128\ndef get_inputs(): return [torch.randn(B, S, D), torch.arange(S).expand(B, S).contiguous()]\nFIXED_INPUTS = [1]\n",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer('inv_freq', 1.0 / (10000 ** (torch.arange(0, 128, 2).float() / 128)))\n"
        "    def forward(self, x, pos):\n        f = (self.inv_freq[None, :, None] @ pos[:, None, :].float()).transpose(1, 2)\n"
        "        e = torch.cat((f, f), dim=-1)\n        return e.cos().to(x.dtype), e.sin().to(x.dtype)\ndef get_init_inputs(): return []\n")),
    "U3 output independent of x's values (ones_like(x).cumsum), undeclared": ("refused? (output fixed)", task(
        "def get_inputs(): return [torch.randn(1024, 1024)]\n",
        "class Model(nn.Module):\n    def forward(self, x): return torch.ones_like(x).cumsum(-1).sqrt()\ndef get_init_inputs(): return []\n")),
    # ---- declared inputs vs _ImportedAgain and scaling
    "I1 graph made at import (declared) beside x made at import": ("ok, graph constant", task(
        "N, E = 4096, 16384\nx0 = torch.randn(N, 32)\nEI = torch.randint(0, N, (2, E))\ndef get_inputs(): return [x0, EI]\nFIXED_INPUTS = [1]\n")),
    "I2 graph made at import (declared) beside x from get_inputs": ("ok, graph constant", task(
        "N, E = 4096, 16384\nEI = torch.randint(0, N, (2, E))\ndef get_inputs(): return [torch.randn(N, 32), EI]\nFIXED_INPUTS = [1]\n")),
    "F1 ALiBi bias + random key padding in one float input (declared, fixed in part)": ("ok, ALiBi part kept unscaled", task(
        "B, H, S = 4, 8, 256\nSL = (2.0 ** (-8.0 * torch.arange(1, H + 1) / H))[:, None, None]\n"
        "def get_inputs():\n    ln = torch.randint(S // 2, S + 1, (B,))\n    i = torch.arange(S)\n"
        "    bias = -(SL * (i[None, :, None] - i[None, None, :]).abs().float()).expand(B, H, S, S).clone()\n"
        "    bias.masked_fill_((i[None, :] >= ln[:, None])[:, None, None, :], float('-inf'))\n"
        "    return [torch.randn(B, H, S, 64), bias]\nFIXED_INPUTS = [1]\n")),
}


def main(which: str = "") -> None:
    for name, (expect, src) in CASES.items():
        if which and which not in name:
            continue
        row = load(name, src)
        row["expected"] = expect
        print(json.dumps(row), flush=True)
        with open(HERE / "results.jsonl", "a") as fh:
            fh.write(json.dumps({"kind": "load", **row}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
