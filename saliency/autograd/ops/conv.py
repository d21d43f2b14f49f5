"""Convolution: z = conv2d(x, w, b), NCHW cross-correlation with w (O, C/groups, kh, kw), and the
transposed convolution z = conv_transpose2d(x, w, b) with w (C, O/groups, kh, kw), its adjoint.

The heavy work runs in the Numba kernels of `saliency.kernels`. Only the VJPs that are
needed run: with frozen weights (the usual case for attribution maps) the backward is one
input-VJP kernel call, and the forward keeps no reference to x.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ... import kernels
from .. import rules
from ..errors import LayerInputError
from ..node import Function
from ..patch import Patch
from ..geometry import conv_transpose_window, conv_window, first_input, pair, upsample_conv_window

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..._typing import FloatArray, IntArray, Shape, Size
    from ..geometry import Box, Shapes

    # a gradient on its way through the windows: a Patch, a dense array, or None (no gradient)
    WindowGrad = Patch | NDArray[Any] | None
    # the gradients of a convolution's input, weight and bias, None for one that takes none
    Grads = tuple[FloatArray | None, FloatArray | None, FloatArray | None]
    # the same from a cropped VJP, one per input (two without a bias)
    WindowGrads = tuple[WindowGrad, ...]


def _frozen(needs: Sequence[bool]) -> bool:
    """True when only the input (not the weight or bias) takes a gradient: the cropped VJP applies."""
    return not any(needs[1:])


class Convolution(Function):
    """z = conv2d(x, w, b); the node is ConvolutionBackward0, as in PyTorch."""

    __slots__ = ("config", "x_shape", "w_shape")
    config: tuple[Size, Size, Size, int]  # stride, padding, dilation, groups
    x_shape: Shape
    w_shape: Shape
    rule = rules.WEIGHTS
    family = "conv"  # which of an LRP composite's weight rules it takes: "conv" or "linear"

    def forward(self, x: FloatArray, w: FloatArray, b: FloatArray | None = None, *, stride: Size = 1,
                padding: Size = 0, dilation: Size = 1, groups: int = 1) -> FloatArray:
        if x.ndim != 4:
            raise ValueError(f"conv2d expects input of shape (N, C, H, W), got {x.shape}; "
                             f"add a batch dimension with x.unsqueeze(0) for a single image")
        if w.ndim != 4:
            raise ValueError(f"conv2d expects weight of shape (out, in/groups, kh, kw), got {w.shape}")
        if x.dtype != w.dtype:
            raise TypeError(f"conv2d input has dtype {x.dtype} but weight has dtype {w.dtype}; "
                            f"convert one of them (model.to(...) or x.to(...))")
        if isinstance(groups, int) and groups >= 1 and x.shape[1] != w.shape[1] * groups:
            takes = w.shape[1] * groups
            raise LayerInputError(f"conv2d with weight of shape {w.shape}"
                                  f"{f' and groups={groups}' if groups > 1 else ''} "
                                  f"takes {takes} input channels; its input has {x.shape[1]} (shape {x.shape})",
                                  what="channels", expected=takes, got=x.shape[1], input_shape=x.shape)
        needs_x, needs_w = self.needs_input_grad[0], self.needs_input_grad[1]
        self.config = (stride, padding, dilation, groups)
        self.x_shape, self.w_shape = x.shape, w.shape
        # the input VJP reads w, the weight VJP reads x: keep only what will be read
        self.save_for_backward(w if needs_x else None, x if needs_w else None)
        return kernels.conv2d_forward(x, w, b, stride, padding, dilation, groups)

    def backward(self, g: FloatArray) -> Grads:
        w, x = self.saved
        needs = self.needs_input_grad
        dx = kernels.conv2d_grad_input(g, w, self.x_shape, *self.config) if needs[0] else None
        dw = kernels.conv2d_grad_weight(g, x, self.w_shape, *self.config) if needs[1] else None
        db = kernels.conv2d_grad_bias(g) if len(needs) > 2 and needs[2] else None
        return dx, dw, db

    def backward_window(self, p: Patch) -> WindowGrads | None:
        """Each output window reads an input window: origin * stride - padding, (h - 1) * stride +
        (k - 1) * dilation + 1 rows. The input VJP is the plain input VJP of that window (no padding);
        the weight VJP correlates each seed's window of g with its window of x (zeros outside x).
        Windows that would cover half the input map or more (`Patch.fills`) are declined: dense VJP."""
        w, x = self.saved
        needs = self.needs_input_grad
        s, pad, d, groups = self.config
        origins, size = p.sliding(self.w_shape[2:], s, pad, d)
        if p.fills(size, self.x_shape[2:]):
            return None
        dx: WindowGrad = None
        dw = db = None
        if needs[0]:
            dx = self._input_window(p, w, origins, size)
        if needs[1]:
            xw = kernels.window.gather(x, origins, size)  # (K, N, C, *size)
            dw = np.stack([kernels.conv2d_grad_weight(gk, xk, self.w_shape, s, 0, d, groups)
                           for gk, xk in zip(p.data, xw)]).reshape(p.seed_shape + self.w_shape)
        if len(needs) > 2 and needs[2]:
            db = p.data.sum(axis=(1, 3, 4)).reshape(p.seed_shape + self.w_shape[:1])
        return (dx, dw, db)[:len(needs)]

    def _input_window(self, p: Patch, w: FloatArray, origins: IntArray,
                      size: tuple[int, ...]) -> Patch | NDArray[Any]:
        s, _, d, groups = self.config
        dx = kernels.conv2d_grad_input(p.data, w, (self.x_shape[0], w.shape[1] * groups) + size, s, 0, d, groups)
        return p.moved(dx, origins, self.x_shape[2:])

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """Input 0: the rows and columns the kernel taps; weight and bias: their whole maps."""
        return first_input(lambda shape: conv_window(box, shape, self.w_shape[2:], *self.config[:3]), shapes)

    def affine(self, x: FloatArray, w: FloatArray, b: FloatArray | None) -> FloatArray:
        """This convolution (its stride, padding, ...) of x with w and b: what LRP's weight rules run
        with modified inputs and weights."""
        return kernels.conv2d_forward(x, w, b, *self.config)

    def affine_vjp(self, g: Patch | FloatArray, w: FloatArray) -> Patch | NDArray[Any]:
        """The input VJP of g (an array, or a Patch kept cropped) with the weight w (its input channels
        may differ from the op's own: see `stacks`)."""
        if isinstance(g, Patch):
            s, pad, d, _ = self.config
            origins, size = g.sliding(self.w_shape[2:], s, pad, d)
            if not g.fills(size, self.x_shape[2:]):
                return self._input_window(g, w, origins, size)
            g = g.dense()
        x_shape = (self.x_shape[0], w.shape[1] * self.config[3]) + self.x_shape[2:]
        return kernels.conv2d_grad_input(g, w, x_shape, *self.config)

    @property
    def stacks(self) -> bool:
        """Whether two (input, weight) pairs may run as one convolution with their channels side by side
        (x1 w1 + x2 w2 = [x1 x2] [w1 w2]): without groups."""
        return self.config[3] == 1

    def merged(self, w: FloatArray, b: FloatArray | None, scale: FloatArray,
               shift: FloatArray) -> tuple[FloatArray, FloatArray]:
        """w and b with a per-output-channel scale and shift after the op folded in (a batch norm)."""
        return w * scale.reshape(-1, 1, 1, 1), shift if b is None else b * scale + shift

    def affine_window(self, p: Patch, x: FloatArray, w: FloatArray) -> FloatArray | None:
        """This convolution of x with w (no bias) on the output windows of the Patch p only: (K, N, O,
        h, w), or None when the windows' inputs would cover half of x's map or more (then the dense
        `affine` costs no more). A pixel seed's weight rules then never convolve the whole map."""
        s, pad, d, groups = self.config
        origins, size = p.sliding(self.w_shape[2:], s, pad, d)
        if p.fills(size, self.x_shape[2:]):
            return None
        xw = kernels.window.gather(x, origins, size)  # (K, N, C, *size), zeros outside x (the padding)
        z = kernels.conv2d_forward(xw.reshape((-1,) + xw.shape[2:]), w, None, s, 0, d, groups)
        return z.reshape(xw.shape[:2] + z.shape[1:])

    def name(self) -> str:
        return "ConvolutionBackward0"


def conv_transpose_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                        output_padding: int) -> int:
    """The output length of a transposed convolution along one axis:
    (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


class ConvolutionTranspose(Function):
    """z = conv_transpose2d(x, w, b): input cell j of x adds x[j] * w[k] into output cell
    j * stride - padding + k * dilation (per axis), w of shape (C, O/groups, kh, kw). This is the
    input VJP of conv2d(z, w) (same stride, padding, dilation and groups), and the kernels of that
    VJP compute it: output_padding only adds rows and columns at the end of z, which the
    convolution's arithmetic maps back to a few extra zero rows of x when output_padding >= stride
    (allowed when it is smaller than the dilation). Its input VJP is the convolution conv2d(g, w);
    its weight VJP is the convolution's weight VJP with x as the cotangent and g as the input. The
    node is ConvolutionBackward0, as in PyTorch."""

    __slots__ = ("config", "x_shape", "w_shape", "extra")
    # stride, padding, dilation (each a (rows, cols) pair), groups
    config: tuple[tuple[int, int], tuple[int, int], tuple[int, int], int]
    x_shape: Shape
    w_shape: Shape
    extra: tuple[int, ...]
    rule = rules.WEIGHTS
    family = "conv"

    def forward(self, x: FloatArray, w: FloatArray, b: FloatArray | None = None, *, stride: Size = 1,
                padding: Size = 0, output_padding: Size = 0, groups: int = 1, dilation: Size = 1) -> FloatArray:
        if x.ndim != 4:
            raise ValueError(f"conv_transpose2d expects input of shape (N, C, H, W), got {x.shape}; "
                             f"add a batch dimension with x.unsqueeze(0) for a single image")
        if w.ndim != 4:
            raise ValueError(f"conv_transpose2d expects weight of shape (in, out/groups, kh, kw), got {w.shape}")
        if x.dtype != w.dtype:
            raise TypeError(f"conv_transpose2d input has dtype {x.dtype} but weight has dtype {w.dtype}; "
                            f"convert one of them (model.to(...) or x.to(...))")
        s, p, op, d = pair(stride), pair(padding), pair(output_padding), pair(dilation)
        if min(s) < 1 or min(d) < 1 or min(p) < 0 or min(op) < 0:
            raise ValueError(f"conv_transpose2d needs stride >= 1, dilation >= 1, padding >= 0 and output_padding "
                             f">= 0, got stride={s}, dilation={d}, padding={p}, output_padding={op}")
        if any(o >= si and o >= di for o, si, di in zip(op, s, d)):
            raise ValueError(f"conv_transpose2d output_padding must be smaller than either stride or dilation, "
                             f"got output_padding={op}, stride={s}, dilation={d}")
        if not isinstance(groups, (int, np.integer)) or groups < 1 or w.shape[0] % groups:
            raise ValueError(f"conv_transpose2d groups={groups!r} must be a positive int dividing the weight's "
                             f"{w.shape[0]} input channels (weight shape {w.shape})")
        if x.shape[1] != w.shape[0]:
            raise LayerInputError(f"conv_transpose2d with weight of shape {w.shape} takes {w.shape[0]} input "
                                  f"channels; its input has {x.shape[1]} (shape {x.shape})",
                                  what="channels", expected=w.shape[0], got=x.shape[1], input_shape=x.shape)
        n, c, h, wd = x.shape
        size = tuple(conv_transpose_size(e, k, *a) for e, k, a in zip((h, wd), w.shape[2:], zip(s, p, d, op)))
        if min(size) < 1:
            raise ValueError(f"conv_transpose2d output would be empty ({size[0]}x{size[1]}): input {h}x{wd}, "
                             f"kernel {w.shape[2]}x{w.shape[3]}, stride {s}, padding {p}, dilation {d}, "
                             f"output_padding {op}; use less padding")
        if b is not None and b.shape != (w.shape[1] * groups,):
            raise ValueError(f"conv_transpose2d bias must have shape ({w.shape[1] * groups},), one per output "
                             f"channel, got {b.shape}")
        needs_x, needs_w = self.needs_input_grad[0], self.needs_input_grad[1]
        self.config = (s, p, d, groups)
        self.x_shape, self.w_shape = x.shape, w.shape
        # output_padding >= stride: the convolution of z reaches past x by these rows and columns (zeros)
        self.extra = tuple(o // si for o, si in zip(op, s))
        self.save_for_backward(w if needs_x else None, x if needs_w else None)
        z = kernels.conv2d_grad_input(self._padded(x), w, (n, w.shape[1] * groups) + size, *self.config)
        if b is not None:
            z += b.reshape(-1, 1, 1)
        return z

    def _padded(self, x: FloatArray) -> FloatArray:
        """x with the zero rows and columns that output_padding >= stride adds at its end (K, N, C, H, W)
        or (N, C, H, W)."""
        if not any(self.extra):
            return x
        widths = [(0, 0)] * (x.ndim - 2) + [(0, self.extra[0]), (0, self.extra[1])]
        return np.pad(x, widths)

    def _input_vjp(self, g: FloatArray, w: FloatArray) -> FloatArray:
        nb = self.seed_ndim(g)
        h, wd = self.x_shape[2:]
        dx = kernels.conv2d_forward(g.reshape((-1,) + g.shape[nb + 1:]), w, None, *self.config)
        return np.ascontiguousarray(dx[..., :h, :wd]).reshape(g.shape[:nb] + self.x_shape)

    def backward(self, g: FloatArray) -> Grads:
        w, x = self.saved
        needs = self.needs_input_grad
        nb = self.seed_ndim(g)
        dx = dw = db = None
        if needs[0]:
            dx = self._input_vjp(g, w)
        if needs[1]:
            xp = self._padded(x)
            dw = np.stack([kernels.conv2d_grad_weight(xp, gk, self.w_shape, *self.config)
                           for gk in g.reshape((-1,) + g.shape[nb:])]).reshape(g.shape[:nb] + self.w_shape)
        if len(needs) > 2 and needs[2]:
            db = kernels.conv2d_grad_bias(g)
        return dx, dw, db

    def backward_window(self, p: Patch) -> WindowGrads | None:
        """Per axis, a window of g at origin o with h rows reaches the inputs a = ceil((o + padding -
        (k - 1) * dilation) / stride) .. floor((o + h - 1 + padding) / stride): m rows (the largest
        over the seeds). The input VJP is the plain convolution (no padding) of a buffer of g holding
        the rows a * stride - padding .. (a + m - 1) * stride - padding + (k - 1) * dilation, each
        seed's window placed in it; the weight VJP correlates each seed's window of x (zeros outside
        x) with its buffer. Windows that would cover half the input map or more are declined."""
        w, x = self.saved
        return self._window_vjp(p, w, x, self.needs_input_grad)

    def _window_vjp(self, p: Patch, w: FloatArray | None, x: FloatArray | None,
                    needs: Sequence[bool]) -> WindowGrads | None:
        s, pad, d, groups = self.config
        K = len(p.origins)
        starts, m, length = [], [], []
        for axis in range(2):
            o, h, k = p.origins[:, axis], p.size[axis], self.w_shape[2 + axis]
            a = -((-(o + pad[axis] - (k - 1) * d[axis])) // s[axis])
            b = (o + h - 1 + pad[axis]) // s[axis]
            starts.append(a)
            m.append(max(int((b - a).max()) + 1, 1))
            length.append((m[-1] - 1) * s[axis] + (k - 1) * d[axis] + 1)
        if p.fills(m, self.x_shape[2:]):
            return None
        origins = np.stack(starts, axis=1).astype(np.int64)
        buf = np.zeros((K,) + p.lead + tuple(length), p.dtype)
        kernels.window.add_into(buf, p.data, p.origins - (origins * np.array(s) - np.array(pad)))
        dx: WindowGrad = None
        dw = db = None
        if needs[0]:
            assert w is not None  # (saved for the input's gradient)
            dx = kernels.conv2d_forward(buf.reshape((-1,) + buf.shape[2:]), w, None, s, 0, d, groups)
            dx = p.moved(dx.reshape((K, self.x_shape[0], self.x_shape[1]) + tuple(m)), origins, self.x_shape[2:])
        if needs[1]:
            assert x is not None  # (saved for the weight's gradient)
            xw = kernels.window.gather(x, origins, tuple(m))  # (K, N, C, *m)
            dw = np.stack([kernels.conv2d_grad_weight(xk, bk, self.w_shape, s, 0, d, groups)
                           for xk, bk in zip(xw, buf)]).reshape(p.seed_shape + self.w_shape)
        if len(needs) > 2 and needs[2]:
            db = p.data.sum(axis=(1, 3, 4)).reshape(p.seed_shape + (self.w_shape[1] * groups,))
        return (dx, dw, db)[:len(needs)]

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """Input 0: the cells whose taps land in the box; weight and bias: their whole maps."""
        s, p, d, _ = self.config
        return first_input(lambda shape: conv_transpose_window(box, shape, self.w_shape[2:], s, p, d), shapes)

    def affine(self, x: FloatArray, w: FloatArray, b: FloatArray | None) -> FloatArray:
        """This transposed convolution of x with w and b (see Convolution.affine)."""
        n = x.shape[0]
        z = kernels.conv2d_grad_input(self._padded(x), w, (n,) + self.out_shape[1:], *self.config)
        if b is not None:
            z += b.reshape(-1, 1, 1)
        return z

    def affine_vjp(self, g: Patch | FloatArray, w: FloatArray) -> Patch | NDArray[Any]:
        """The input VJP of g (an array, or a Patch kept cropped) with the weight w."""
        if isinstance(g, Patch):
            dx = self._window_vjp(g, w, None, (True, False))
            if dx is not None:
                assert dx[0] is not None  # (the input's gradient, asked for)
                return dx[0]
            g = g.dense()
        return self._input_vjp(g, w)

    def merged(self, w: FloatArray, b: FloatArray | None, scale: FloatArray,
               shift: FloatArray) -> tuple[FloatArray, FloatArray]:
        """w (C, O/groups, kh, kw) and b with a per-output-channel scale and shift folded in."""
        groups = self.config[3]
        c, o = w.shape[:2]
        w = (w.reshape(groups, c // groups, o, *w.shape[2:]) * scale.reshape(groups, 1, o, 1, 1)).reshape(w.shape)
        return w, shift if b is None else b * scale + shift

    def name(self) -> str:
        return "ConvolutionBackward0"


class UpsampleConvolution(Function):
    """z = conv2d(upsample_nearest(x, scale), w, b, padding=1) for a 3x3 kernel, computed as a
    sub-pixel convolution: each of the scale x scale output phases is a 2x2 convolution of the
    low-resolution x (4/9 of the FLOPs, and the upsampled image is never built). PyTorch has no
    such node; `saliency.nn.Sequential` uses it for an Upsample(nearest) followed by such a Conv2d."""

    __slots__ = ("scale", "x_shape", "w_shape")
    scale: int
    x_shape: Shape
    w_shape: Shape
    rule = rules.WEIGHTS
    family = "conv"

    def forward(self, x: FloatArray, w: FloatArray, b: FloatArray | None = None, *, scale: int = 2) -> FloatArray:
        if x.ndim != 4 or w.shape[2:] != (3, 3):
            raise ValueError(f"upsample_conv2d expects input (N, C, H, W) and a 3x3 weight, got {x.shape} and "
                             f"{w.shape}")
        if x.dtype != w.dtype:
            raise TypeError(f"upsample_conv2d input has dtype {x.dtype} but weight has dtype {w.dtype}")
        needs_x, needs_w = self.needs_input_grad[0], self.needs_input_grad[1]
        self.scale, self.x_shape, self.w_shape = scale, x.shape, w.shape
        self.save_for_backward(w if needs_x else None, x if needs_w else None)
        return kernels.upsample_conv2d_forward(x, w, b, scale)

    def backward(self, g: FloatArray) -> Grads:
        w, x = self.saved
        needs = self.needs_input_grad
        dx = kernels.upsample_conv2d_grad_input(g, w, self.x_shape, self.scale) if needs[0] else None
        dw = kernels.upsample_conv2d_grad_weight(g, x, self.w_shape, self.scale) if needs[1] else None
        db = kernels.conv2d_grad_bias(g) if len(needs) > 2 and needs[2] else None
        return dx, dw, db

    def backward_window(self, p: Patch) -> WindowGrads | None:
        """The 3x3 convolution's VJP on the window of the upsampled map (as Convolution's), then the
        nearest upsampling's adjoint from that window to the input window it reads."""
        needs = self.needs_input_grad
        if not _frozen(needs):
            return None
        return (self._input_window(p, self.saved[0]),) + (None,) * (len(needs) - 1)

    def _input_window(self, p: Patch, weight: FloatArray) -> Patch | NDArray[Any]:
        (h, w), s = p.size, self.scale
        n, c, H, W = self.x_shape
        du = kernels.conv2d_grad_input(p.data, weight, (n, c, h + 2, w + 2), 1, 0, 1, 1)
        up = p.moved(du, p.origins - 1, (H * s, W * s))
        if not isinstance(up, Patch):
            return kernels.upsample_nearest2d_grad_input(up, self.x_shape, s)
        dx, origins = kernels.window.nearest_grad(up.data, up.origins, s)
        return p.like(dx, origins, (H, W))

    def window_rule(self, box: Box, shapes: Shapes) -> tuple[Box | None, ...]:
        """Input 0: the 3x3 taps on the upsampled map, then the nearest upsampling's sources."""
        return first_input(lambda shape: upsample_conv_window(box, shape, self.scale), shapes)

    def affine(self, x: FloatArray, w: FloatArray, b: FloatArray | None) -> FloatArray:
        """This sub-pixel convolution of x with w and b (see Convolution.affine)."""
        return kernels.upsample_conv2d_forward(x, w, b, self.scale)

    def affine_vjp(self, g: Patch | FloatArray, w: FloatArray) -> Patch | NDArray[Any]:
        """The input VJP of g (an array, or a Patch kept cropped) with the weight w."""
        if isinstance(g, Patch):
            return self._input_window(g, w)
        return kernels.upsample_conv2d_grad_input(g, w, self.x_shape, self.scale)

    def merged(self, w: FloatArray, b: FloatArray | None, scale: FloatArray,
               shift: FloatArray) -> tuple[FloatArray, FloatArray]:
        """w and b with a per-output-channel scale and shift folded in."""
        return w * scale.reshape(-1, 1, 1, 1), shift if b is None else b * scale + shift
