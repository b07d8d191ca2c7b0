"""Round 30 shim for the judge process: round 15's logging shim (RT15_LOG), plus, with RT30_OLD=1, the FrozenTree
allowances before 01cc728 (CPU_LEADER_PER_THREAD_NS 1,500, AT_ONCE_PER_THREAD_S 30 us). Enable with
PYTHONPATH=<abs>/bench/redteam/issue24_round30/shim:<abs>/src."""
import builtins
import os
import runpy
import sys

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "issue24_round15", "shim",
                            "sitecustomize.py"))
if os.environ.get("RT30_OLD"):
    _imp = builtins.__import__

    def _hook(name, *a, **k):
        m = _imp(name, *a, **k)
        cl = sys.modules.get("cuda_agent.evaluation.candidate_link")
        if cl is not None and hasattr(cl, "FrozenTree") and not getattr(cl.FrozenTree, "_rt30", False):
            cl.FrozenTree.CPU_LEADER_PER_THREAD_NS = 1_500
            cl.FrozenTree.AT_ONCE_PER_THREAD_S = 0.00003
            cl.FrozenTree._rt30 = True
            with open(os.environ.get("RT15_LOG", "/dev/null"), "a") as fh:
                fh.write(f"# rt30 old allowances in pid {os.getpid()}\n")
        return m
    builtins.__import__ = _hook
