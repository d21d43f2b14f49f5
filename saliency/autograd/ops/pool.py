"""Pooling over NCHW planes: max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d (kernels in
saliency.kernels)."""
import numpy as np

from .. import rules
from ... import kernels
from ..node import Function
from ..geometry import adaptive_pool_window, pool_window


def _check_nchw(x, op):
    if x.ndim != 4:
        raise ValueError(f"{op} expects input of shape (N, C, H, W), got {x.shape}")


class MaxPool2d(Function):
    """z = max over each window (padding is -inf; dilation and ceil_mode as PyTorch's); the gradient
    goes to the first maximum of the window, as in PyTorch."""

    __slots__ = ("x_shape", "config")
    rule = rules.WINNER

    def forward(self, x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        _check_nchw(x, "max_pool2d")
        if dilation == 1 and not ceil_mode:
            out, indices = kernels.max_pool2d_forward(x, kernel_size, stride, padding)
        else:
            out, indices = kernels.max_pool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
        # the VJP reads only the indices; the window geometry is kept for saliency.autograd.windows
        self.x_shape, self.config = x.shape, (kernel_size, stride, padding, dilation)
        self.save_for_backward(indices)
        return out

    def backward(self, g):
        return (kernels.max_pool2d_grad_input(g, self.saved[0], self.x_shape),)

    def backward_window(self, p):
        """Each output window reads the input window origin * stride - padding, (h - 1) * stride +
        (k - 1) * dilation + 1 rows; each gradient goes to its window's recorded maximum, as in `backward`."""
        kernel, stride, padding, dilation = self.config
        origins, size = p.sliding(kernel, kernel if stride is None else stride, padding, dilation)
        if p.fills(size, self.x_shape[2:]):
            return None
        dx = kernels.window.max_pool_grad(p.data, p.origins, self.saved[0], self.x_shape[3], origins, size)
        return (p.like(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box, shapes):
        return (pool_window(box, shapes[0], *self.config),)

    def name(self):
        return "MaxPool2DWithIndicesBackward0"


class AvgPool2d(Function):
    """z = sum over each window / its divisor: kernel cells by default (zero padding counted), as PyTorch's
    ceil_mode, count_include_pad and divisor_override say otherwise."""

    __slots__ = ("x_shape", "config", "options")
    rule = rules.SPLIT

    def forward(self, x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
        _check_nchw(x, "avg_pool2d")
        self.x_shape, self.config = x.shape, (kernel_size, stride, padding)
        self.options = (ceil_mode, count_include_pad, divisor_override)
        if self.options == (False, True, None):
            return kernels.avg_pool2d_forward(x, kernel_size, stride, padding)
        return kernels.avg_pool2d_forward(x, kernel_size, stride, padding, *self.options)

    def backward(self, g):
        if self.options == (False, True, None):
            return (kernels.avg_pool2d_grad_input(g, self.x_shape, *self.config),)
        return (kernels.avg_pool2d_grad_input(g, self.x_shape, *self.config, *self.options),)

    def backward_window(self, p):
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

    def window_rule(self, box, shapes):
        return (pool_window(box, shapes[0], *self.config),)

    def name(self):
        return "AvgPool2DBackward0"


def _adaptive_origins(p, tables):
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
    rule = rules.SPLIT

    def forward(self, x, *, output_size):
        _check_nchw(x, "adaptive_avg_pool2d")
        self.x_shape, self.output_size = x.shape, output_size
        return kernels.adaptive_avg_pool2d_forward(x, output_size)

    def backward(self, g):
        return (kernels.adaptive_avg_pool2d_grad_input(g, self.x_shape, self.output_size),)

    def backward_window(self, p):
        """Each output cell's gradient / its bin's size spread over its bin, on windows."""
        tables = kernels.pool.adaptive_pool2d_tables(self.x_shape, self.output_size)
        origins, size = _adaptive_origins(p, tables)
        dx = kernels.window.box_grad(p.data, p.origins, tables, origins, size)
        return (p.like(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box, shapes):
        return (adaptive_pool_window(box, shapes[0], self.out_shape),)

    def name(self):
        # PyTorch computes a 1x1 adaptive average as a mean over H and W
        return "MeanBackward1" if self.out_shape[2:] == (1, 1) else "AdaptiveAvgPool2DBackward0"


class AdaptiveMaxPool2d(Function):
    """z = max over PyTorch's adaptive bins; the gradient goes to the first maximum of each bin."""

    __slots__ = ("x_shape", "output_size")
    rule = rules.WINNER

    def forward(self, x, *, output_size):
        _check_nchw(x, "adaptive_max_pool2d")
        self.x_shape, self.output_size = x.shape, output_size
        out, indices = kernels.adaptive_max_pool2d_forward(x, output_size)
        self.save_for_backward(indices)
        return out

    def backward(self, g):
        return (kernels.max_pool2d_grad_input(g, self.saved[0], self.x_shape),)

    def backward_window(self, p):
        """Each gradient goes to its bin's recorded maximum, on the windows of the bins the output windows read."""
        origins, size = _adaptive_origins(p, kernels.pool.adaptive_pool2d_tables(self.x_shape, self.output_size))
        dx = kernels.window.max_pool_grad(p.data, p.origins, self.saved[0], self.x_shape[3], origins, size)
        return (p.like(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box, shapes):
        return (adaptive_pool_window(box, shapes[0], self.out_shape),)

    def name(self):
        return "AdaptiveMaxPool2DBackward0"
