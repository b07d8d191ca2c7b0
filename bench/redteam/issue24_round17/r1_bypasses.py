"""Round 17: bypasses of tasks.task.own_randomness (load) and Judge._check_inputs_move (run time).
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round17/r1_bypasses.py"""
import json, sys, types, textwrap
from types import SimpleNamespace
import torch
from cuda_agent.tasks.task import validate_source, TaskError
from cuda_agent.evaluation import judge as J
from cuda_agent.evaluation.judge import Judge, JudgeError
_prints = getattr(J, '_input_prints', None) or (lambda torch, d: J._fingerprint(d))

HEAD = "import torch\nimport numpy as np\nimport random\nclass Model(torch.nn.Module):\n    def forward(self, x, *a): return x\ndef get_init_inputs(): return []\nN = 4096\n"
# "partial": N-64 elements fixed across seeds, 64 from torch's global generator (round 16 c4 shape)
CASES = {
 # --- own generators reached past the AST name list ---
 "getattr_manual_seed": ("bypass", "def get_inputs():\n    g = getattr(torch, 'Gener' + 'ator')()\n    getattr(g, 'manual_' + 'seed')(1234)\n    return [torch.cat([torch.randint(0, 1000, (64,)), torch.randint(0, 1000, (N-64,), generator=g)])]\n"),
 "alias_import": ("bypass", "from torch import Generator as G\ndef get_inputs():\n    g = G(); ms = g.manual_seed; ms(1234)\n    return [torch.cat([torch.randint(0, 1000, (64,)), torch.randint(0, 1000, (N-64,), generator=g)])]\n"),
 "type_of_default_gen": ("bypass", "def get_inputs():\n    g = type(torch.default_generator)(); g.set_state(torch.default_generator.get_state()); s = torch.get_rng_state()\n    g2 = type(torch.default_generator)(); (lambda f: f(1234))(g2.manual_seed.__call__)\n    return [torch.cat([torch.randint(0, 1000, (64,)), torch.randint(0, 1000, (N-64,), generator=g2)])]\n"),
 "default_gen_set_state": ("bypass", "FIX = torch.Generator.__new__ if False else None\n_S = torch.default_generator.get_state()\ndef get_inputs():\n    head = torch.randint(0, 1000, (64,))\n    saved = torch.default_generator.get_state(); torch.default_generator.set_state(_S)\n    tail = torch.randint(0, 1000, (N-64,)); torch.default_generator.set_state(saved)\n    return [torch.cat([head, tail])]\n"),
 "python_random_setstate": ("bypass", "random.seed if False else None\n_ST = random.getstate()\ndef get_inputs():\n    head = torch.randint(0, 1000, (64,)); random.setstate(_ST)\n    return [torch.cat([head, torch.tensor([random.randrange(1000) for _ in range(N-64)])])]\n"),
 "numpy_set_state": ("bypass", "_ST = np.random.get_state()\ndef get_inputs():\n    head = torch.randint(0, 1000, (64,)); np.random.set_state(_ST)\n    return [torch.cat([head, torch.from_numpy(np.random.randint(0, 1000, N-64))])]\n"),
 "numpy_bitgen_PCG64": ("bypass", "def get_inputs():\n    raw = np.random.PCG64(1234).random_raw(N-64) % 1000\n    return [torch.cat([torch.randint(0, 1000, (64,)), torch.from_numpy(raw.astype(np.int64))])]\n"),
 "numpy_SeedSequence": ("bypass", "def get_inputs():\n    raw = np.random.SeedSequence(1234).generate_state(N-64) % 1000\n    return [torch.cat([torch.randint(0, 1000, (64,)), torch.from_numpy(raw.astype(np.int64))])]\n"),
 "sobol_engine": ("bypass", "def get_inputs():\n    q = torch.quasirandom.SobolEngine(1, scramble=True, seed=1234).draw(N-64).flatten()\n    return [torch.cat([torch.randint(0, 1000, (64,)), (q * 1000).long()])]\n"),
 "exec_string": ("bypass", "def get_inputs():\n    ns = {'torch': torch}; exec('g = torch.Gen' + 'erator(); g.manual_' + 'seed(1234)', ns)\n    return [torch.cat([torch.randint(0, 1000, (64,)), torch.randint(0, 1000, (N-64,), generator=ns['g'])])]\n"),
 "hash_lcg": ("bypass", "def get_inputs():\n    tail = (torch.arange(N-64, dtype=torch.int64) * 2654435761 + 12345) % 1000\n    return [torch.cat([torch.randint(0, 1000, (64,)), tail])]\n"),
 "module_cache": ("bypass", "_C = {}\ndef get_inputs():\n    if 't' not in _C: _C['t'] = torch.randint(0, 1000, (N-64,))\n    return [torch.cat([torch.randint(0, 1000, (64,)), _C['t']])]\n"),
 "float_sin_plus_prefix": ("bypass", "def get_inputs():\n    tail = torch.sin(torch.arange(N-64, dtype=torch.float32) * 12.9898) * 43758.5453 % 1.0\n    return [torch.cat([torch.randn(64), tail])]\n"),
 "float_sin_beside_moving": ("bypass", "def get_inputs():\n    x = torch.sin(torch.arange(N, dtype=torch.float32) * 12.9898) * 43758.5453 % 1.0\n    return [x, torch.rand(1) + 0.5]\n"),
 "int_hash_beside_moving": ("bypass", "def get_inputs():\n    return [(torch.arange(N) * 2654435761) % 1000, torch.randn(8)]\n"),
 # --- whole-input fixed: the run-time check should catch these even past the AST ---
 "hash_whole_fixed": ("bypass", "def get_inputs():\n    return [(torch.arange(N, dtype=torch.int64) * 2654435761 + 12345) % 1000]\n"),
 "cache_whole_fixed_float": ("bypass", "_C = {}\ndef get_inputs():\n    if 't' not in _C: _C['t'] = torch.randn(N)\n    return [_C['t'].clone(), torch.rand(1) + 0.5]\n"),
 # --- controls ---
 "control_manual_seed": ("control", "def get_inputs():\n    torch.manual_seed(1)\n    return [torch.randint(0, 1000, (N,))]\n"),
 "control_honest": ("control", "def get_inputs():\n    return [torch.randint(0, 1000, (N,)), torch.randn(8)]\n"),
}

