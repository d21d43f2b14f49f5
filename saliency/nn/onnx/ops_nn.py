"""Converters of the layers: convolutions, Gemm/MatMul, normalisations, pooling, activations.

A layer with weights becomes this engine's layer (`Conv2d`, `ConvTranspose2d`, `Linear`,
`BatchNorm2d`, ...) holding the node's constant inputs as its parameters, so that Grad-CAM finds
the last Conv2d, hooks see the layer and the rule-based methods its weights. ONNX's asymmetric and
SAME pads are a pad before the layer.
"""
import math
from typing import Any, Callable, TypeVar, overload

import numpy as np
from numpy.typing import DTypeLike, NDArray

from ...autograd.tensor import Tensor
from .. import functional as F
from ..activation import ELU, GELU, Hardsigmoid, Hardswish, LeakyReLU, ReLU, Sigmoid, Softplus, Tanh
from ..batchnorm import BatchNorm2d
from ..conv import Conv2d, ConvTranspose2d
from ..linear import Linear
from ..parameter import Parameter
from ..pooling import MaxPool2d
from ..module import Module
from .reader import Node, OnnxError
from .registry import Known, Op, Value, as_tensor, const, converter, first_tensor

_Pair = tuple[int, ...]  # a 2-D layer's kernel, strides or dilations (rows, columns), as the node gives them


def _weight(node: Node, known: Known, k: int, what: str) -> NDArray[Any] | None:
    """The node's constant input k (a weight), or OnnxError."""
    name = node.inputs[k] if k < len(node.inputs) else ""
    if not name:
        return None
    if name not in known:
        raise OnnxError(f"{node.where()} ({node.op_type}): its {what} ({name!r}) depends on the image; this engine "
                        f"needs a layer's weights constant")
    return np.asarray(known[name])


@overload
def _param(a: NDArray[Any], dtype: DTypeLike = ...) -> Parameter: ...


@overload
def _param(a: None, dtype: DTypeLike = ...) -> None: ...


def _param(a: NDArray[Any] | None, dtype: DTypeLike = np.float32) -> Parameter | None:
    return None if a is None else Parameter(np.ascontiguousarray(a, dtype), requires_grad=False)


def _spatial(node: Node, x_rank: int = 4) -> None:
    if x_rank != 4:
        raise OnnxError(f"{node.where()} ({node.op_type}) on a {x_rank}-D input: this engine runs 2-D layers on "
                        f"(N, C, H, W)")


