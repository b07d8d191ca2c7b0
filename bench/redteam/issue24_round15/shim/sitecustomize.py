"""Round 15 diagnostic shim for the judge process (reads nothing the judge does not; only logs its numbers).
Enable: RT15_LOG=/tmp/x PYTHONPATH=<abs>/bench/redteam/issue24_round15/shim:<abs>/src. One line per interval in
$RT15_LOG: role stage m ms_at_done ms_charged at_once cpu_after_done_us threads stopped_after_t0_ms."""
import os
import sys


def _install_judge():
    jm = sys.modules.get("cuda_agent.evaluation.judge")
    if jm is None or not hasattr(jm, "_CandidateSession"):
        jm = sys.modules.get("__main__")
    if jm is None or not hasattr(jm, "_CandidateSession") or getattr(jm, "_rt15", False):
        return
    jm._rt15 = True
    orig = jm._CandidateSession.ends_at_stop

    def ends_at_stop(self, ms, t0, stage):
        r = orig(self, ms, t0, stage)
        tree = self.link.tree
        threads = sum(len(t) for t in (tree._stopped or {}).values())
        with open(os.environ["RT15_LOG"], "a") as fh:
            fh.write(f"{self.role} {stage} {self.m} {ms:.3f} {r:.3f} {tree.stopped_at_once} "
                     f"{tree.cpu_after_done_ns / 1000:.0f} {threads} {(tree.stopped_at - t0) * 1000:.3f}\n")
        return r
    jm._CandidateSession.ends_at_stop = ends_at_stop


if os.environ.get("RT15_LOG"):
    import builtins
    _orig_import = builtins.__import__

    def hook(name, *a, **k):
        m = _orig_import(name, *a, **k)
        _install_judge()
        return m
    builtins.__import__ = hook
