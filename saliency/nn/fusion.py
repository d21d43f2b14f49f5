"""Graph fusions: adjacent modules of a `Sequential` run as one op, as an explicit step.

    model = saliency.nn.fuse(model)     # plan the fusions of every Sequential in the model (in place)
    saliency.nn.unfuse(model)           # forget them: every module runs on its own again

`fuse` changes no parameter, buffer, state-dict key or submodule: it records, on each Sequential
of `model` (the model itself and every submodule), which adjacent pairs of children may run as one
op, and `Sequential.forward` follows that plan. Weights load the same way before and after, and
`named_modules()` / `print(model)` show the same layers. A Sequential that was never fused (or
was unfused) runs each module on its own, as PyTorch does.

The plan is checked again at every call: a pair whose modules have hooks (registered before or
after `fuse`), were replaced, or changed so that the fusion no longer applies runs as its two
modules, so a hook always sees the module's own input and output and PyTorch's nodes. A slice
`seq[a:b]` is a new Sequential with no plan; changing a Sequential's children (insert, del, ...)
may leave a planned pair unfused until `fuse` is called again.

The fusions:

* Upsample(nearest, integer scale >= 2) followed by a plain 3x3 Conv2d (stride 1, padding 1, no
  dilation or groups): one sub-pixel convolution, `F.upsample_conv2d`. Same result (to rounding),
  4/9 of the work, and one UpsampleConvolutionBackward0 node in the graph instead of
  UpsampleNearest2DBackward0 and ConvolutionBackward0.
* Conv2d followed by a BatchNorm2d in eval mode (running statistics): one convolution with the
  normalisation folded into its weight and bias, w * s and (b - mean) * s + beta with
  s = gamma / sqrt(var + eps). Same result (to rounding), and no pass over the activations for
  the norm's VJP, where that saves more than the copy of the weight costs (`_fold_pays`: not
  for large weights on small maps). With frozen weights (as attribution methods run a model) the
  fold is computed once per version of the weights and statistics (`kernels.versions`: every
  write through a tensor, `p.numpy()` or a loaded state dict is seen); where a parameter records
  gradients, it is made of autograd ops at every call, so that gradients reach the convolution's
  and the norm's parameters. Otherwise, and in training mode, the two modules run on their own.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Sequence, TypeVar

import numpy as np

from ..autograd.grad_mode import is_grad_enabled
from ..autograd.tensor import Tensor
from ..kernels import conv_output_size, versions
from . import functional as F
from .batchnorm import BatchNorm2d
from .conv import Conv2d
from .module import Module
from .upsampling import Upsample

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .containers import Sequential

_M = TypeVar("_M", bound=Module)


# One fusion of two adjacent modules: `applies(first, second)` says whether the pair may run fused
# (checked when planning and again at each call); `run(first, second, x)` computes second(first(x)).
class PairFusion(NamedTuple):
    name: str
    applies: Callable[[Module, Module], bool]
    run: Callable[[Module, Module, Tensor], Tensor]


def upsample_conv_fusable(upsample: Module, conv: Module) -> bool:
    """Whether Upsample(nearest, integer scale) followed by `conv` can run as one sub-pixel
    convolution: a plain 3x3 Conv2d (stride 1, padding 1, no dilation or groups) and no hooks
    on either module (a hook must see the module's own input and output)."""
    return (type(upsample) is Upsample and type(conv) is Conv2d and upsample.mode == "nearest"
            and upsample.size is None and _integer_scale(upsample.scale_factor) >= 2
            and conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (1, 1)
            and conv.dilation == (1, 1) and conv.groups == 1 and getattr(conv, "padding_mode", "zeros") == "zeros"
            and not upsample._has_hooks() and not conv._has_hooks())


def _integer_scale(scale_factor: float | Sequence[float] | None) -> int:
    """s for a scale factor that is the integer s on both axes (a number or an equal pair), else 0.
    Nearest upsampling by an integer s reads row r // s, so recompute_scale_factor changes nothing."""
    if isinstance(scale_factor, (tuple, list)):
        if len(scale_factor) != 2 or scale_factor[0] != scale_factor[1]:
            return 0
        scale_factor = scale_factor[0]
    if (isinstance(scale_factor, bool) or not isinstance(scale_factor, (int, float))
            or scale_factor != int(scale_factor)):
        return 0
    return int(scale_factor)


def _upsample_conv(upsample: Module, conv: Module, x: Tensor) -> Tensor:
    return F.upsample_conv2d(x, conv.weight, conv.bias, _integer_scale(upsample.scale_factor))


UPSAMPLE_CONV = PairFusion("upsample_conv2d", upsample_conv_fusable, _upsample_conv)


def conv_bn_fusable(conv: Module, bn: Module) -> bool:
    """Whether `conv` (a Conv2d) followed by `bn` (a BatchNorm2d of its output channels with
    running statistics) can run as one convolution; no hooks on either module. The norm's mode
    is looked at by the call: in training mode (batch statistics) the two run on their own."""
    return (type(conv) is Conv2d and type(bn) is BatchNorm2d and bn.running_mean is not None
            and bn.num_features == conv.out_channels and not conv._has_hooks() and not bn._has_hooks())


def _fold_pays(conv: Module, x: Tensor) -> bool:
    """Folding makes a copy of the weight (O * C/groups * kh * kw elements: a pass over it at every
    call where the fold is recorded, memory kept where it is computed once per weight version) and
    saves a pass over the norm's activations (O * N * OH * OW, its VJP; its forward pass becomes
    the bias's) and the norm's output array: it pays when the output has at least as many
    positions per channel as the weight has elements per output channel (not on 512-channel
    layers of a 2x2 map), so a fused model never holds more memory than the unfused one."""
    shape = np.shape(x)
    if len(shape) != 4:
        return False
    positions = shape[0]
    for size, k, s, p, d in zip(shape[2:], conv.kernel_size, conv.stride, conv.padding, conv.dilation):
        positions *= max(0, conv_output_size(size, k, s, p, d))
    return positions >= conv.in_channels // conv.groups * conv.kernel_size[0] * conv.kernel_size[1]


def _conv_bn(conv: Module, bn: Module, x: Tensor) -> Tensor:
    if bn.training or not _fold_pays(conv, x):
        return bn(conv(x))
    params = (conv.weight, conv.bias, bn.weight, bn.bias)
    if is_grad_enabled() and any(p is not None and p.requires_grad for p in params):
        # the same arithmetic on the parameter tensors: autograd ops, so gradients reach them
        weight, shift = _fold(bn.eps, *params, bn.running_mean, bn.running_var)
    else:  # frozen weights: the fold is data, computed once per version of the six arrays
        weight, shift = (Tensor._make(a, False, None) for a in versions.derived(
            ("conv2d_batch_norm", float(bn.eps)),  # type: ignore[arg-type]  # a str in its signature; any key works
            functools.partial(_fold, bn.eps), *(_array(t) for t in params),
            _array(bn.running_mean), _array(bn.running_var)))
    return F.conv2d(x, weight, shift, conv.stride, conv.padding, conv.dilation, conv.groups)


def _array(t: Tensor | ArrayLike | None) -> NDArray[Any] | None:
    return t._array if isinstance(t, Tensor) else (None if t is None else np.asarray(t))


def _fold(eps: float, w: Any, b: Any, gamma: Any, beta: Any, mean: Any, var: Any) -> tuple[Any, Any]:
    """(w * s, (b - mean) * s + beta) with s = gamma / sqrt(var + eps), on arrays (computed once
    per version) or on the parameter tensors (recorded in the graph); the statistics are buffers
    and take no gradient. Any: each operand is an ndarray (or None) or a Tensor (or None)."""
    dtype = w.dtype
    scale = (1.0 / np.sqrt(np.asarray(var, np.float64) + eps)).astype(dtype)
    if gamma is not None:
        scale = gamma * scale
    mean = np.asarray(mean, dtype)
    shift = (b - mean) * scale if b is not None else scale * -mean
    if beta is not None:
        shift = shift + beta
    return w * scale.reshape(-1, 1, 1, 1), shift


CONV_BN = PairFusion("conv2d_batch_norm", conv_bn_fusable, _conv_bn)

# The pair fusions `fuse` looks for, first match wins.
PAIR_FUSIONS = (UPSAMPLE_CONV, CONV_BN)


def plan(modules: Iterable[Module]) -> dict[int, PairFusion]:
    """{index of the first module: PairFusion} for the fusable adjacent pairs of `modules`, taken
    left to right without overlap."""
    modules = list(modules)
    out: dict[int, PairFusion] = {}
    i = 0
    while i + 1 < len(modules):
        fusion = next((f for f in PAIR_FUSIONS if f.applies(modules[i], modules[i + 1])), None)
        if fusion is None:
            i += 1
        else:
            out[i] = fusion
            i += 2
    return out


def _sequentials(module: Module, what: str) -> list[Sequential]:
    from .containers import Sequential  # containers imports this module

    if not isinstance(module, Module):
        raise TypeError(f"{what} expects a saliency.nn.Module, got {type(module).__name__}")
    return [m for m in module.modules() if isinstance(m, Sequential)]


def fuse(module: _M) -> _M:
    """Plan the fusions of `module` and of every submodule that is a Sequential (see the module
    docstring) and return `module`, changed in place like `module.eval()`. Calling it again plans
    afresh (after children were replaced, say); `unfuse` undoes it. Parameters, buffers,
    state-dict keys and submodules are unchanged."""
    for seq in _sequentials(module, "fuse"):
        seq._fusion_plan = plan(seq._modules.values())
    return module


def unfuse(module: _M) -> _M:
    """Forget the fusion plans of `module` and its submodules, so each module runs on its own
    (PyTorch's graph); returns `module`, changed in place."""
    for seq in _sequentials(module, "unfuse"):
        seq._fusion_plan = {}
    return module


def fused_pairs(module: Module) -> list[tuple[str, str, str]]:
    """[(name of the first module, name of the second, fusion name)] that `module` plans to run
    fused, with dotted names as in `named_modules()` (whether each runs fused is decided at the
    call: hooks added since `fuse` keep a pair apart)."""
    from .containers import Sequential

    out: list[tuple[str, str, str]] = []
    for prefix, seq in module.named_modules():
        if isinstance(seq, Sequential):
            names = list(seq._modules)
            for i, fusion in sorted(seq._fusion_plan.items()):
                if i + 1 < len(names):
                    out.append((f"{prefix}.{names[i]}" if prefix else names[i],
                                f"{prefix}.{names[i + 1]}" if prefix else names[i + 1], fusion.name))
    return out
