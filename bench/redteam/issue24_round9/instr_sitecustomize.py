# red team round 9: observe (never change) when the judge's candidate watch looks. Logs each _watch that looks.
import os as _o
try:
    open("/tmp/redteam-r9/site.log","a").write(str(_o.getpid()) + "\n")
except OSError:
    pass
import sys, importlib.abc, importlib.machinery, time, os
class _F(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in ("cuda_agent.isolation.worker", "cuda_agent.evaluation.candidate_link"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        orig = spec.loader.exec_module
        def exec_module(mod):
            orig(mod)
            if name.endswith("candidate_link"):
                L = mod.CandidateLink; rcv = L.receive
                def receive(self, deadline, what):
                    t = time.monotonic()
                    try:
                        return rcv(self, deadline, what)
                    finally:
                        d = time.monotonic() - t
                        if d > 0.1 and self.memfd_exempt is not None:
                            with open("/tmp/redteam-r9/looks.log", "a") as fh:
                                fh.write(f"{time.monotonic():.3f} slow receive {d:.3f}s pid={self.proc.pid}\n")
                L.receive = receive
                return
            W = mod.WatchedProcess; inner = W._watch
            def _watch(self):
                before = self._last_watch
                inner(self)
                if self._last_watch != before and self.memfd_exempt is not None:
                    try:
                        with open("/tmp/redteam-r9/looks.log", "a") as fh:
                            tree = mod.process_tree(self.proc.pid); used = mod.resident_bytes(tree) + mod.memfd_bytes(tree, self.memfd_exempt, mapped=False)
                            fh.write(f"{time.monotonic():.3f} pid={self.proc.pid} n={self._watches} killed={bool(self._killed_for)} used_now={used/2**30:.2f}GiB\n")
                    except OSError:
                        pass
            W._watch = _watch
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, _F())
