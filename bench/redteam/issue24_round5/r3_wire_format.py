"""(recon, static checks off) What does the candidate's channel carry? Lists the process's socket
fds and peeks (MSG_PEEK is not possible on the sending side, so: wraps the send methods of every
socket object the harness holds) at the first bytes of the messages the harness sends, then
reports them by raising at call 8."""
from common import *
MODEL = r'''
import gc, os, socket, torch.nn as nn
import cpu_extension
SEEN = []
def wrap_class():
    C = socket.socket
    for name in ("send", "sendall", "sendmsg"):
        orig = getattr(C, name)
        def w(self, *a, _o=orig, _n=name, **k):
            data = a[0] if a else b""
            if _n == "sendmsg": data = b"".join(bytes(x) for x in a[0])
            SEEN.append(("out", _n, len(data), bytes(data[:40])))
            return _o(self, *a, **k)
        setattr(C, name, w)
    for name in ("recv", "recvmsg"):
        orig = getattr(C, name)
        def r(self, *a, _o=orig, _n=name, **k):
            res = _o(self, *a, **k)
            data = res if isinstance(res, bytes) else res[0]
            SEEN.append(("in", _n, len(data), bytes(data[:40])))
            return res
        setattr(C, name, r)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0
        fds = []
        for fd in os.listdir("/proc/self/fd"):
            try: fds.append((fd, os.readlink(f"/proc/self/fd/{fd}")))
            except Exception: pass
        self.fds = fds
        socks = [o for o in gc.get_objects() if isinstance(o, socket.socket)]
        self.socks = [(s.fileno(), s.type) for s in socks]
        wrap_class()
    def forward(self, x):
        self.n += 1
        if self.n == 9:
            raise RuntimeError(f"WIRE fds={self.fds} socks={self.socks} sent={SEEN[:8]}")
        return cpu_extension.relu(x.contiguous())
'''
run("r3_wire_format", MODEL, static=False, torch_compute=False, note="recon: wire format")
