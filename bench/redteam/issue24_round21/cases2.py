"""Round 21, focus 2: honest KernelBench-style tasks with masks, labels, positions, graph edges, paddings, declared
nothing: refused? does the message name the way out (FIXED_INPUTS)? and does following it work?
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round21/cases2.py [name-substring]"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import HERE, load  # noqa: E402
from cases import task  # noqa: E402

N = 2048
BODIES = {
    "labels arange % C (cross entropy targets)": "def get_inputs(): return [torch.randn(8192, 100), torch.arange(8192) % 100]\n",
    "ALiBi distances -|i-j| (float)": "def get_inputs():\n    i = torch.arange(512)\n    return [torch.randn(8, 512, 512), -(i[:, None] - i[None]).abs().float()]\n",
    "ring graph edge_index": f"def get_inputs(): return [torch.randn({N}, 16), torch.stack([torch.arange({N}), (torch.arange({N}) + 1) % {N}])]\n",
    "fixed benchmark graph from a module-level generator (E=N)": f"G = torch.Generator().manual_seed(0)\nEI = torch.randint(0, {N}, (2, {N}), generator=G)\ndef get_inputs(): return [torch.randn({N}, 16), EI]\n",
    "position ids right-padded to random lengths": "def get_inputs():\n    ln = torch.randint(256, 513, (32,))\n    ids = torch.arange(512).expand(32, 512).clone()\n    ids[ids >= ln[:, None]] = 0\n    return [torch.randn(32, 512, 64), ids]\n",
    "position ids left-padded (HF generate: cumsum(mask)-1, clamp)": "def get_inputs():\n    ln = torch.randint(256, 513, (32,))\n    m = (torch.arange(512)[None] >= (512 - ln)[:, None]).long()\n    return [torch.randn(32, 512, 64), (m.cumsum(-1) - 1).clamp(min=0)]\n",
    "identity affine_grid (N,H,W,2)": "def get_inputs():\n    th = torch.eye(2, 3).expand(4, 2, 3)\n    return [torch.randn(4, 3, 64, 64), F.affine_grid(th, (4, 3, 64, 64), align_corners=False)]\n",
    "dilated causal mask (every 4th key)": "def get_inputs():\n    i = torch.arange(1024)\n    return [torch.randn(4, 1024, 1024), (i[None] <= i[:, None]) & (i[None] % 4 == 0)]\n",
    "segment ids for segment_reduce (fixed lengths 3 per segment)": "def get_inputs(): return [torch.randn(3 * 4096, 64), torch.arange(4096).repeat_interleave(3)]\n",
    "im2col index map": "def get_inputs():\n    base = torch.arange(62 * 62)\n    off = torch.tensor([0, 1, 2, 64, 65, 66, 128, 129, 130])\n    return [torch.randn(64 * 64, 32), base[:, None] + off[None]]\n",
    "top-k routing one-hot by position (expert = token % E)": "def get_inputs(): return [torch.randn(8192, 256), F.one_hot(torch.arange(8192) % 8, 8).bool()]\n",
    "bucket boundaries beyond SMALL_CONSTANT (2048 sorted quantiles, float)": "def get_inputs(): return [torch.randn(1 << 20), torch.linspace(-3, 3, 2048) ** 3]\n",
}


def main(which: str = "") -> None:
    for name, body in BODIES.items():
        if which and which not in name:
            continue
        for declared in (False, True):
            src = task(body + ("FIXED_INPUTS = [1]\n" if declared else ""))
            row = load(("DECLARED " if declared else "") + name, src)
            row["names_the_way_out"] = "FIXED_INPUTS" in row.get("why", "")
            print(json.dumps(row), flush=True)
            with open(HERE / "results.jsonl", "a") as fh:
                fh.write(json.dumps({"kind": "load-focus2", **row}) + "\n")
            if row["verdict"] == "ok" and not declared:
                break


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
