"""Are batches 7 and 8 (inputs = the unscaled verification sets, see a10c) timed? Sleep 2 ms
per call in batch B only and look at the candidate's max per-call time."""
import sys
from common import *
MODEL = r'''
import time, torch, torch.nn as nn
import cpu_extension
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.batch = 0; self.last = 0.0
    def forward(self, x):
        now = time.monotonic()
        if now - self.last > 0.002: self.batch += 1
        if self.batch == SLOW: time.sleep(0.002)
        y = cpu_extension.relu(x.contiguous())
        self.last = time.monotonic()
        return y
'''
for b in [int(a) for a in sys.argv[1:]] or [7, 8]:
    res = run(f"a10d_slow_batch{b}", MODEL.replace("SLOW", str(b)), static=False, torch_compute=False)
    d = res.model_dump(mode="json")
    print("RESULT", b, res.reward, d["candidate_stats"], d["calls_per_interval"], (d.get("judge") or {}).get("interleaved_ms"))
