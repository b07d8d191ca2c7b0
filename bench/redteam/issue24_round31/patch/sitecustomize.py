# Research only (src/ untouched): the judge runs as `python -m cuda_agent.evaluation.judge` (__main__), so this wraps
# cuda_agent.evaluation.timing.median_interval, which `futile` imports at call time.
#   RT_FUTILE_LEVEL=0.9 : futile's level replaced (the old setting), to compare on the same box
#   RT_TRACE=path       : each futile / may_stop call logged (rounds, m, spent, samples)
import os, sys
_lvl, _trace = os.environ.get("RT_FUTILE_LEVEL"), os.environ.get("RT_TRACE")
if _lvl or _trace:
    import importlib.abc, importlib.machinery

    class _Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "cuda_agent.evaluation.timing":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            orig = spec.loader.exec_module

            def exec_module(module):
                orig(module)
                real = module.median_interval

                def median_interval(xs, confidence):
                    f = sys._getframe(1)
                    if f.f_code.co_name == "futile":
                        if _lvl:
                            confidence = float(_lvl)
                        if _trace:
                            g = f.f_back
                            loc = g.f_locals if g is not None else {}
                            with open(_trace, "a") as fh:
                                fh.write(f"futile caller={g.f_code.co_name if g else None} rounds={loc.get('rounds')} "
                                         f"first={loc.get('first')} m={loc.get('calls_per_round')} spent={loc.get('spent')} "
                                         f"asked={loc.get('asked')} level={confidence} n={len(xs)} "
                                         f"lo,hi={real(xs, confidence)} ratios={[round(x, 3) for x in xs]}\n")
                    return real(xs, confidence)
                module.median_interval = median_interval
            spec.loader.exec_module = exec_module
            return spec
    sys.meta_path.insert(0, _Hook())
