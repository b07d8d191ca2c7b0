"""Review 2026-11-28: the real Judge.task_state (CPU, in-process, via round 21's load.py) on unusual outputs and
honest tasks. Run: cd /work/main && .venv/bin/python bench/redteam/review_2026-11-28/cases.py [substring]"""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_any import load  # noqa: E402

H = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
def T(model_fwd, inputs, fixed=None, init="", extra=""):
    s = H + extra + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" + (init or "        pass\n")
    s += "    def forward(self, *a):\n" + model_fwd + "def get_init_inputs(): return []\n"
    s += "def get_inputs():\n" + inputs
    if fixed is not None:
        s += f"FIXED_INPUTS = {fixed}\n"
    return s

MASK = "    m = torch.zeros(16, 128, dtype=torch.bool); m[:, 96:] = True\n"
CASES = {
  # --- unusual outputs, with a declared mask so the output check runs
  "X1 0-d output": T("        x, m = a; return (x.masked_fill(m, 0)).sum()\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X2 complex output": T("        x, m = a; return torch.fft.rfft(x.masked_fill(m, 0), dim=-1)\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X3 bool output": T("        x, m = a; return (x > 0) | m\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X4 nested dict/tuple": T("        x, m = a; y = x.masked_fill(m, 0); return {'a': (y, [y * 2]), 'b': {'c': y.sum(-1)}}\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X5 shape changes (nonzero)": T("        x, m = a; return torch.nonzero((x > 0) & ~m)\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X6 non-tensor output": T("        x, m = a; return float((x.masked_fill(m, 0)).sum())\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X7 output returns a parameter (requires_grad)": T("        x, m = a; return x.masked_fill(m, 0) @ self.w, self.w\n", MASK + "    return [torch.randn(16, 128), m]\n", [1],
        init="        self.w = nn.Parameter(torch.randn(128, 128))\n"),
  "X8 number of outputs varies": T("        x, m = a; return tuple(x[:int(x[0,0].abs()*3)+1])\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X9 int8 / uint8 output with fixed part": T("        x, m = a; return (x*50).clamp(-100,100).to(torch.int8).masked_fill(m, 7)\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X10 degenerate KB level2/66-like: softmax over dim of size 1 (all ones)": T("        x, = a; y = self.l(x).mean(1, keepdim=True); return torch.softmax(y, 1)\n",
        "    return [torch.randn(64, 128)]\n", None, init="        self.l = nn.Linear(128, 64)\n"),
  "X11 uint64 output": T("        x, m = a; return torch.where(m, torch.tensor(5), (x*1000).long().abs()).to(torch.uint64)\n", MASK + "    return [torch.randn(16, 128), m]\n", [1]),
  "X12 bf16 output with a fixed table part (NCL)": T("        x, m = a; return (x.masked_fill(m, 0) + self.b).bfloat16()\n", MASK + "    return [torch.randn(16, 128), m]\n", [1],
        init="        self.b = nn.Parameter(torch.randn(16, 1))\n"),
  # --- honest tasks
  "H1 Conv1d (B,C,L) over a declared padding mask: padded positions = bias[c]": T(
        "        x, m = a; return self.c(x.masked_fill(m[:, None, :], 0.0))\n",
        "    m = torch.zeros(8, 256, dtype=torch.bool); m[:, 192:] = True\n    return [torch.randn(8, 64, 256), m]\n", [1],
        init="        self.c = nn.Conv1d(64, 64, 3, padding=1)\n"),
  "H2 same, undeclared (mask passes as structure)": T(
        "        x, m = a; return self.c(x.masked_fill(m[:, None, :], 0.0))\n",
        "    m = torch.zeros(8, 256, dtype=torch.bool); m[:, 192:] = True\n    return [torch.randn(8, 64, 256), m]\n", None,
        init="        self.c = nn.Conv1d(64, 64, 3, padding=1)\n"),
  "H3 Conv2d NCHW with a fixed hole mask (inpainting), undeclared": T(
        "        x, m = a; return self.c(x * m)\n",
        "    m = torch.ones(1, 1, 64, 64); m[..., 16:48, 16:48] = 0\n    return [torch.randn(4, 16, 64, 64), m]\n", None,
        init="        self.c = nn.Conv2d(16, 32, 3, padding=1)\n"),
  "H4 concat a declared coordinate/PE input to features (AddCoords)": T(
        "        x, pe = a; return torch.cat([x, pe.expand(x.shape[0], -1, -1)], -1)\n",
        "    pe = torch.sin(torch.arange(128)[:, None] / (10000 ** (torch.arange(32)[None] / 32)))\n    return [torch.randn(8, 128, 96), pe]\n", [1]),
  "H5 token embedding + sinusoidal PE, declared padding at fixed positions": T(
        "        ids, = a; return self.e(ids) + self.pe\n",
        "    ids = torch.randint(1, 1000, (16, 128)); ids[:, 100:] = 0\n    return [ids]\n", None,
        init="        self.e = nn.Embedding(1000, 64, padding_idx=0)\n        self.register_buffer('pe', torch.sin(torch.arange(128)[:, None] / (10000 ** (torch.arange(64)[None] / 64))))\n"),
  "H6 transpose output (B,D,L) of Linear over declared padding": T(
        "        x, m = a; return self.l(x.masked_fill(m[..., None], 0.0)).transpose(1, 2)\n",
        MASK + "    return [torch.randn(16, 128, 64), m]\n", [1], init="        self.l = nn.Linear(64, 64)\n"),
  "H7 GRU with fixed zero h0 input + fixed padding via lengths": T(
        "        x, h0 = a; out, h = self.g(x, h0); return out, h\n",
        "    return [torch.randn(8, 64, 32), torch.zeros(1, 8, 48)]\n", None, init="        self.g = nn.GRU(32, 48, batch_first=True)\n"),
}

if __name__ == "__main__":
    want = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, src in CASES.items():
        if want in name:
            row = load(name, src)
            row.pop("tb", None) if row.get("verdict") != "CRASH" else None
            print(json.dumps(row)[:700], flush=True)
