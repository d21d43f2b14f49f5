"""Grad-CAM (Selvaraju et al., arXiv:1610.02391) on any layer with a (N, C, h, w) output."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..autograd.tensor import Tensor
from ._core import Call, InputError, resolve
from .registry import Option, method

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model
    from .result import Attribution
    from .seeds import Seed


def resize_bilinear(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize the last two dimensions of `a` to `size` = (H, W), bilinear with align_corners=False
    (PyTorch's F.interpolate(size=...)): source coordinate (i + 0.5) * in / out - 0.5, clamped at 0."""
    out = a
    for axis, n_out in ((-2, size[0]), (-1, size[1])):
        n_in = out.shape[axis]
        if n_in == n_out:
            continue
        src = np.maximum((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0)
        i0 = np.minimum(np.floor(src).astype(np.intp), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        l1 = src - i0
        r = np.zeros((n_out, n_in))
        np.add.at(r, (np.arange(n_out), i0), 1 - l1)
        np.add.at(r, (np.arange(n_out), i1), l1)
        out = np.moveaxis(np.tensordot(r, np.moveaxis(out, axis, 0), axes=1), 0, axis)
    return out


def default_layer(model: object) -> tuple[str, Any]:
    """(name, module) of the layer Grad-CAM uses by default: the model's last Conv2d with more than
    one output channel; InputError for a model without one."""
    from ..nn import Conv2d

    convs = [(name, m) for name, m in getattr(model, "named_modules", list)()
             if isinstance(m, Conv2d) and m.out_channels > 1]
    if not convs:
        raise InputError("gradcam needs a model with Conv2d layers (a saliency.nn.Module), or layer=")
    return convs[-1]


def named_layer(model: object, name: str) -> Any:
    """The module called `name` in model.named_modules() (as print(model) shows it), or InputError
    naming the model's convolutions."""
    from ..nn import Conv2d

    modules = dict(getattr(model, "named_modules", list)())
    if name not in modules or not name:
        convs = [n for n, m in modules.items() if isinstance(m, Conv2d) or type(m).__name__ == "Conv2d"]
        raise InputError(f"the model has no layer {name!r}; its convolutions are: {', '.join(convs) or 'none'}")
    return modules[name]


@method(options=(Option("layer", str, "the layer whose output and gradient make the map, by name as print(model) "
                        "shows it (default: the last convolution)"),),
        map_channels=1)
def gradcam(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, layer: Any = None) -> Attribution:
    """relu(sum_c w_c A_c) upsampled to the input's size, where A = the output of `layer` (a module
    called once in the forward pass, output (N, C, h, w); or its name in model.named_modules();
    default: the last Conv2d with more than one output channel, `default_layer`) and w_c = the
    spatial mean of d(sum(v * y))/dA_c.

    The map has one channel: (N, 1, H, W) for x of shape (N, C, H, W), (1, H, W) for (C, H, W),
    with a leading K for K batched seeds; upsampling is bilinear with align_corners=False.
    `extras["cam"]` holds the map at the layer's resolution (h, w), before upsampling.
    """
    if layer is None:
        layer = default_layer(model)[1]
    elif isinstance(layer, str):
        layer = named_layer(model, layer)
    register = getattr(layer, "register_forward_hook", None)
    if not callable(register):
        raise TypeError(f"layer must be a module of the model (with register_forward_hook), "
                        f"got {type(layer).__name__}")
    call = Call(model, x)
    seen: list[Any] = []
    here = threading.get_ident()

    def keep(module: Any, args: Any, out: Any) -> None:
        if threading.get_ident() == here:  # another thread may run the model at the same time
            seen.append(out)

    handle = register(keep)
    try:
        _, y = call.forward(call.x, grad=True)
    finally:
        handle.remove()
    if len(seen) != 1:
        raise RuntimeError(f"the layer ran {len(seen)} times in one forward pass; gradcam needs a layer the "
                           f"model calls exactly once")
    act = seen[0]
    if not isinstance(act, Tensor) or act.ndim != 4:
        shape = act.shape if isinstance(act, Tensor) else type(act).__name__
        raise ValueError(f"gradcam needs a layer whose output is a Tensor (N, C, h, w), this layer gives {shape}; "
                         f"pick a convolutional layer")
    seed, v = resolve(seed, y._array, model)
    batched = seed.count is not None
    g = call.grad(y, act, v, batched)
    w = g.mean(axis=(-2, -1), keepdims=True)  # ([K,] N, C, 1, 1)
    cam = np.maximum((w * act._array).sum(axis=-3, keepdims=True), 0)  # ([K,] N, 1, h, w)
    amap = resize_bilinear(cam, call.x.shape[-2:])
    return call.finish("gradcam", amap, seed, y._array, {"cam": call.unbatch(cam, seed), "layer": type(layer).__name__})
