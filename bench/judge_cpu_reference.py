"""Reference-as-its-own-solution through the judge on the CPU: what the process boundary costs.

    python bench/judge_cpu_reference.py --repeats 4 --out bench/results/judge_cpu_reference.json

The candidate is the task's own `Model` (torch.relu on 64x1024, ~20 us a call), so any ratio
other than 1.0 is the harness: the judge's in-process baseline against the same code run in
the sandboxed candidate process, side by side in the same rounds. Reward must be 1 every time.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from pathlib import Path

from cuda_agent.benchmark.solutions import reference_config
from cuda_agent.evaluation import EvalConfig, TimingConfig, evaluate
from cuda_agent.tasks import Task
from cuda_agent.workspace import create_workspace

TASK = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(64, 1024)]
def get_init_inputs():
    return []
'''
IDENTITY_BINDING = ('#include "binding_registry.h"\nat::Tensor ident(const at::Tensor& x) { return x; }\n'
                    'REGISTER_BINDING(ident, ident)\n')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    ws = create_workspace(Task.from_source(TASK, name="relu"), Path(tempfile.mkdtemp()) / "ws", "cpu")
    (ws.root / "model_new.py").write_text(TASK.replace("class Model(", "class ModelNew("))
    (ws.root / "kernels" / "ident_binding.cpp").write_text(IDENTITY_BINDING)
    cfg = reference_config(EvalConfig(backend="cpu", compile_mode=None, timing=TimingConfig(budget_s=0.5)))
    runs = []
    for _ in range(args.repeats):
        r = evaluate(ws, cfg)
        runs.append({"reward": r.reward, "speedup_vs_eager": r.speedup_vs_eager, "eager_ms": r.time_ms.eager,
                     "candidate_ms": r.time_ms.candidate, "calls_per_interval": r.calls_per_interval,
                     "seconds": r.seconds})
        print(json.dumps(runs[-1]), flush=True)
    args.out.write_text(json.dumps({"machine": platform.processor() or platform.machine(), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
