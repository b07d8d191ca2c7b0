import os, sys, time
if os.environ.get("RT14_LOG") and len(sys.argv) > 0 and "judge" in " ".join(sys.argv[:1]) or os.environ.get("RT14_LOG") and sys.argv[:1] == ["-m"]:
    pass
def _install():
    try:
        from cuda_agent.evaluation import candidate_link as cl
    except Exception:
        return
    orig = cl.FrozenTree.freeze
    osettles = cl.FrozenTree._settles
    ots = cl._thread_states
    last = {}
    def _thread_states(pid):
        r = ots(pid)
        last[pid] = r
        return r
    cl._thread_states = _thread_states
    def _settles(self, tree):
        t = time.perf_counter()
        r = osettles(self, tree)
        bad = {pid: [(i, x) for i, x in enumerate(last.get(pid, [])) if x not in "TtZXS"][:6] for pid in tree}
        self._rt_look = (r, round((time.perf_counter() - t) * 1000, 3), bad)
        return r
    cl.FrozenTree._settles = _settles
    def freeze(self, confirm_tree=True):
        was = self.frozen
        if not was:
            t = time.perf_counter()
        r = orig(self, confirm_tree)
        if not was:
            with open(os.environ["RT14_LOG"], "a") as fh:
                fh.write(f"{self.root} at_once={self.stopped_at_once} look={getattr(self, '_rt_look', None)} look_to_stopped_ms={(self.stopped_at-t)*1000:.3f}\n")
        return r
    cl.FrozenTree.freeze = freeze
_jdone = [False]
def _install_judge():
    jm = sys.modules.get("cuda_agent.evaluation.judge") or sys.modules.get("__main__")
    if _jdone[0] or jm is None or not hasattr(jm, "_CandidateSession"):
        return
    _jdone[0] = True
    orig = jm._CandidateSession.ends_at_stop
    def ends_at_stop(self, ms, t0, stage):
        r = orig(self, ms, t0, stage)
        with open(os.environ["RT14_LOG"] + ".ends", "a") as fh:
            fh.write(f"{self.role} {stage} {ms:.3f} {r:.3f}\n")
        return r
    jm._CandidateSession.ends_at_stop = ends_at_stop
if os.environ.get("RT14_LOG"):
    import builtins
    _orig_import = builtins.__import__
    done = [False]
    def hook(name, *a, **k):
        m = _orig_import(name, *a, **k)
        cm = sys.modules.get("cuda_agent.evaluation.candidate_link")
        if not done[0] and cm is not None and hasattr(cm, "FrozenTree") and hasattr(cm, "_thread_states"):
            done[0] = True
            _install()
        _install_judge()
        return m
    builtins.__import__ = hook
