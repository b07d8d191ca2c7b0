"""Class 5 neighbour (static checks off): an output whose memory the judge cannot read
(PROT_NONE mapping; a file mapping truncated before answering). Is it −1 (the candidate's
fault) or does it make the judge fail ("infrastructure"), which would let a wrong kernel dodge −1?"""
import sys
from common import *
MODELS = {
"protnone": r'''
import mmap, torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        m = mmap.mmap(-1, x.numel() * 4, prot=mmap.PROT_READ)
        return torch.frombuffer(m, dtype=torch.float32).view(x.shape)
''',
"truncated": r'''
import mmap, os, torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        fd = os.open("trunc.bin", os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, x.numel() * 4)
        m = mmap.mmap(fd, x.numel() * 4)
        t = torch.frombuffer(m, dtype=torch.float32).view(x.shape)
        os.ftruncate(fd, 0)
        return t
''',
}
for name in (sys.argv[1:] or MODELS):
    res = run(f"a9_{name}", MODELS[name], static=False, torch_compute=False)
    print("RESULT", name, res.reward, res.model_dump(mode="json").get("stage"), repr(res.reason[:600]))
