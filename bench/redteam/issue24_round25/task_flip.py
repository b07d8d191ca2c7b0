import torch
import torch.nn as nn

class Model(nn.Module):
    """Writes its input only for some values (as the review's `if x[0, 0] > 0: x.mul_(2)`), but the write is a
    permutation (rows reversed in place): the same int32 words in another order, so `_slot_print`'s plain
    per-chunk sum before and after the forward is unchanged. Large: the trials are not held."""
    def forward(self, x):
        y = x * 2.0
        if x[0, 0] > 0:
            x.copy_(x.flip(0))
        return y

def get_inputs():
    return [torch.randn(2048, 4096)]

def get_init_inputs():
    return []
