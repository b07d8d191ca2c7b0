"""a8 with torch.compile on (compile_mode='default'): does skipping 63/64 of the work turn
the honest fused kernel's reward into reward 3?"""
import sys
sys_argv = sys.argv[1:]
sys.argv = [sys.argv[0], "0"]
src = open("/tmp/redteam24/a8_subsample_heavy.py").read().split("for frac in")[0]
exec(src)
for frac in [int(a) for a in sys_argv] or [64, 1]:
    run(f"a8c_heavy_compile_frac{frac}", MODEL, {"rowmean.cpp": KERNEL, "rowmean_binding.cpp": BINDING.replace("FRAC", str(frac))},
        task=TASK, compile_mode="default")
