"""d1 (round 18): `_ImportedAgain` executes the task's whole source for every draw, and a task whose inputs are drawn
(integer or bool inputs, and since round 5 float-only tasks too) draws every timed call's inputs: m calls per round,
each a full exec of the source, including module-level work that is no input (here an embedding table given to the
Model by get_init_inputs(), as Ops-6K row 1636 makes it, beside ids made at import, as rows 30 / 32 make inputs).
The same task with the ids drawn inside get_inputs() (the module imported once) is the control.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round18/d1_reimport_cost.py [draw|eval|all] [V]
"""

import sys
import time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import config, run, shutdown, workspace  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

V, D = {V}, 256
table = torch.randn(V, D)  # pretrained embedding (an init input, made at import)
ids = torch.randint(0, V, (4096,))  # IDS

class Model(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(table)
    def forward(self, ids):
        return self.emb(ids)

def get_inputs():
    return [ids]

def get_init_inputs():
    return [table]
'''

MODEL_NEW = '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(table)
    def forward(self, ids):
        return self.emb(ids)
'''


def variants(v: int) -> dict:
    at_import = TASK.replace("{V}", str(v))
    in_get_inputs = at_import.replace("ids = torch.randint(0, V, (4096,))  # IDS\n", "").replace(
        "return [ids]", "return [torch.randint(0, V, (4096,))]")
    return {"import": at_import, "get_inputs": in_get_inputs}


def draw_cost(v: int) -> None:
    import torch
    from cuda_agent.evaluation.judge import _ImportedAgain, _seed_all, module_from_source
    for name, src in variants(v).items():
        mod = module_from_source("t", src)
        again = _ImportedAgain(src)
        for label, obj in (("module", mod), ("imported again", again)):
            t0 = time.perf_counter()
            for s in range(5):
                _seed_all(torch, s)
                obj.get_inputs()
            print(f"{name:>10} {label:>15}: {(time.perf_counter() - t0) / 5 * 1000:8.1f} ms per draw")


if __name__ == "__main__":
    args = sys.argv[1:]
    v = next((int(a) for a in args if a.isdigit()), 200000)
    mode = next((a for a in args if a in ("draw", "eval", "all")), "all")
    if mode in ("draw", "all"):
        draw_cost(v)
    if mode in ("eval", "all"):
        from cuda_agent.evaluation import GuardConfig
        try:
            for name, src in variants(v).items():
                cfg = config(fast=False, guards=GuardConfig(static_checks=False, symbols=False, torch_compute=False))
                cfg = cfg.model_copy(update={"worker_timeout_s": 600})
                run("d1_reimport_cost", f"{name} V={v}", workspace(f"d1r18_{name}", MODEL_NEW, None, src), cfg,
                    deserved="1, in about the control's time")
        finally:
            shutdown()
