"""`Conv2d`: 2-D cross-correlation with PyTorch's weight layout (out, in/groups, kh, kw) and initialisation;
`ConvTranspose2d`: its adjoint, weight layout (in, out/groups, kh, kw)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

if TYPE_CHECKING:
    from typing import Sequence

    from numpy.typing import DTypeLike

    from .._typing import Size
    from ..autograd.tensor import Tensor


def _pair(value: Size | str, name: str) -> tuple[int, ...]:
    v: tuple[Any, ...] = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(v) != 2 or not all(isinstance(e, (int, np.integer)) and e >= 0 for e in v):
        raise ValueError(f"{name} must be a non-negative int or a pair of them, got {v!r}")
    return tuple(int(e) for e in v)


class Conv2d(Module):
    """y = conv2d(x, weight, bias), x of shape (N, in_channels, H, W).

    padding: an int, a pair, 'valid' (0) or 'same' (stride 1, output as large as the input).
    Initialised as PyTorch does: kaiming_uniform_ with a=sqrt(5) for the weight, U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) for the bias, fan_in = in_channels / groups * kh * kw.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size, stride: Size = 1,
                 padding: str | Size = 0, dilation: Size = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", dtype: DTypeLike | None = None,
                 generator: np.random.Generator | None = None) -> None:
        super().__init__()
        _set_arguments(self, "", in_channels, out_channels, kernel_size, stride, dilation, groups, padding_mode)
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

    def reset_parameters(self, generator: np.random.Generator | None = None) -> None:
        """Initialise weight and bias again, in place, as PyTorch does: weight by kaiming_uniform_ with
        a=sqrt(5), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)); from `generator`, else the default one."""
        init.default_weight_and_bias_(self.weight, self.bias, generator)

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return _conv_repr(self)


class ConvTranspose2d(Module):
    """y = conv_transpose2d(x, weight, bias), x of shape (N, in_channels, H, W): the adjoint of a Conv2d
    with the same kernel, stride, padding, dilation and groups, weight of shape (in_channels,
    out_channels / groups, kh, kw). The output has (H - 1) * stride - 2 * padding + dilation * (kh - 1)
    + output_padding + 1 rows (likewise columns); `forward(input, output_size)` picks the
    output_padding that gives `output_size`.

    Initialised as PyTorch does: kaiming_uniform_ with a=sqrt(5) for the weight, U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) for the bias, with the fan of this weight layout: fan_in = out_channels / groups
    * kh * kw.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size, stride: Size = 1, padding: Size = 0,
                 output_padding: Size = 0, groups: int = 1, bias: bool = True, dilation: Size = 1,
                 padding_mode: str = "zeros", dtype: DTypeLike | None = None,
                 generator: np.random.Generator | None = None) -> None:
        super().__init__()
        _set_arguments(self, " by ConvTranspose2d", in_channels, out_channels, kernel_size, stride, dilation, groups,
                       padding_mode)
        self.padding = _pair(padding, "padding")
        self.output_padding = _pair(output_padding, "output_padding")
        self.padding_mode = padding_mode
        init.register_weight_and_bias(self, (self.in_channels, self.out_channels // self.groups) + self.kernel_size,
                                      False, dtype)
        if bias:
            self.bias = Parameter(np.empty(self.out_channels, dtype=self.weight.dtype))
        self.reset_parameters(generator)

    def reset_parameters(self, generator: np.random.Generator | None = None) -> None:
        """Initialise weight and bias again, in place, as PyTorch does: weight by kaiming_uniform_ with
        a=sqrt(5), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)); from `generator`, else the default one."""
        init.default_weight_and_bias_(self.weight, self.bias, generator)

    def _output_padding(self, input: Tensor, output_size: Sequence[int] | None) -> tuple[int, ...]:
        """self.output_padding, or the one that makes the output `output_size` ((H, W) or (N, C, H, W))."""
        if output_size is None:
            return self.output_padding
        size = tuple(int(e) for e in output_size)
        if len(size) == 4:
            size = size[2:]
        if len(size) != 2:
            raise ValueError(f"ConvTranspose2d: for {input.ndim}D input, output_size must have 2 or 4 elements "
                             f"(got {len(size)})")
        lo = tuple((n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in
                   zip(input.shape[-2:], self.stride, self.padding, self.dilation, self.kernel_size))
        hi = tuple(a + s - 1 for a, s in zip(lo, self.stride))
        if any(not a <= n <= b for n, a, b in zip(size, lo, hi)):
            raise ValueError(f"requested an output size of {list(size)}, but valid sizes range from {list(lo)} to "
                             f"{list(hi)} (for an input of {tuple(input.shape[-2:])})")
        return tuple(n - a for n, a in zip(size, lo))

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)

    def extra_repr(self) -> str:
        return _conv_repr(self)


def _set_arguments(conv: Conv2d | ConvTranspose2d, where: str, in_channels: int, out_channels: int, kernel_size: Size,
                   stride: Size, dilation: Size, groups: int, padding_mode: str) -> None:
    """Check and store the arguments both convolutions share (`where` ends the padding_mode error)."""
    if padding_mode != "zeros":
        raise ValueError(f"padding_mode {padding_mode!r} is not supported{where}; use 'zeros'")
    if groups < 1 or in_channels % groups or out_channels % groups:
        raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                         f"divisible by groups ({groups})")
    conv.in_channels, conv.out_channels, conv.groups = int(in_channels), int(out_channels), int(groups)
    conv.kernel_size = _pair(kernel_size, "kernel_size")
    conv.stride = _pair(stride, "stride")
    conv.dilation = _pair(dilation, "dilation")


def _conv_repr(conv: Conv2d | ConvTranspose2d) -> str:
    """PyTorch's extra_repr of a convolution: the arguments that differ from their defaults."""
    text = f"{conv.in_channels}, {conv.out_channels}, kernel_size={conv.kernel_size}, stride={conv.stride}"
    if conv.padding != (0, 0):
        text += f", padding={conv.padding}"
    if conv.dilation != (1, 1):
        text += f", dilation={conv.dilation}"
    if getattr(conv, "output_padding", (0, 0)) != (0, 0):
        text += f", output_padding={conv.output_padding}"
    if conv.groups != 1:
        text += f", groups={conv.groups}"
    if conv.bias is None:
        text += ", bias=False"
    return text
