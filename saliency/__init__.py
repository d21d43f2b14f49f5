"""saliency: input-attribution maps (dy/dx) from an autograd engine of its own.

`y.backward(gradient=v)` computes the vector-Jacobian product v^T dy/dx and adds it to the
`.grad` of every leaf x. This package implements that engine with PyTorch's semantics and
names (`sl.tensor`, `grad_fn`, `next_functions`, `AccumulateGrad`, hooks, `retain_graph`),
and shows its work: `sl.autograd.render_graph(y)` and `with sl.autograd.trace() as t`.

Conventions used throughout: tensors are NCHW; float32 is the default dtype and float64
works everywhere; every VJP accepts extra leading seed dimensions (K seeds in one pass).
"""
import os as _os
from typing import NoReturn as _NoReturn

import numpy as _np

from . import autograd, cuda, nn, optim
from .autograd import Tensor, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autograd.api import exported as _exported
from .autograd.creation import (arange, as_tensor, from_numpy, full, full_like, manual_seed, ones, ones_like, rand,
                                rand_like, randn, randn_like, tensor, zeros, zeros_like)
from .autograd.tensor import device
from .kernels.threads import get_num_threads, set_num_threads

globals().update(_exported("saliency"))  # every op function: sl.exp, sl.cat, sl.conv2d, ...

float32 = _np.dtype("float32")
float64 = _np.dtype("float64")
int64 = _np.dtype("int64")

# In a source checkout, models/ and cli/ sit beside this folder and install as saliency.models
# and saliency.cli. When Python imports this folder straight from the checkout (the working
# directory is the repository root), let those two subpackages resolve to the folders beside it.
_here = _os.path.dirname(__file__)
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "cli")) and _os.path.isfile(_os.path.join(_root, "cli", "__init__.py")):
    __path__.append(_root)


def __getattr__(name: str) -> _NoReturn:
    # reached only for names this module lacks: a torch.<name> that ported code asks for
    if name.startswith("_"):
        raise AttributeError(f"module 'saliency' has no attribute '{name}'")
    from .autograd.errors import unsupported

    raise unsupported("saliency", name)
