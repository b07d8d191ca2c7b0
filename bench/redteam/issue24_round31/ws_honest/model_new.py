import torch.nn as nn

import cpu_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cpu_extension.swish(x.contiguous())