def _same_pads(size: int, kernel: int, stride: int, dilation: int, upper: bool) -> tuple[int, int]:
    """SAME_UPPER / SAME_LOWER pads (begin, end) of one axis."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    small, big = total // 2, total - total // 2
    return (small, big) if upper else (big, small)


class _Padded:
    """ONNX's pads of a 2-D layer: `layer` (rows, columns) the symmetric ones the layer takes
    itself; the others (asymmetric, more than a pool takes, SAME) padded by `before(x)`."""

    layer: tuple[int, int]
    extra: list[int] | None  # (top, left, bottom, right) padded by `before`, or None

    def __init__(self, node: Node, kernel: _Pair, stride: _Pair, dilation: _Pair, pool: bool = False) -> None:
        auto = node.attrs.get("auto_pad", "NOTSET")
        if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            raise OnnxError(f"{node.where()}: auto_pad {auto!r} is not one ONNX defines")
        pads = [int(p) for p in node.attrs.get("pads", [0, 0, 0, 0])] if auto == "NOTSET" else [0, 0, 0, 0]
        if len(pads) != 4:
            raise OnnxError(f"{node.where()} ({node.op_type}): pads {pads} are not those of a 2-D layer")
        self.same = auto.startswith("SAME") and auto[len("SAME_"):]
        self.kernel, self.stride, self.dilation = kernel, stride, dilation
        t, l, b, r = pads
        takes = t == b and l == r and not (pool and (2 * t > kernel[0] or 2 * l > kernel[1]))
        self.layer, self.extra = ((t, l), None) if takes else ((0, 0), pads)

    def before(self, x: Tensor, value: float = 0.0) -> Tensor:
        """x padded with what the layer does not pad itself."""
        if self.same:
            (t, b), (l, r) = (_same_pads(x.shape[2 + i], self.kernel[i], self.stride[i], self.dilation[i],
                                         self.same == "UPPER") for i in range(2))
        elif self.extra is not None:
            t, l, b, r = self.extra
        else:
            return x
        return x if t == b == l == r == 0 else F.pad(x, (l, r, t, b), value=value)

    def after(self, y: Tensor, x: Tensor, ceil: int) -> Tensor:
        """A pool's output `y` on `before(x)` in ceil mode cut to ONNX's size: no window starting in the
        end padding that `before` made part of the input."""
        if not ceil or self.extra is None:
            return y
        t, l, b, r = self.extra
        size = []
        for i, (begin, end) in enumerate(((t, b), (l, r))):
            span = x.shape[2 + i] + begin + end - (self.kernel[i] - 1) * self.dilation[i] - 1
            n = -(-span // self.stride[i]) + 1
            size.append(n - 1 if (n - 1) * self.stride[i] >= x.shape[2 + i] + begin else n)
        return y[:, :, :size[0], :size[1]]


def _two_d(x: Value, op_type: str) -> None:
    if x.ndim != 4:
        raise OnnxError(f"a {op_type} node on a {x.ndim}-D input: this engine runs 2-D layers on (N, C, H, W)")


def _convolution(node: Node, known: Known) -> tuple[NDArray[Any], NDArray[Any] | None, int, _Pair, _Pair, _Pair]:
    """(weight, bias or None, groups, kernel, strides, dilations) of a Conv or ConvTranspose node."""
    w = _weight(node, known, 1, "weight")
    if w is None:
        raise OnnxError(f"{node.where()} ({node.op_type}) has no weight input, which ONNX requires")
    if w.ndim != 4:
        raise OnnxError(f"{node.where()} ({node.op_type}) has a {w.ndim - 2}-D kernel; this engine runs 2-D "
                        f"convolutions")
    a = node.attrs
    return (w, _weight(node, known, 2, "bias"), int(a.get("group", 1)), tuple(a.get("kernel_shape", w.shape[2:])),
            tuple(a.get("strides", (1, 1))), tuple(a.get("dilations", (1, 1))))


class OnnxConv(Conv2d):
    """A Conv node: Conv2d with ONNX's pads."""

    onnx_inputs = (0,)

    def __init__(self, node: Node, known: Known) -> None:
        w, b, groups, kernel, stride, dilation = _convolution(node, known)
        self.onnx_pads = _Padded(node, kernel, stride, dilation)
        super().__init__(w.shape[1] * groups, w.shape[0], kernel, stride, self.onnx_pads.layer, dilation, groups,
                         bias=b is not None)
        self.weight = _param(w)
        if b is not None:
            self.bias = _param(b)

    def forward(self, x: Tensor) -> Tensor:
        _two_d(x, "Conv")
        return super().forward(self.onnx_pads.before(x))


@converter("Conv", 1, 11, 22)
def conv(node: Node, known: Known) -> OnnxConv:
    return OnnxConv(node, known)


