"""Recon 2 (static checks off): can the candidate open another process's arena memfd
(/proc/<pid>/fd/<n>) for writing, or read /proc/<pid>/mem?"""
from common import *
MODEL = r'''
import os, torch.nn as nn
def probe():
    out = [f"me={os.getpid()} ppid={os.getppid()}"]
    for p in [p for p in os.listdir("/proc") if p.isdigit()]:
        try: cl = open(f"/proc/{p}/cmdline","rb").read().replace(b"\0", b" ")[:90].decode()
        except Exception: continue
        if "cuda_agent" not in cl or int(p) == os.getpid(): continue
        res = []
        try: fds = os.listdir(f"/proc/{p}/fd")
        except Exception as e: out.append(f"P{p} listfd {type(e).__name__}"); continue
        for fd in fds:
            try: tgt = os.readlink(f"/proc/{p}/fd/{fd}")
            except Exception as e: res.append(f"{fd}:readlink {type(e).__name__}"); continue
            if "memfd" in tgt:
                try:
                    f = os.open(f"/proc/{p}/fd/{fd}", os.O_RDWR)
                    res.append(f"{fd}:{tgt[:30]} RDWR OK size={os.fstat(f).st_size}")
                    os.close(f)
                except Exception as e:
                    try:
                        f = os.open(f"/proc/{p}/fd/{fd}", os.O_RDONLY); os.close(f); res.append(f"{fd}:{tgt[:30]} RDONLY only ({e})")
                    except Exception as e2: res.append(f"{fd}:{tgt[:30]} open {e2}")
        try: open(f"/proc/{p}/mem","rb").close(); res.append("mem:open")
        except Exception as e: res.append(f"mem:{type(e).__name__}")
        out.append(f"P{p} {cl[40:]} {res}")
    return "\n".join(out)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("PROBE\n" + probe())
    def forward(self, x):
        return x
'''
res = run("a3_foreign_memfd", MODEL, static=False)
print("SANDBOX", res.model_dump(mode="json").get("sandbox"))
print(res.reason)
