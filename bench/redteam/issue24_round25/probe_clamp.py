"""Which config seeds give 5 trial draws with no |x| > 4 (randn(1024)): then an in-place clamp_(-4, 4) never writes in the reference phase."""
import torch
from cuda_agent.evaluation.config import EvalConfig
N = int(__import__("sys").argv[1]) if len(__import__("sys").argv) > 1 else 1024
for seed in [42, 0, 1, 2, 3, 7]:
    cfg = EvalConfig(backend="cpu", seed=seed)
    w = []
    for s in cfg.trial_seeds():
        torch.manual_seed(s)
        w.append(bool(torch.randn(16, N // 16).abs().max() > 4))
    print(seed, w)
hits = 0
for s in range(2000):
    torch.manual_seed(10**6 + s); hits += bool((torch.randn(16, N // 16) * 1.2).abs().max() > 4)
print("share of draws (scaled x1.2) over 4:", hits / 2000)
