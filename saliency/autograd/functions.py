"""Every op as a function under PyTorch's name (`sl.exp(x)`, `sl.cat([a, b])`, ...).

Arguments may be Tensors, arrays or numbers; the result is always a Tensor.
"""
from .ops.conv import Convolution, UpsampleConvolution
from .ops.elementwise import Maximum, Minimum, Where
from .ops.loss import MseLoss, NllLoss
from .ops.norm import BatchNorm
from .ops.pool import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .ops.resize import Upsample
from .ops.shape import Cat, Pad, Stack
from .tensor import Tensor, _operand, as_array

add, sub, mul, div, pow, matmul = (Tensor.add, Tensor.sub, Tensor.mul, Tensor.div, Tensor.pow, Tensor.matmul)
neg, abs, exp, log, sqrt = Tensor.neg, Tensor.abs, Tensor.exp, Tensor.log, Tensor.sqrt
relu, sigmoid, tanh, clamp = Tensor.relu, Tensor.sigmoid, Tensor.tanh, Tensor.clamp
sum, mean, amax, amin, max, min = Tensor.sum, Tensor.mean, Tensor.amax, Tensor.amin, Tensor.max, Tensor.min
argmax, argmin, norm, logsumexp = Tensor.argmax, Tensor.argmin, Tensor.norm, Tensor.logsumexp
reshape, flatten, transpose, t = Tensor.reshape, Tensor.flatten, Tensor.transpose, Tensor.t
permute, squeeze, unsqueeze, mm = Tensor.permute, Tensor.squeeze, Tensor.unsqueeze, Tensor.mm
softmax, log_softmax, clone = Tensor.softmax, Tensor.log_softmax, Tensor.clone


def _tensor(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def maximum(x, y):
    return Maximum.apply(_tensor(x), _operand(y, _tensor(x)))


def minimum(x, y):
    return Minimum.apply(_tensor(x), _operand(y, _tensor(x)))


def where(condition, x, y):
    """Elements of x where condition holds, else of y (condition carries no gradient)."""
    cond = as_array(condition)
    like = x if isinstance(x, Tensor) else (y if isinstance(y, Tensor) else Tensor(x))
    return Where.apply(cond, _operand(x, like), _operand(y, like))


def broadcast_to(x, shape):
    return _tensor(x).broadcast_to(shape)


def cat(tensors, dim=0):
    return Cat.apply(*[_tensor(t) for t in tensors], dim=dim)


def stack(tensors, dim=0):
    return Stack.apply(*[_tensor(t) for t in tensors], dim=dim)


def pad(x, pad, mode="constant", value=0.0):
    """Constant padding; `pad` lists (before, after) sizes from the last dimension backwards."""
    if mode != "constant":
        raise ValueError(f"pad mode {mode!r} is not supported; use mode='constant'")
    return Pad.apply(_tensor(x), pad=pad, value=value)


def nll_loss(log_probs, target, reduction="mean"):
    """Negative log-likelihood of integer class targets; log_probs is (N, C) or (N, C, ...)."""
    target = as_array(target)
    return NllLoss.apply(_tensor(log_probs), target=target, reduction=reduction)


def cross_entropy(logits, target, reduction="mean"):
    """nll_loss(log_softmax(logits, dim=1), target): logits (N, C) or (N, C, ...), or (C,) with a scalar target."""
    logits = _tensor(logits)
    target = as_array(target)
    if logits.ndim == 1:
        out = nll_loss(logits.unsqueeze(0).log_softmax(1), target.reshape(1), reduction)
        return out.squeeze(0) if reduction == "none" else out
    return nll_loss(logits.log_softmax(1), target, reduction)


def mse_loss(input, target, reduction="mean"):
    """Mean (or sum) of squared differences; input and target must have the same shape."""
    input = _tensor(input)
    return MseLoss.apply(input, _operand(target, input), reduction=reduction)


# ---- convolution, pooling, resizing, normalisation (NCHW; kernels in saliency.kernels) -----------------
def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation: input (N, C, H, W), weight (O, C/groups, kh, kw), bias (O,) or None."""
    return Convolution.apply(_tensor(input), _tensor(weight), None if bias is None else _tensor(bias),
                             stride=stride, padding=padding, dilation=dilation, groups=groups)


def upsample_conv2d(input, weight, bias=None, scale_factor=2):
    """conv2d(interpolate(input, scale_factor, 'nearest'), weight, bias, padding=1) for a 3x3 weight,
    as one sub-pixel convolution (4/9 of the work; the upsampled image is never built)."""
    if int(scale_factor) != scale_factor or scale_factor < 1:
        raise ValueError(f"scale_factor must be a positive integer, got {scale_factor!r}")
    return UpsampleConvolution.apply(_tensor(input), _tensor(weight), None if bias is None else _tensor(bias),
                                     scale=int(scale_factor))


def max_pool2d(input, kernel_size, stride=None, padding=0):
    return MaxPool2d.apply(_tensor(input), kernel_size=kernel_size, stride=stride, padding=padding)


def avg_pool2d(input, kernel_size, stride=None, padding=0):
    return AvgPool2d.apply(_tensor(input), kernel_size=kernel_size, stride=stride, padding=padding)


def adaptive_avg_pool2d(input, output_size):
    return AdaptiveAvgPool2d.apply(_tensor(input), output_size=_pair(output_size))


def interpolate(input, scale_factor, mode="nearest"):
    """Upsample (N, C, H, W) by an integer scale factor; bilinear uses align_corners=False."""
    s = _pair(scale_factor)
    if s[0] != s[1] or int(s[0]) != s[0] or s[0] < 1:
        raise ValueError(f"scale_factor must be one positive integer for both axes, got {scale_factor!r}")
    return Upsample.apply(_tensor(input), scale_factor=int(s[0]), mode=mode)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Per-channel normalisation of (N, C, H, W); updates the running statistics in place when training."""
    def stat(v):
        return None if v is None else (v.data if isinstance(v, Tensor) else v)

    return BatchNorm.apply(_tensor(input), None if weight is None else _tensor(weight),
                           None if bias is None else _tensor(bias), running_mean=stat(running_mean),
                           running_var=stat(running_var), training=training, momentum=momentum, eps=eps)
