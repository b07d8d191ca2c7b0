"""Edge case beside 799c5d9: a reference that writes its input only for some seeds, not seeds[0].
Where the trials are not held (`keep` False), task_state checks mutation on trial 0 alone
(check_mutation=keep or mutates), so state.mutates is False and `trial(i)` runs the forward on the
inputs themselves: its .inputs come back written. Shows (a) the new stack (trial_inputs) holds the
pristine draw where the old one (trial().inputs) held the written one, slot 0 equal both ways;
(b) pre-existing, not from this change: verify's trial(i).inputs are the written ones while its .ref
is the reference's output on the pristine draw."""
import hashlib
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from repro_trial_inputs import CpuJudge, same  # noqa: E402

from cuda_agent.evaluation import judge as J  # noqa: E402
from cuda_agent.evaluation.config import EvalConfig  # noqa: E402
from cuda_agent.evaluation.protocol import JudgeRequest  # noqa: E402

SRC = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        if x[0, 0] > 0:      # data-dependent in-place write
            x.mul_(2)
        return x[:, :8] * 1.0
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
"""
cfg = EvalConfig(backend="cpu")
for seed in range(40, 400):  # a config seed whose trial 0 does not write and some later trial does
    cfg = EvalConfig(backend="cpu", seed=seed)
    signs = []
    for s in cfg.trial_seeds():
        torch.manual_seed(s)
        signs.append(bool(torch.randn(64, 64)[0, 0] > 0))
    if not signs[0] and any(signs[1:]):
        break
print("config seed", cfg.seed, "writes per trial:", signs)
J.TRIALS_HELD_BYTES = 0  # neither trials nor refs held (a large task)
judge = CpuJudge()
req = JudgeRequest(config=cfg, task_source=SRC, task_hash=hashlib.sha1(SRC.encode()).hexdigest(), workspace="/tmp")
st = judge.task_state(req, cfg)
print("state.mutates =", st.mutates, " trials held:", st.trials is not None, " refs held:", st.refs is not None)
for i in range(len(st.seeds)):
    new = judge.trial_inputs(st, i)
    t = judge.trial(st, i)
    pristine = judge._trial_inputs(st.module, st.seeds[i], st.dtype)
    print(f"trial {i}: new stack set == pristine draw: {same(new, pristine)};  old stack set (trial().inputs) == "
          f"pristine: {same(t.inputs, pristine)};  trial().ref == reference(pristine): "
          f"{torch.equal(t.ref, st.reference(*[x.clone() for x in pristine]))}")
