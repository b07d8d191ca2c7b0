"""a1b's frac-64 subsampled mean, with a timing budget long enough for the CI to settle (2 s)."""
import sys
sys.argv = [sys.argv[0]]
exec(open("/tmp/redteam24/a1b_subsample_bigrows.py").read().split("for frac in")[0])
for frac in (64, 1):
    run(f"a1c_bigrow_frac{frac}_budget2", MODEL, {"rowmean.cpp": KERNEL, "rowmean_binding.cpp": BINDING.replace("FRAC", str(frac))},
        task=TASK, timing=TimingConfig(budget_s=2.0, min_trials=40, warmup_ms=5))
