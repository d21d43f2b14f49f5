"""Pooling over NCHW planes: max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d (kernels in
saliency.kernels)."""
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .. import rules
from ... import kernels
from ..._typing import FloatArray, IntArray, Shape, Size
from ..node import Function
from ..geometry import Box, Shapes, adaptive_pool_window, pool_window
from ..patch import Patch

if TYPE_CHECKING:
    from ...kernels.pool import Tables


def _check_nchw(x: NDArray[Any], op: str) -> None:
    if x.ndim != 4:
        raise ValueError(f"{op} expects input of shape (N, C, H, W), got {x.shape}")


class MaxPool2d(Function):
    """z = max over each window (padding is -inf; dilation and ceil_mode as PyTorch's); the gradient
    goes to the first maximum of the window, as in PyTorch."""

    __slots__ = ("x_shape", "config")
    x_shape: Shape
    config: tuple[Size, Size | None, Size, Size]  # kernel_size, stride, padding, dilation
    rule = rules.WINNER

    def forward(self, x: FloatArray, *, kernel_size: Size, stride: Size | None = None, padding: Size = 0,
                dilation: Size = 1, ceil_mode: bool = False) -> FloatArray:
        _check_nchw(x, "max_pool2d")
        if dilation == 1 and not ceil_mode:
            out, indices = kernels.max_pool2d_forward(x, kernel_size, stride, padding)
        else:
            out, indices = kernels.max_pool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
        # the VJP reads only the indices; the window geometry is kept for saliency.autograd.windows
        self.x_shape, self.config = x.shape, (kernel_size, stride, padding, dilation)
        self.save_for_backward(indices)
        return out

    def backward(self, g: FloatArray) -> tuple[FloatArray]:
        return (kernels.max_pool2d_grad_input(g, self.saved[0], self.x_shape),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        """Each output window reads the input window origin * stride - padding, (h - 1) * stride +
        (k - 1) * dilation + 1 rows; each gradient goes to its window's recorded maximum, as in `backward`."""
        kernel, stride, padding, dilation = self.config
        origins, size = p.sliding(kernel, kernel if stride is None else stride, padding, dilation)
        if p.fills(size, self.x_shape[2:]):
            return None
        dx = kernels.window.max_pool_grad(p.data, p.origins, self.saved[0], self.x_shape[3], origins, size)
        return (p.like(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None]:
        assert shapes[0] is not None  # the op's one input, which the gradient reaches
        return (pool_window(box, shapes[0], *self.config),)

    def name(self) -> str:
        return "MaxPool2DWithIndicesBackward0"


class AvgPool2d(Function):
    """z = sum over each window / its divisor: kernel cells by default (zero padding counted), as PyTorch's
    ceil_mode, count_include_pad and divisor_override say otherwise."""

    __slots__ = ("x_shape", "config", "options")
    x_shape: Shape
    config: tuple[Size, Size | None, Size]  # kernel_size, stride, padding
    options: tuple[bool, bool, float | None]  # ceil_mode, count_include_pad, divisor_override
    rule = rules.SPLIT

    def forward(self, x: FloatArray, *, kernel_size: Size, stride: Size | None = None, padding: Size = 0,
                ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: float | None = None) -> FloatArray:
        _check_nchw(x, "avg_pool2d")
        self.x_shape, self.config = x.shape, (kernel_size, stride, padding)
        self.options = (ceil_mode, count_include_pad, divisor_override)
        if self.options == (False, True, None):
            return kernels.avg_pool2d_forward(x, kernel_size, stride, padding)
        return kernels.avg_pool2d_forward(x, kernel_size, stride, padding, *self.options)

    def backward(self, g: FloatArray) -> tuple[FloatArray]:
        if self.options == (False, True, None):
            return (kernels.avg_pool2d_grad_input(g, self.x_shape, *self.config),)
        return (kernels.avg_pool2d_grad_input(g, self.x_shape, *self.config, *self.options),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]] | None:
        """By default a depthwise convolution with weights 1 / (kh * kw) (zero padding counted): its windowed
        input VJP, as Convolution's. Otherwise each output cell's gradient / its divisor spread over its
        window (clipped to the input)."""
        kernel, stride, padding = self.config
        stride = kernel if stride is None else stride
        origins, size = p.sliding(kernel, stride, padding)
        if p.fills(size, self.x_shape[2:]):
            return None
        if self.options != (False, True, None):
            tables = kernels.pool.avg_pool2d_tables(self.x_shape, kernel, stride, padding, *self.options)
            dx = kernels.window.box_grad(p.data, p.origins, tables, origins, size)
            return (p.like(dx, origins, self.x_shape[2:]),)
        kh, kw = np.broadcast_to(kernel, (2,))
        c = self.x_shape[1]
        weight = np.full((c, 1, int(kh), int(kw)), 1.0 / (kh * kw), p.dtype)
        dx = kernels.conv2d_grad_input(p.data, weight, self.x_shape[:2] + size, stride, 0, 1, c)
        return (p.moved(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None]:
        assert shapes[0] is not None  # the op's one input, which the gradient reaches
        return (pool_window(box, shapes[0], *self.config),)

    def name(self) -> str:
        return "AvgPool2DBackward0"


def _adaptive_origins(p: Patch, tables: "Tables") -> tuple[IntArray, tuple[int, int]]:
    """(origins, size) of the input windows that adaptive pooling's output windows read: from the bin
    of each window's first row / column inside the map to the end of its last one's."""
    y0, y1, x0, x1, div = tables
    out = []
    for axis, (lo_t, hi_t) in enumerate(((y0, y1), (x0, x1))):
        n_out, extent = div.shape[axis], p.size[axis]
        first = np.clip(p.origins[:, axis], 0, n_out - 1)
        last = np.clip(p.origins[:, axis] + extent - 1, 0, n_out - 1)
        out.append((lo_t[first], int((hi_t[last] - lo_t[first]).max())))
    return np.stack([out[0][0], out[1][0]], axis=1).astype(np.int64), (out[0][1], out[1][1])


class AdaptiveAvgPool2d(Function):
    """z = mean over PyTorch's adaptive bins, giving an output of the requested size."""

    __slots__ = ("x_shape", "output_size")
    x_shape: Shape
    output_size: Size
    rule = rules.SPLIT

    def forward(self, x: FloatArray, *, output_size: Size) -> FloatArray:
        _check_nchw(x, "adaptive_avg_pool2d")
        self.x_shape, self.output_size = x.shape, output_size
        return kernels.adaptive_avg_pool2d_forward(x, output_size)

    def backward(self, g: FloatArray) -> tuple[FloatArray]:
        return (kernels.adaptive_avg_pool2d_grad_input(g, self.x_shape, self.output_size),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]]:
        """Each output cell's gradient / its bin's size spread over its bin, on windows."""
        tables = kernels.pool.adaptive_pool2d_tables(self.x_shape, self.output_size)
        origins, size = _adaptive_origins(p, tables)
        dx = kernels.window.box_grad(p.data, p.origins, tables, origins, size)
        return (p.like(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None]:
        assert shapes[0] is not None  # the op's one input, which the gradient reaches
        return (adaptive_pool_window(box, shapes[0], self.out_shape),)

    def name(self) -> str:
        # PyTorch computes a 1x1 adaptive average as a mean over H and W
        return "MeanBackward1" if self.out_shape[2:] == (1, 1) else "AdaptiveAvgPool2DBackward0"


class AdaptiveMaxPool2d(Function):
    """z = max over PyTorch's adaptive bins; the gradient goes to the first maximum of each bin."""

    __slots__ = ("x_shape", "output_size")
    x_shape: Shape
    output_size: Size
    rule = rules.WINNER

    def forward(self, x: FloatArray, *, output_size: Size) -> FloatArray:
        _check_nchw(x, "adaptive_max_pool2d")
        self.x_shape, self.output_size = x.shape, output_size
        out, indices = kernels.adaptive_max_pool2d_forward(x, output_size)
        self.save_for_backward(indices)
        return out

    def backward(self, g: FloatArray) -> tuple[FloatArray]:
        return (kernels.max_pool2d_grad_input(g, self.saved[0], self.x_shape),)

    def backward_window(self, p: Patch) -> tuple[Patch | NDArray[Any]]:
        """Each gradient goes to its bin's recorded maximum, on the windows of the bins the output windows read."""
        origins, size = _adaptive_origins(p, kernels.pool.adaptive_pool2d_tables(self.x_shape, self.output_size))
        dx = kernels.window.max_pool_grad(p.data, p.origins, self.saved[0], self.x_shape[3], origins, size)
        return (p.like(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None]:
        assert shapes[0] is not None  # the op's one input, which the gradient reaches
        return (adaptive_pool_window(box, shapes[0], self.out_shape),)

    def name(self) -> str:
        return "AdaptiveMaxPool2DBackward0"
