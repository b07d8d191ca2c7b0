import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return cuda_extension.matmul_gelu(a.contiguous(), b.contiguous(), self.scale)
