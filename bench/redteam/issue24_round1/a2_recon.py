"""Recon (static checks off): what the candidate process can see; raised as error text."""
from common import *
MODEL = r'''
import os, torch.nn as nn
def info():
    out = []
    me = os.getpid()
    out.append(f"pid={me} ppid={os.getppid()} uid={os.getuid()} cwd={os.getcwd()}")
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try: out.append(f"fd{fd}->{os.readlink('/proc/self/fd/'+fd)}")
        except Exception as e: out.append(f"fd{fd}:{e}")
    for l in open("/proc/self/maps"):
        p = l.split()
        if len(p) >= 6 and ('s' in p[1] or 'memfd' in l or 'dev/shm' in l): out.append("MAP " + l.strip())
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    out.append(f"visible pids={len(pids)}")
    for p in pids:
        try: cl = open(f"/proc/{p}/cmdline","rb").read().replace(b"\0", b" ")[:120].decode()
        except Exception as e: cl = repr(e)
        if "python" in cl or "cuda" in cl:
            r = []
            for what in ("environ", "maps", "fd"):
                try:
                    if what == "fd": r.append(f"fd:{len(os.listdir(f'/proc/{p}/fd'))}")
                    else: r.append(f"{what}:{len(open(f'/proc/{p}/{what}','rb').read())}")
                except Exception as e: r.append(f"{what}:{type(e).__name__}")
            out.append(f"P{p} {cl} {r}")
    return "\n".join(out)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("RECON\n" + info())
    def forward(self, x):
        return x
'''
res = run("a2_recon", MODEL, static=False)
print(res.reason)
