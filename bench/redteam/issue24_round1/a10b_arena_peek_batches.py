"""Class 1 neighbour (static checks off): can a call see, anywhere in its arena, the inputs of a
later call (or an earlier call's values again)? Honest relu; at call 300 it reports by failing."""
from common import *
MODEL = r'''
import os, time, hashlib, mmap, torch, torch.nn as nn
import cpu_extension
def arena_maps():
    out = []
    for l in open("/proc/self/maps"):
        if "cuda-agent-arena" in l:
            a, b = (int(v, 16) for v in l.split()[0].split("-"))
            out.append((a, b))
    return out
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0; self.batch = 0; self.last = 0.0; self.prior = 0; self.seen = {}; self.offsets = set(); self.hits = 0; self.early = 0; self.notes = []
    def forward(self, x):
        self.calls += 1
        now = time.monotonic()
        if now - self.last > 0.002: self.batch += 1
        n = x.numel() * 4
        mine = hashlib.sha1(x.contiguous().numpy().tobytes()).hexdigest()
        if mine in self.seen:
            self.hits += 1
            if self.seen[mine][1] != x.data_ptr(): self.early += 1
            if self.seen[mine][0] < self.batch: self.prior += 1
        self.offsets.add(x.data_ptr())
        # snapshot every slot address seen so far (the arena is mapped in this process)
        for p in self.offsets:
            try:
                t = torch.from_file if False else None
                buf = (ctypes_string(p, n))
                self.seen.setdefault(hashlib.sha1(buf).hexdigest(), (self.batch, p))
            except Exception as e:
                self.notes.append(repr(e)[:80])
        if self.calls == 300:
            raise RuntimeError(f"PEEK calls={self.calls} slots={len(self.offsets)} maps={[(hex(a), b-a) for a,b in arena_maps()]} "
                               f"inputs seen before their call={self.hits} (at another slot: {self.early}; in an EARLIER batch: {self.prior}) batches={self.batch} notes={self.notes[:3]}")
        y = cpu_extension.relu(x.contiguous())
        self.last = time.monotonic()
        return y
import ctypes
def ctypes_string(p, n):
    return ctypes.string_at(p, n)
'''
res = run("a10b_arena_peek_batches", MODEL, static=False, torch_compute=False,
          timing=TimingConfig(budget_s=1.0, min_trials=60, warmup_ms=5))
print("RESULT", res.reward, repr(res.reason[:800]))
