import torch.nn as nn

import cpu_extension


class ModelNew(nn.Module):
    def __init__(self, d_model: int, d_hidden: int):
        super().__init__()
        # hold the parameters under the reference's names; never called
        self.norm = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        return cpu_extension.mlp_block(
            x.contiguous(), self.norm.weight, self.norm.bias, self.norm.eps,
            self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias,
        )
