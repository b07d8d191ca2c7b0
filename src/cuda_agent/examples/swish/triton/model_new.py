import torch.nn as nn

import triton_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return triton_extension.swish(x.contiguous())
