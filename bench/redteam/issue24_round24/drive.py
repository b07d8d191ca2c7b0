"""Drive the sharing path end to end on the CPU (as tests/evaluation/test_weights_shared.py does).
usage: python drive.py CASE [N]   CASE in: emb_tail lazy zero"""
import os, sys, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/work/main/src")
from cuda_agent.evaluation.config import EvalConfig, TimingConfig
from tests.evaluation.test_weights_shared import _request
from cuda_agent.evaluation.judge import Judge

CASES = {
# honest: a recsys-style embedding with a max norm that clips only its outlier rows (normal init, dim 32:
# row norms ~5.6 +- 0.7; max_norm 7.3 clips ~1% of rows). The reference phase reads ~40 rows: most often
# none is clipped, so writes_weights stays False and the parameters are shared; any later read of an
# outlier row (the secret trial, drawn timing inputs, the baseline's forward on a GPU) renormalises it.
"emb_tail": '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20000, 32, max_norm=7.3)

    def forward(self, idx):
        return self.emb(idx).sum(1)

def get_inputs():
    return [torch.randint(0, 20000, (8, 4))]

def get_init_inputs():
    return []
''',
"emb_tail734": '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20000, 32, max_norm=7.34)

    def forward(self, idx):
        return self.emb(idx).sum(1)

def get_inputs():
    return [torch.randint(0, 20000, (8, 4))]

def get_init_inputs():
    return []
''',
"lazy": '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.LazyLinear(32)

    def forward(self, x):
        return torch.relu(self.lin(x))

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return []
''',
"zero": '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return []
''',
}

def main():
    case, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    tmp = Path(tempfile.mkdtemp(prefix=f"r24_{case}_"))
    cache = tmp / "cache"; cache.mkdir(); os.environ["CUDA_AGENT_CACHE"] = str(cache)
    cfg = EvalConfig(backend="cpu", compile_mode=None, cache_dir=str(cache), worker_timeout_s=120,
                     memory_limit_gb=3.0, timing=TimingConfig(budget_s=0.2, min_trials=20, warmup_ms=5))
    req = _request(tmp, cache, cfg, CASES[case], case)
    judge = Judge("cpu"); judge.shares_weights = os.environ.get("SHARE", "1") == "1"  # as on a GPU
    try:
        for i in range(n):
            a = judge.evaluate(req)
            st = judge.state
            print(f"eval {i}: correct={a.correct} stage={a.stage} reason={str(a.reason)[:200]!r}", flush=True)
            if st is not None:
                print(f"   state: writes_weights={st.writes_weights} shared={st.weights_from is not None}", flush=True)
                emb = getattr(st.reference, "emb", None)
                if emb is not None and emb.max_norm:
                    print(f"   rows above max_norm now: {(emb.weight.norm(dim=1) > emb.max_norm).sum().item()}", flush=True)
            else:
                print("   state dropped", flush=True)
    finally:
        judge.close()

if __name__ == "__main__":
    main()