def judge():
    j = SimpleNamespace(torch=torch, device=torch.device("cpu"))
    j._trial_inputs = lambda m, s, d, rescale=False: Judge._trial_inputs(j, m, s, d, rescale)
    return j

def run(name, kind, body):
    src = HEAD + body
    row = {"case": name, "kind": kind}
    try:
        validate_source(src, name); row["load"] = "accepted"
    except TaskError as e:
        row["load"] = "refused: " + str(e)[:120]
    mod = types.ModuleType(name); exec(compile(src, name, "exec"), mod.__dict__)
    j = judge()
    try:
        draws = [j._trial_inputs(mod, s, None) for s in range(5)]
        elements = J._ElementDraws(torch, draws[0])  # round 17's mend: element by element (absent before it)
        for d in draws[1:]:
            elements.add(d)
        Judge._check_inputs_move(j, mod, None, 1, draws[0], [_prints(torch, d) for d in draws], elements)
        row["runtime"] = "accepted"
        # how much of input 0 is the same across two seeds?
        a, b = draws[0][0].float(), draws[1][0].float()
        row["input0_fixed_fraction"] = round(float((a == b).float().mean()), 4)
    except JudgeError as e:
        row["runtime"] = "refused: " + str(e)[:120]
    except Exception as e:
        row["runtime"] = f"error: {type(e).__name__}: {e}"[:160]
    row["bypass_both"] = row["load"] == "accepted" and row["runtime"] == "accepted"
    return row

if __name__ == "__main__":
    names = sys.argv[1:] or list(CASES)
    with open(__file__.replace("r1_bypasses.py", "results.jsonl"), "a") as f:
        for n in names:
            r = run(n, *CASES[n]); print(json.dumps(r)); f.write(json.dumps(r) + "\n")