class OnnxConvTranspose(ConvTranspose2d):
    """A ConvTranspose node: ConvTranspose2d, or (asymmetric pads, output_shape, SAME) the full
    transposed convolution cropped as ONNX says, its bias added after."""

    onnx_inputs = (0,)

    def __init__(self, node: Node, known: Known) -> None:
        w, b, groups, kernel, stride, dilation = _convolution(node, known)
        a = node.attrs
        self.auto = a.get("auto_pad", "NOTSET")
        self.onnx_output_shape = a.get("output_shape")
        self.pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])] if self.auto == "NOTSET" else [0, 0, 0, 0]
        self.out_pad = tuple(int(p) for p in a.get("output_padding", (0, 0)))
        t, l, bo, r = self.pads
        self.plain = self.auto in ("NOTSET", "VALID") and self.onnx_output_shape is None and t == bo and l == r \
            and all(op < max(s, d) for op, s, d in zip(self.out_pad, stride, dilation))
        super().__init__(w.shape[0], w.shape[1] * groups, kernel, stride, (t, l) if self.plain else 0,
                         self.out_pad if self.plain else 0, groups, bias=b is not None, dilation=dilation)
        self.weight = _param(w)
        if b is not None:
            self.bias = _param(b)

    def forward(self, x: Tensor) -> Tensor:  # type: ignore[override]  # no output_size: ONNX's attributes say it
        _two_d(x, "ConvTranspose")
        if self.plain:
            return super().forward(x)
        y = F.conv_transpose2d(x, self.weight, None, self.stride, 0, 0, self.groups, self.dilation)
        full = [y.shape[2 + i] + self.out_pad[i] for i in range(2)]
        if self.onnx_output_shape is not None or self.auto.startswith("SAME"):
            want = (list(self.onnx_output_shape)[-2:] if self.onnx_output_shape is not None
                    else [x.shape[2 + i] * self.stride[i] for i in range(2)])
            cut = [f - w for f, w in zip(full, want)]  # negative: zeros added, as an output_padding would
            if any(-c >= max(s, d) for c, s, d in zip(cut, self.stride, self.dilation)):
                raise OnnxError(f"a ConvTranspose node's output_shape {want} is larger than its input gives {full} "
                                f"by a stride or more")
            begin = [c // 2 if self.auto == "SAME_UPPER" else c - c // 2 for c in cut]
            end = [c - s for c, s in zip(cut, begin)]
        else:
            begin, end = [self.pads[0], self.pads[1]], [self.pads[2], self.pads[3]]
        grow = [max(0, -p) for p in begin + end]
        if any(self.out_pad) or any(grow):
            y = F.pad(y, (grow[1], self.out_pad[1] + grow[3], grow[0], self.out_pad[0] + grow[2]))
        t, l, b, r = (max(0, p) for p in begin + end)
        y = y[:, :, t:y.shape[2] - b, l:y.shape[3] - r]
        return y if self.bias is None else y + self.bias.reshape(1, -1, 1, 1)


@converter("ConvTranspose", 1, 11, 22)
def conv_transpose(node: Node, known: Known) -> OnnxConvTranspose:
    return OnnxConvTranspose(node, known)


class OnnxLinear(Linear):
    """A Gemm node (alpha A' B' + beta C with B constant) or a MatMul by a constant matrix: Linear."""

    onnx_inputs = (0,)

    def __init__(self, weight: NDArray[Any], bias: NDArray[Any] | None, transpose_input: bool = False) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias=bias is not None)
        self.weight = _param(weight)
        if bias is not None:
            self.bias = _param(bias)
        self.transpose_input = transpose_input

    def forward(self, x: Value) -> Tensor:
        x = as_tensor(x, self.weight)
        return super().forward(x.t() if self.transpose_input else x)


@converter("Gemm", 9, 11, 13)
def gemm(node: Node, known: Known) -> Module:
    a = node.attrs
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    trans_a, trans_b = int(a.get("transA", 0)), int(a.get("transB", 0))
    c_name = node.inputs[2] if len(node.inputs) > 2 else ""
    if node.inputs[1] in known and (not c_name or c_name in known):
        w = _weight(node, known, 1, "B")
        assert w is not None  # node.inputs[1] is in known
        weight = w if trans_b else w.T  # (out, in), as Linear holds it
        c = known.get(c_name) if c_name else None
        if c is None or c.ndim <= 1 or c.shape[0] == 1:  # a bias: the same for every row
            bias = None if c is None else np.broadcast_to(c.reshape(-1) * beta, (weight.shape[0],)).copy()
            return OnnxLinear(np.ascontiguousarray(weight * alpha if alpha != 1.0 else weight), bias, bool(trans_a))

    def run(x: Value, w: Value, c: Value = None) -> Value:
        like = first_tensor(x, w, c)
        if like is None:
            y = alpha * ((x.T if trans_a else x) @ (w.T if trans_b else w))
            return y if c is None else y + beta * c
        x, w = as_tensor(x, like), as_tensor(w, like)
        y = (x.t() if trans_a else x).matmul(w.t() if trans_b else w)
        y = y * alpha if alpha != 1.0 else y
        return y if c is None else y + as_tensor(c, like) * beta
    return Op(node, run, known)


