"""`Conv2d`: 2-D cross-correlation with PyTorch's weight layout (out, in/groups, kh, kw) and initialisation."""
import numpy as np

from . import functional as F
from . import init
from .module import Module


def _pair(v, name):
    v = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(v) != 2 or not all(isinstance(e, (int, np.integer)) and e >= 0 for e in v):
        raise ValueError(f"{name} must be a non-negative int or a pair of them, got {v!r}")
    return tuple(int(e) for e in v)


class Conv2d(Module):
    """y = conv2d(x, weight, bias), x of shape (N, in_channels, H, W).

    padding: an int, a pair, 'valid' (0) or 'same' (stride 1, output as large as the input).
    Initialised as PyTorch does: kaiming_uniform_ with a=sqrt(5) for the weight, U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) for the bias, fan_in = in_channels / groups * kh * kw.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", dtype=None, generator=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode {padding_mode!r} is not supported; use 'zeros'")
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                             f"divisible by groups ({groups})")
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.dilation = _pair(dilation, "dilation")
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if self.stride != (1, 1):
                raise ValueError("padding='same' needs stride 1")
            total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            if any(t % 2 for t in total):
                raise ValueError(f"padding='same' needs an odd effective kernel size, got {self.kernel_size} "
                                 f"with dilation {self.dilation}")
            padding = tuple(t // 2 for t in total)
        self.padding = _pair(padding, "padding")
        self.padding_mode = padding_mode
        shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        init.register_weight_and_bias(self, shape, bias, dtype)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        init.default_weight_and_bias_(self.weight, self.bias, generator)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text
