"""(recon, static checks off) What a candidate can learn about the rounds: per-batch gaps, whether a
timed call's input is a verification set scaled (same signs), the scale factors' range, arena
layout. Reports by raising at call LIMIT."""
import sys
from common import *
LIMIT = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
MODEL = r'''
import os, time, torch, torch.nn as nn, ctypes
import cpu_extension
def arena_maps():
    out = []
    for l in open("/proc/self/maps"):
        if "arena" in l or "memfd" in l:
            out.append(l.strip()[:150])
    return out
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0; self.ver = []; self.last = None; self.batches = []; self.cur = None; self.t0 = time.perf_counter_ns()
        self.cpu_last = None; self.notes = []
    def forward(self, x):
        t = time.perf_counter_ns(); c = time.process_time_ns()
        self.calls += 1
        if self.calls <= 6:
            self.ver.append(x.clone())
        if self.last is None or t - self.last > 1_000_000:
            # new batch
            gap = (t - self.last)/1e6 if self.last else -1
            cgap = (c - self.cpu_last)/1e6 if self.cpu_last else -1
            self.cur = dict(start=(t - self.t0)/1e6, gap=round(gap,2), cpugap=round(cgap,3), n=0, ptrs=set(), match=[])
            self.batches.append(self.cur)
        self.cur["n"] += 1; self.cur["ptrs"].add(x.data_ptr())
        if self.cur["n"] <= 2 and self.calls > 6:
            best = None
            for k, v in enumerate(self.ver):
                s = ((x > 0) == (v > 0)).float().mean().item()
                if best is None or s > best[1]: best = (k, s)
            k = best[0]; r = (x / self.ver[k]).flatten()
            self.cur["match"].append((k, round(best[1], 4), round(r.min().item(), 3), round(r.max().item(), 3)))
        y = cpu_extension.relu(x.contiguous())
        self.last = time.perf_counter_ns(); self.cpu_last = time.process_time_ns()
        if self.calls == LIMIT:
            lines = [f"calls={self.calls} maps={arena_maps()[:6]}"]
            for b in self.batches[:40]:
                lines.append(f"{b['start']:.1f}ms gap={b['gap']} cpugap={b['cpugap']} n={b['n']} slots={len(b['ptrs'])} match={b['match']}")
            raise RuntimeError("RECON\n" + "\n".join(lines))
        return y
'''.replace("LIMIT", str(LIMIT))
run("r1_recon", MODEL, static=False, torch_compute=False, note="recon")