@converter("MatMul", 1, 9, 13)
def matmul(node: Node, known: Known) -> Module:
    if node.inputs[1] in known and node.inputs[0] not in known and known[node.inputs[1]].ndim == 2:
        w = np.asarray(known[node.inputs[1]])
        return OnnxLinear(np.ascontiguousarray(w.T), None)

    def run(a: Value, b: Value) -> Value:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return a @ b
        like = first_tensor(a, b)
        return as_tensor(a, like).matmul(as_tensor(b, like))
    return Op(node, run, known)


class OnnxBatchNorm(BatchNorm2d):
    """A BatchNormalization node (inference): BatchNorm2d; (N, C) and (N, C, L) inputs reshaped to it."""

    onnx_inputs = (0,)

    def __init__(self, node: Node, known: Known) -> None:
        if int(node.attrs.get("training_mode", 0)):
            raise OnnxError(f"{node.where()}: a BatchNormalization in training mode; export the model in eval mode")
        scale, bias, mean, var = (_weight(node, known, k, what) for k, what in
                                  ((1, "scale"), (2, "bias"), (3, "mean"), (4, "variance")))
        if scale is None:
            raise OnnxError(f"{node.where()} (BatchNormalization) has no scale input, which ONNX requires")
        super().__init__(len(scale), eps=float(node.attrs.get("epsilon", 1e-5)))
        self.weight, self.bias = _param(scale), _param(bias)
        self.running_mean = Tensor(np.asarray(mean, np.float32))
        self.running_var = Tensor(np.asarray(var, np.float32))
        self.eval()

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 4:
            return super().forward(x)
        shape = tuple(x.shape)
        return super().forward(x.reshape(shape[0], shape[1], -1, 1)).reshape(*shape)


@converter("BatchNormalization", 9, 14, 15)
def batch_norm(node: Node, known: Known) -> OnnxBatchNorm:
    return OnnxBatchNorm(node, known)


@converter("InstanceNormalization", 6, 22)
def instance_norm(node: Node, known: Known) -> Op:
    scale, bias = _weight(node, known, 1, "scale"), _weight(node, known, 2, "bias")
    eps = float(node.attrs.get("epsilon", 1e-5))
    return Op(node, lambda x, s, b: F.instance_norm(x, weight=as_tensor(s, x), bias=as_tensor(b, x), eps=eps),
              {node.inputs[1]: scale, node.inputs[2]: bias})


@converter("LayerNormalization", 17)
def layer_norm(node: Node, known: Known) -> Op:
    axis = int(node.attrs.get("axis", -1))
    eps = float(node.attrs.get("epsilon", 1e-5))
    if int(node.attrs.get("stash_type", 1)) != 1:
        raise OnnxError(f"{node.where()}: LayerNormalization with stash_type other than float is not supported")

    def run(x: Tensor, scale: Value, bias: Value = None) -> Tensor:
        shape = tuple(x.shape[axis:]) if axis != 0 else tuple(x.shape)
        w = as_tensor(scale, x).broadcast_to(shape) if scale is not None else None
        b = as_tensor(bias, x).broadcast_to(shape) if bias is not None else None
        return F.layer_norm(x, shape, w, b, eps)
    return Op(node, run, known)


