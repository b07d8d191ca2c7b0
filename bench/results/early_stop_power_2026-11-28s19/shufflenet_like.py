"""The judge's real rule for a one-call-a-round task (first look 12, every 4, 15% share, ~45 rounds in budget),
level3/26_ShuffleNet-like noise: per FUTILE_LEVEL, (level, P(faster), mean rounds, share of evaluations at >= 24 rounds).
Run from the repository root: PYTHONPATH=src python bench/results/early_stop_power_2026-11-28s19/shufflenet_like.py"""
import random, sys
sys.path[:0]=['bench','src']
from early_stop_power import draw_ratios, run_one, EARLY_LOOKS
rng=random.Random(7)
for sigma in (0.04,0.065,0.1):
  for r in (0.98,1.0,1.02, 0.9, 0.92):
    draws=[draw_ratios(rng,r,sigma,45) for _ in range(2000)]
    out=[]
    for lv in (0.9,0.8,0.7):
        res=[run_one(d,45,lv,4,12,0.15) for d in draws]
        out.append((lv, round(sum(f for f,_ in res)/len(res),3), round(sum(n for _,n in res)/len(res),1), round(sum(n>=24 for _,n in res)/len(res),3)))
    print(sigma, r, out)
