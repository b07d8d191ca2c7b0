"""A declared input fixed in part (position ids padded at random lengths) beside an undeclared mask drawn from the
same lengths, in a task that also makes `x` at import (so draws run the source again, `_ImportedAgain`): are the
two inputs of one draw still consistent?"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_any import load, _l  # noqa: E402
from cuda_agent.evaluation.judge import _seed_all, _ImportedAgain  # noqa: E402
import torch

SRC = '''import torch
import torch.nn as nn
B, L = 16, 256
x = torch.randn(B, L, 32)               # made at import (Ops-6K style)
class Model(nn.Module):
    def forward(self, x, pos, keep):
        return (x + pos[..., None].float() * 0.01) * keep[..., None]
def get_init_inputs(): return []
def get_inputs():
    lengths = torch.randint(L // 2, L + 1, (B,))
    ar = torch.arange(L).expand(B, L)
    pos = torch.where(ar < lengths[:, None], ar, 0)   # positions, padded with 0: fixed in part -> declared
    keep = ar < lengths[:, None]                      # the same lengths' mask
    return [x, pos, keep]
FIXED_INPUTS = [1]
'''
row = load("mismatch", SRC)
print(row)
j = _l.judge()
from cuda_agent.evaluation import EvalConfig
from cuda_agent.evaluation.protocol import JudgeRequest
import hashlib
cfg = EvalConfig(backend="cpu")
req = JudgeRequest(config=cfg, task_source=SRC, task_hash=hashlib.sha256(SRC.encode()).hexdigest(), precision=None, workspace="/x")
st = j.task_state(req, cfg)
print("module is _ImportedAgain:", isinstance(st.module, _ImportedAgain))
bad = 0
for seed in range(20):
    _seed_all(torch, seed)
    x, pos, keep = st.module.get_inputs()
    len_pos = (pos[:, 1:] != 0).sum(1) + 1
    len_keep = keep.sum(1)
    bad += int((len_pos != len_keep).any())
print(f"draws whose declared pos and undeclared mask disagree on lengths: {bad} of 20")
