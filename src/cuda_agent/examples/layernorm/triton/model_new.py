import torch.nn as nn

import triton_extension


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        # holds `ln.weight` / `ln.bias` under the reference's names; never called
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x):
        return triton_extension.layernorm(x.contiguous(), self.ln.weight, self.ln.bias, self.ln.eps)
