"""Round 17: honest tasks refused at load by tasks.task.own_randomness.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round17/r2_honest.py"""
import json
from cuda_agent.tasks.task import validate_source, TaskError

TAIL = "def get_inputs():\n    return [torch.randn(16, 64)]\ndef get_init_inputs():\n    return [64]\n"
CASES = {
 "gan_generator_submodule": "import torch\nclass Generator(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__(); s.l = torch.nn.Linear(d, d)\n    def forward(s, x): return torch.tanh(s.l(x))\nclass Model(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__(); s.g = Generator(d)\n    def forward(s, x): return s.g(x)\n",
 "weights_seeded_in_init": "import torch\nclass Model(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__(); torch.manual_seed(0); s.l = torch.nn.Linear(d, d)\n    def forward(s, x): return s.l(x)\n",
 "own_gen_for_weights_in_init": "import torch\nclass Model(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__(); g = torch.Generator().manual_seed(0)\n        s.register_buffer('w', torch.randn(d, d, generator=g))\n    def forward(s, x): return x @ s.w\n",
 "init_inputs_from_rng": "import torch, random\nclass Model(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__(); s.d = d\n    def forward(s, x): return x * s.d\ndef get_inputs():\n    return [torch.randn(16, 64)]\ndef get_init_inputs():\n    return [random.Random(0).randint(1, 9)]\n",
 "method_named_seed": "import torch\nclass Model(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__(); s.d = d\n    def seed(s, x): return x.clamp(min=0)\n    def forward(s, x): return s.seed(x)\n",
 "hash_seed_helper": "import torch\ndef seed(x): return x * 2\nclass Model(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__()\n    def forward(s, x): return seed(x)\n",
 "dropout_rng_note_in_forward": "import torch\nclass Model(torch.nn.Module):\n    def __init__(s, d):\n        super().__init__()\n    def forward(s, x):\n        return x + torch.cuda.initial_seed() * 0 if False else x\n",
}
if __name__ == "__main__":
    with open(__file__.replace("r2_honest.py", "results.jsonl"), "a") as f:
        for n, src in CASES.items():
            src = src if "def get_inputs" in src else src + TAIL
            try:
                validate_source(src, n); r = {"case": n, "kind": "honest", "load": "accepted"}
            except TaskError as e:
                r = {"case": n, "kind": "honest", "load": "refused: " + str(e)[:110]}
            print(json.dumps(r)); f.write(json.dumps(r) + "\n")
