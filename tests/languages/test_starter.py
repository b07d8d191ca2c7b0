"""The agent's starting model_new.py."""

from __future__ import annotations


def test_starter_renames_every_reference_to_the_class():
    from cuda_agent.languages.base import starter_model_new as _starter_model_new

    src = ("import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
           "        super(Model, self).__init__()\n    def forward(self, x):\n        return x\n")
    ns: dict = {}
    exec(_starter_model_new(src, "cpu_extension"), ns)
    assert "Model" not in ns and ns["ModelNew"]()(3) == 3
