"""Class 1 (static checks off): per batch (a gap > 2 ms between calls), how many of the batch's
inputs were already in the arena at the start of an EARLIER batch? Reports at batch 14 by failing."""
from common import *
MODEL = r'''
import time, hashlib, ctypes, torch, torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0; self.batch = 0; self.last = 0.0; self.seen = {}; self.offsets = set(); self.per = {}; self.sizes = {}
    def forward(self, x):
        self.calls += 1
        now = time.monotonic()
        n = x.numel() * 4
        self.offsets.add(x.data_ptr())
        if now - self.last > 0.002:
            self.batch += 1
            if self.batch == 14:
                raise RuntimeError(f"ROUNDS calls={self.calls} slots={len(self.offsets)} per-batch (size, inputs present in an earlier batch): "
                                   + str([(b, self.sizes.get(b), self.per.get(b, 0)) for b in range(1, 14)]))
            for p in self.offsets:
                self.seen.setdefault(hashlib.sha1(ctypes.string_at(p, n)).hexdigest(), self.batch)
        self.sizes[self.batch] = self.sizes.get(self.batch, 0) + 1
        mine = hashlib.sha1(ctypes.string_at(x.data_ptr(), n)).hexdigest()
        if self.seen.get(mine, self.batch) < self.batch:
            self.per[self.batch] = self.per.get(self.batch, 0) + 1
        y = cpu_extension.relu(x.contiguous())
        self.last = time.monotonic()
        return y
'''
res = run("a10c_arena_rounds", MODEL, static=False, torch_compute=False,
          timing=TimingConfig(budget_s=2.0, min_trials=40, warmup_ms=5))
print("RESULT", res.reward, repr(res.reason[-900:]))
