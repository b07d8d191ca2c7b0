import torch.nn as nn

import triton_extension


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return triton_extension.sum_dim(x.contiguous(), self.dim)
