"""Pooling over NCHW planes: max_pool2d, avg_pool2d, adaptive_avg_pool2d (kernels in saliency.kernels)."""
import numpy as np

from ... import kernels
from ..node import Function
from ..geometry import adaptive_pool_window, pool_window


def _check_nchw(x, op):
    if x.ndim != 4:
        raise ValueError(f"{op} expects input of shape (N, C, H, W), got {x.shape}")


class MaxPool2d(Function):
    """z = max over each window; the gradient goes to the first maximum of the window, as in PyTorch."""

    __slots__ = ("x_shape", "config")

    def forward(self, x, *, kernel_size, stride=None, padding=0):
        _check_nchw(x, "max_pool2d")
        out, indices = kernels.max_pool2d_forward(x, kernel_size, stride, padding)
        # the VJP reads only the indices; the window geometry is kept for saliency.autograd.windows
        self.x_shape, self.config = x.shape, (kernel_size, stride, padding)
        self.save_for_backward(indices)
        return out

    def backward(self, g):
        return (kernels.max_pool2d_grad_input(g, self.saved[0], self.x_shape),)

    def backward_window(self, p):
        """Each output window reads the input window origin * stride - padding, (h - 1) * stride + k
        rows; each gradient goes to its window's recorded maximum, as in `backward`."""
        kernel, stride, padding = self.config
        origins, size = p.sliding(kernel, kernel if stride is None else stride, padding)
        dx = kernels.window.max_pool_grad(p.data, p.origins, self.saved[0], self.x_shape[3], origins, size)
        return (p.like(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box, shapes):
        return (pool_window(box, shapes[0], *self.config),)

    def name(self):
        return "MaxPool2DWithIndicesBackward0"


class AvgPool2d(Function):
    """z = mean over each window (zero padding counted, PyTorch's default)."""

    __slots__ = ("x_shape", "config")

    def forward(self, x, *, kernel_size, stride=None, padding=0):
        _check_nchw(x, "avg_pool2d")
        self.x_shape, self.config = x.shape, (kernel_size, stride, padding)
        return kernels.avg_pool2d_forward(x, kernel_size, stride, padding)

    def backward(self, g):
        return (kernels.avg_pool2d_grad_input(g, self.x_shape, *self.config),)

    def backward_window(self, p):
        """A depthwise convolution with weights 1 / (kh * kw) (zero padding counted): its windowed input
        VJP, as Convolution's."""
        kernel, stride, padding = self.config
        stride = kernel if stride is None else stride
        origins, size = p.sliding(kernel, stride, padding)
        kh, kw = np.broadcast_to(kernel, (2,))
        c = self.x_shape[1]
        weight = np.full((c, 1, int(kh), int(kw)), 1.0 / (kh * kw), p.dtype)
        dx = kernels.conv2d_grad_input(p.data, weight, self.x_shape[:2] + size, stride, 0, 1, c)
        return (p.moved(dx, origins, self.x_shape[2:]),)

    def window_rule(self, box, shapes):
        return (pool_window(box, shapes[0], *self.config),)

    def name(self):
        return "AvgPool2DBackward0"


class AdaptiveAvgPool2d(Function):
    """z = mean over PyTorch's adaptive bins, giving an output of the requested size."""

    __slots__ = ("x_shape", "output_size")

    def forward(self, x, *, output_size):
        _check_nchw(x, "adaptive_avg_pool2d")
        self.x_shape, self.output_size = x.shape, output_size
        return kernels.adaptive_avg_pool2d_forward(x, output_size)

    def backward(self, g):
        return (kernels.adaptive_avg_pool2d_grad_input(g, self.x_shape, self.output_size),)

    def window_rule(self, box, shapes):
        return (adaptive_pool_window(box, shapes[0], self.out_shape),)

    def name(self):
        # PyTorch computes a 1x1 adaptive average as a mean over H and W
        return "MeanBackward1" if self.out_shape[2:] == (1, 1) else "AdaptiveAvgPool2DBackward0"
