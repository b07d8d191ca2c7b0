"""Monte-Carlo of Judge._time's stop rule (judge.may_stop, the real function) at FUTILE_LEVEL 0.8 vs 0.9.
Per-round candidate/eager ratio ~ median * exp(N(0, sigma)) (optionally t-tailed), a round costs round_ms.
Reports: P(reward 2) = clearly_faster at 0.99 on eager over all rounds; mean rounds; mean timed calls compared;
P(flaky kernel caught) for a per-call failure probability p."""
import math, random, sys
from cuda_agent.evaluation.judge import may_stop, EARLY_LOOKS
from cuda_agent.evaluation.timing import clearly_faster, round_ratios

def run(med, sigma, round_ms, m, flevel, rng, budget_s=1.0, min_trials=30, floor=12, transient=0, trans_med=1.0,
        tails=False, max_trials=2000):
    fewest = min_trials if round_ms * min_trials <= budget_s * 1000 else floor
    level = 1 - 0.01 / (len(EARLY_LOOKS) + 1)
    s = {"eager": [], "compile": [], "candidate": []}
    for r in range(max_trials):
        mu = trans_med if r < transient else med
        z = rng.gauss(0, 1)
        if tails:
            z = z / math.sqrt(rng.gammavariate(1.5, 1 / 1.5))  # t with 3 dof
        s["eager"].append(1.0); s["compile"].append(1.0)  # compile irrelevant to eager's reward
        s["candidate"].append(mu * math.exp(sigma * z))
        spent = (r + 1) * round_ms / 1000 / budget_s
        if r + 1 >= fewest and spent > 1:
            break
        if may_stop(s, r + 1, EARLY_LOOKS, 0.05, level, flevel, spent=spent, calls_per_round=m):
            break
    n = len(s["candidate"])
    return n, clearly_faster(round_ratios(s["candidate"], s["eager"]), 0.05, 0.99)

def table(cases, N, seed=1):
    print(f"{'case':58s} | {'lvl':>4s} | rounds | calls | P(reward2) | P(catch p=.01) | P(catch p=.03)")
    for name, kw in cases:
        m = kw["m"]
        for fl in (0.9, 0.8):
            rng = random.Random(seed)
            res = [run(flevel=fl, rng=rng, **kw) for _ in range(N)]
            rounds = sum(r for r, _ in res) / N
            fast = sum(f for _, f in res) / N
            calls = [r * m + 7 for r, _ in res]  # + 6 verification calls and the secret trial
            c1 = sum(1 - 0.99 ** c for c in calls) / N
            c3 = sum(1 - 0.97 ** c for c in calls) / N
            print(f"{name:58s} | {fl:4.1f} | {rounds:6.1f} | {sum(calls)/N:5.0f} | {fast:10.4f} | {c1:14.3f} | {c3:14.3f}")

if __name__ == "__main__":
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    cases = []
    for rm, m in ((30, 10), (60, 1), (25, 100)):
        for sig in (0.05, 0.12, 0.25):
            cases.append((f"parity 1.00x sigma={sig} round={rm}ms m={m}", dict(med=1.0, sigma=sig, round_ms=rm, m=m)))
            cases.append((f"near 0.97x sigma={sig} round={rm}ms m={m}", dict(med=0.97, sigma=sig, round_ms=rm, m=m)))
            for sp in (1.3, 1.5, 2.0):
                cases.append((f"honest {sp}x sigma={sig} round={rm}ms m={m}", dict(med=1/sp, sigma=sig, round_ms=rm, m=m)))
            cases.append((f"honest 1.3x t3-tails sigma={sig} round={rm}ms m={m}", dict(med=1/1.3, sigma=sig, round_ms=rm, m=m, tails=True)))
            for T in (8, 12):
                cases.append((f"honest 1.5x after {T} rounds at 1.0x sigma={sig} rm={rm} m={m}",
                              dict(med=1/1.5, sigma=sig, round_ms=rm, m=m, transient=T, trans_med=1.0)))
    table(cases, N)
