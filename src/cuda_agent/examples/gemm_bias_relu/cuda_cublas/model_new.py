import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # holds `linear.weight` / `linear.bias` under the reference's names; never called
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return cuda_extension.linear_relu(x.contiguous(), self.linear.weight, self.linear.bias)
