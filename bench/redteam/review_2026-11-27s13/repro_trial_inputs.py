"""Review of 799c5d9: Judge.trial_inputs(state, i) vs Judge.trial(state, i).inputs, bit for bit,
for real TaskStates made by Judge.task_state on the CPU, in each holding regime (trials held,
refs held, neither), for several task kinds. Also input_stack's slots vs trial()."""
import hashlib
import sys
import types

import torch

from cuda_agent.backends import get_backend
from cuda_agent.evaluation import judge as J
from cuda_agent.evaluation.config import EvalConfig
from cuda_agent.evaluation.protocol import JudgeRequest


class CpuJudge(J.Judge):
    def __init__(self):  # no forkserver, no clients: the trusted phase alone
        self.torch = torch
        self.backend = get_backend("cpu")
        self.device = torch.device(self.backend.torch_device)
        self.state = None
        self.baseline = None
        self.retired, self.removals, self.kept_arenas, self.spares = [], [], [], []
        self._unit_cache = {}
        self._forward_peak = 0
        self.shares_weights = False
        self.writes_weights = set()


HEAD = "import torch\nimport torch.nn as nn\n"
TASKS = {
    "plain": HEAD + """
class Model(nn.Module):
    def forward(self, x): return (x * 2)[:, :8]
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "mutates": HEAD + """
class Model(nn.Module):
    def forward(self, x):
        x.mul_(3)
        return x[:, :8] + 1
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "aliases_input": HEAD + """
class Model(nn.Module):
    def forward(self, x): return x
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "recycles": HEAD + """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(64, 8))
    def forward(self, x):
        self.buf.copy_(x[:, :8] * 2)
        return self.buf
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "fixed_parts": HEAD + """
FIXED_INPUTS = [1]
class Model(nn.Module):
    def forward(self, x, pos): return (x + pos)[:, :8]
def get_inputs():
    pos = torch.arange(64.).repeat(64, 1)
    n = int(torch.randint(1, 32, (1,)))
    pos[:, :n] = torch.randn(64, n)
    return [torch.randn(64, 64), pos]
def get_init_inputs(): return []
""",
    "imported_again": HEAD + """
w = torch.randn(64, 64)  # made at import: the judge draws by running the source again
class Model(nn.Module):
    def forward(self, x, w): return (x @ w)[:, :8]
def get_inputs(): return [torch.randn(64, 64), w]
def get_init_inputs(): return []
""",
    "ints_and_scalar": HEAD + """
class Model(nn.Module):
    def forward(self, x, idx, k): return (x[idx] * k)[:, :8]
def get_inputs(): return [torch.randn(64, 64), torch.randint(0, 64, (64,)), 3]
def get_init_inputs(): return []
""",
}
PRECISION = {"plain": None, "mutates": "fp16", "aliases_input": "bf16", "recycles": None, "fixed_parts": None,
             "imported_again": "fp16", "ints_and_scalar": "bf16"}


def same(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not (isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)):
                return False
        elif x != y:
            return False
    return True


def run(name, src, regime, limit):
    J.TRIALS_HELD_BYTES = limit
    judge = CpuJudge()
    cfg = EvalConfig(backend="cpu")
    req = JudgeRequest(config=cfg, task_source=src, task_hash=hashlib.sha1(src.encode()).hexdigest() + regime,
                       precision=PRECISION[name], workspace="/tmp")
    st = judge.task_state(req, cfg)
    got = ("held" if st.trials is not None else "refs" if st.refs is not None else "neither")
    ok_trials = all(same(judge.trial_inputs(st, i), judge.trial(st, i).inputs) for i in range(len(st.seeds)))
    m = 7
    stack = judge.input_stack(st, m)
    ok_stack = all(same([x[s] if isinstance(x, torch.Tensor) else x for x in stack],
                        judge.trial(st, s % len(st.seeds)).inputs) for s in range(m))
    print(f"{name:16s} asked={regime:8s} got={got:8s} mutates={st.mutates!s:5s} module={type(st.module).__name__:14s}"
          f" fixed={sorted(st.fixed_parts)} trial_inputs==trial().inputs: {ok_trials}  stack slots==trial(): {ok_stack}")
    judge.drop_task()
    return ok_trials and ok_stack


if __name__ == "__main__":
    ok = True
    for name, src in TASKS.items():
        J.TRIALS_HELD_BYTES = 256 << 20
        probe = CpuJudge()
        cfg = EvalConfig(backend="cpu")
        req = JudgeRequest(config=cfg, task_source=src, task_hash="probe" + name, precision=PRECISION[name],
                           workspace="/tmp")
        s = probe.task_state(req, cfg)
        n = len(s.seeds)
        probe.drop_task()
        for regime, limit in (("held", 256 << 20), ("refs", s.out_bytes * n), ("neither", 0)):
            ok &= run(name, src, regime, limit)
    print("ALL EQUAL" if ok else "DIFFERENCES FOUND")
    sys.exit(0 if ok else 1)
