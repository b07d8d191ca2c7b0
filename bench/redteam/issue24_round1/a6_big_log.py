"""Class 5 (static checks off): the candidate writes 300 MB to its inherited stdout (the
candidate log in /tmp, outside scratch) and then fails; how much of it does the caller read,
and does the file stay behind?"""
import resource, glob, os
from common import *
MODEL = r'''
import os, sys, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        chunk = ("A" * 1023 + "\n").encode() * 1024
        for _ in range(300):
            os.write(1, chunk)
        raise RuntimeError("after writing 300 MB to fd 1")
    def forward(self, x):
        return x
'''
before = {p: os.path.getsize(p) for p in glob.glob("/tmp/cuda-agent-candidate-*.log")}
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
res = run("a6_big_log", MODEL, static=False)
d = res.model_dump(mode="json")
print("worker_log len", len(d.get("worker_log") or ""), "reason len", len(res.reason or ""))
print("caller maxrss MB before/after", r0 // 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
after = {p: os.path.getsize(p) for p in glob.glob("/tmp/cuda-agent-candidate-*.log")}
print("new/grown logs:", {p: s for p, s in after.items() if before.get(p) != s})
