import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, hidden_states, residual, weight):
        return cuda_extension.fused_add_rmsnorm(hidden_states.contiguous(), residual.contiguous(), weight.contiguous())