@converter("GroupNormalization", 18, 21)
def group_norm(node: Node, known: Known) -> Op:
    groups = int(node.attrs["num_groups"])
    eps = float(node.attrs.get("epsilon", 1e-5))

    def run(x: Tensor, scale: Value, bias: Value) -> Tensor:
        c = x.shape[1]
        s, b = np.asarray(const(scale, node, "scale")), np.asarray(const(bias, node, "bias"))
        if len(s) == groups and c != groups:  # opset 18: one scale and bias per group
            s, b = np.repeat(s, c // groups), np.repeat(b, c // groups)
        return F.group_norm(x, groups, as_tensor(s, x), as_tensor(b, x), eps)
    return Op(node, run, known, keep=(1, 2))


# ---- pooling --------------------------------------------------------------------------------

def _pool_args(node: Node) -> tuple[_Pair, _Pair, _Pair, int]:
    a = node.attrs
    kernel = tuple(a["kernel_shape"])
    if len(kernel) != 2:
        raise OnnxError(f"{node.where()} ({node.op_type}) pools over {len(kernel)} axes; this engine pools 2-D maps")
    stride, dilation = tuple(a.get("strides", (1, 1))), tuple(a.get("dilations", (1, 1)))
    return kernel, stride, dilation, int(a.get("ceil_mode", 0))


class OnnxMaxPool(MaxPool2d):
    """A MaxPool node: MaxPool2d, the pads it does not take as -inf padding before it."""

    onnx_inputs = (0,)

    def __init__(self, node: Node) -> None:
        kernel, stride, dilation, ceil = _pool_args(node)
        if int(node.attrs.get("storage_order", 0)):
            raise OnnxError(f"{node.where()}: MaxPool with storage_order 1 is not supported")
        if len([o for o in node.outputs if o]) > 1:
            raise OnnxError(f"{node.where()}: a MaxPool whose indices are used is not supported")
        self.onnx_pads = _Padded(node, kernel, stride, dilation, pool=True)
        super().__init__(kernel, stride, self.onnx_pads.layer, dilation, ceil_mode=bool(ceil))

    def forward(self, x: Tensor) -> Tensor:
        _two_d(x, "MaxPool")
        y = super().forward(self.onnx_pads.before(x, value=-np.inf))
        return self.onnx_pads.after(y, x, self.ceil_mode)  # type: ignore[arg-type]  # no return_indices: a Tensor


@converter("MaxPool", 8, 10, 11, 12, 22)
def max_pool(node: Node, known: Known) -> OnnxMaxPool:
    return OnnxMaxPool(node)


@converter("AveragePool", 7, 10, 11, 19, 22)
def average_pool(node: Node, known: Known) -> Op:
    kernel, stride, dilation, ceil = _pool_args(node)
    if dilation != (1, 1):
        raise OnnxError(f"{node.where()}: AveragePool with dilations is not supported")
    include = bool(node.attrs.get("count_include_pad", 0))
    pads = _Padded(node, kernel, stride, dilation, pool=True)

    def run(x: Tensor) -> Tensor:
        _two_d(x, "AveragePool")
        if not pads.same and pads.extra is None:
            return F.avg_pool2d(x, kernel, stride, pads.layer, bool(ceil), include)
        total = pads.after(F.avg_pool2d(pads.before(x), kernel, stride, 0, bool(ceil), True), x, ceil)
        if include:
            return total
        ones = Tensor(np.ones((1, 1) + tuple(x.shape[2:]), x.dtype))  # the padded cells count for nothing
        return total / pads.after(F.avg_pool2d(pads.before(ones), kernel, stride, 0, bool(ceil), True), x, ceil)
    return Op(node, run)


@converter("GlobalAveragePool", 1, 22)
def global_average_pool(node: Node, known: Known) -> Op:
    return Op(node, lambda x: as_tensor(x).mean(dim=tuple(range(2, x.ndim)), keepdim=True))


@converter("GlobalMaxPool", 1, 22)
def global_max_pool(node: Node, known: Known) -> Op:
    return Op(node, lambda x: as_tensor(x).amax(dim=tuple(range(2, x.ndim)), keepdim=True))


# ---- activations ----------------------------------------------------------------------------

_M = TypeVar("_M", bound=Module)


def _layer(module: _M) -> _M:
    module.onnx_inputs = (0,)
    return module


converter("Relu", 6, 13, 14)(lambda node, known: _layer(ReLU()))
converter("Sigmoid", 6, 13)(lambda node, known: _layer(Sigmoid()))
converter("Tanh", 6, 13)(lambda node, known: _layer(Tanh()))
converter("HardSwish", 14, 22)(lambda node, known: _layer(Hardswish()))
converter("Softplus", 1, 22)(lambda node, known: _layer(Softplus()))


@converter("LeakyRelu", 6, 16)
def leaky_relu(node: Node, known: Known) -> LeakyReLU:
    return _layer(LeakyReLU(float(node.attrs.get("alpha", 0.01))))


@converter("Elu", 6, 22)
def elu(node: Node, known: Known) -> ELU:
    return _layer(ELU(float(node.attrs.get("alpha", 1.0))))


@converter("Selu", 6, 22)
def selu(node: Node, known: Known) -> Op:
    alpha = float(node.attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(node.attrs.get("gamma", 1.05070102214813232421875))
    return Op(node, lambda x: F.elu(x, alpha) * gamma)


@converter("HardSigmoid", 6, 22)
def hard_sigmoid(node: Node, known: Known) -> Module:
    alpha, beta = float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5))
    if math.isclose(alpha, 1 / 6, rel_tol=1e-6) and beta == 0.5:
        return _layer(Hardsigmoid())
    return Op(node, lambda x: (as_tensor(x) * alpha + beta).clamp(0.0, 1.0))


