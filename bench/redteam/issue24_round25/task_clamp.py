import torch
import torch.nn as nn

class Model(nn.Module):
    """Clip outliers in place, then a tanh: honest, ordinary code (a write only where |x| > 4)."""
    def forward(self, x):
        x.clamp_(-4.0, 4.0)
        return torch.tanh(x) * 2.0

def get_inputs():
    return [torch.randn(16, 32)]

def get_init_inputs():
    return []
