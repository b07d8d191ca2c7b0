import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # holds `conv.weight` / `conv.bias` under the reference's names; never called
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return cuda_extension.conv2d_relu(x.contiguous(), self.conv.weight, self.conv.bias, self.conv.padding[0])