@converter("Gelu", 20)
def gelu(node: Node, known: Known) -> GELU:
    approximate = node.attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise OnnxError(f"{node.where()}: Gelu approximate={approximate!r} is not one ONNX defines")
    return _layer(GELU(approximate=approximate))


@converter("PRelu", 7, 9, 16)
def prelu(node: Node, known: Known) -> Op:
    def run(x: Tensor, slope: Value) -> Tensor:
        s = as_tensor(slope, x)
        aligned = (1,) * (x.ndim - s.ndim) + tuple(s.shape)  # numpy's broadcasting: s against x's last axes
        if x.ndim >= 2 and len(aligned) == x.ndim and math.prod(aligned) == aligned[1] == x.shape[1]:
            return F.prelu(x, s.reshape(-1))
        return F.relu(x) - F.relu(-x) * s
    return Op(node, run, known)


@converter("Clip", 11, 12, 13)
def clip(node: Node, known: Known) -> Op:
    def bound(v: Value, what: str) -> float:
        v = const(v, node, what)
        if v.size != 1:
            raise OnnxError(f"{node.where()} (Clip): its {what} has {v.size} values; ONNX makes it a scalar")
        return float(v.reshape(-1)[0])

    def run(x: Value, lo: Value = None, hi: Value = None) -> Value:
        lo = None if lo is None else bound(lo, "min")
        hi = None if hi is None else bound(hi, "max")
        if lo is None and hi is None:
            return x
        if isinstance(x, np.ndarray):
            return np.clip(x, lo, hi)
        if lo == 0.0 and hi is None:
            return F.relu(x)
        return x.clamp(lo, hi)
    return Op(node, run, known, keep=(1, 2))


@converter("Softmax", 13)
def softmax(node: Node, known: Known) -> Op:
    axis = int(node.attrs.get("axis", -1))
    return Op(node, lambda x: as_tensor(x).softmax(axis))


@converter("LogSoftmax", 13)
def log_softmax(node: Node, known: Known) -> Op:
    axis = int(node.attrs.get("axis", -1))
    return Op(node, lambda x: as_tensor(x).log_softmax(axis))


@converter("Softmax", 11)
def softmax_11(node: Node, known: Known) -> Op:
    axis = int(node.attrs.get("axis", 1))
    return Op(node, lambda x: _coerced(x, axis, lambda t: t.softmax(1)))


@converter("LogSoftmax", 11)
def log_softmax_11(node: Node, known: Known) -> Op:
    axis = int(node.attrs.get("axis", 1))
    return Op(node, lambda x: _coerced(x, axis, lambda t: t.log_softmax(1)))


def _coerced(x: Value, axis: int, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """Opset 11's softmax: over the input flattened to 2-D at `axis`."""
    x, shape = as_tensor(x), tuple(x.shape)
    axis = axis % len(shape)
    return fn(x.reshape(math.prod(shape[:axis]), -1)).reshape(*shape)
