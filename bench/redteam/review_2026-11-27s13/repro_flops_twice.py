"""Side effect of 799c5d9 on `_count_flops`: the old code evaluated `self.trial(state, 0).inputs` inside
`with torch.no_grad(), counter:`, so where neither the trials nor their outputs are held, `trial` ran the
reference's forward under the FlopCounterMode too: the flops were counted twice and the speed-of-light
bound (which caps reward at 1) was up to 2x too high. Old behaviour emulated by binding trial_inputs to
trial(...).inputs (called at the same place, inside the counter)."""
import hashlib
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from repro_trial_inputs import CpuJudge  # noqa: E402

from cuda_agent.evaluation import judge as J  # noqa: E402
from cuda_agent.evaluation.config import EvalConfig  # noqa: E402
from cuda_agent.evaluation.protocol import JudgeRequest  # noqa: E402

SRC = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, a, b): return a @ b
def get_inputs(): return [torch.randn(64, 32), torch.randn(32, 48)]
def get_init_inputs(): return []
"""
for regime, limit in (("held", 256 << 20), ("neither", 0)):
    J.TRIALS_HELD_BYTES = limit
    cfg = EvalConfig(backend="cpu")
    req = JudgeRequest(config=cfg, task_source=SRC, task_hash=hashlib.sha1(SRC.encode()).hexdigest() + regime,
                       workspace="/tmp")
    counts = {}
    for label in ("new", "old"):
        judge = CpuJudge()
        st = judge.task_state(req, cfg)
        if label == "old":
            judge.trial_inputs = lambda s, i, j=judge: j.trial(s, i).inputs
        judge._count_flops(st)
        counts[label] = st.work.get("flops")
        judge.drop_task()
    print(f"{regime:8s} flops new={counts['new']:.0f} old={counts['old']:.0f} (true 2*64*32*48={2*64*32*48})")
