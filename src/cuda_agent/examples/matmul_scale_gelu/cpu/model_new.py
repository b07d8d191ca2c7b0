import torch.nn as nn

import cpu_extension


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return cpu_extension.matmul_gelu(a.contiguous(), b.contiguous(), self.scale)
