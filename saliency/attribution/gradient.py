"""One-pass methods: the gradient, input x gradient, and guided backprop.

Each is `method(model, x, seed=None)`: one forward pass, one backward pass and a map of the
input's shape, with a leading K dimension for K batched seeds. The K seeds share one backward
pass up to `_core.SEED_BUDGET` (K times the input's elements); beyond it (thousands of pixels)
they run in passes of that size through the one graph, so memory stays bounded.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ._core import Call, default_seed
from .registry import method

if TYPE_CHECKING:
    import numpy as np

    from ..autograd.tensor import TensorLike
    from ._core import Model
    from .result import Attribution
    from .seeds import Seed


def _vjp(model: Model, x: TensorLike, seed: Optional[Seed], rule: Any) -> tuple[Call, Seed, np.ndarray, np.ndarray]:
    call = Call(model, x)
    xt, y = call.forward(call.x, grad=True)
    seed = default_seed(seed, y._array, model).resolve(y._array)
    if seed.count is None:
        return call, seed, y._array, call.grad(y, xt, seed.vector(y._array), False, rule=rule)
    seed.check(y._array)
    g = call.rows(y, xt, seed.count, lambda start, stop: seed.vectors(y._array, start, stop), rule)
    return call, seed, y._array, g


@method(options=(), map_channels="input")
def gradient(model: Model, x: TensorLike, seed: Optional[Seed] = None) -> Attribution:
    """The gradient of sum(v * model(x)) with respect to x: v^T dy/dx."""
    call, seed, y, g = _vjp(model, x, seed, "gradient")
    return call.finish("gradient", g, seed, y)


@method(options=(), map_channels="input")
def input_x_gradient(model: Model, x: TensorLike, seed: Optional[Seed] = None) -> Attribution:
    """x * v^T dy/dx (Shrikumar et al. 2016): the gradient scaled by the input, elementwise."""
    call, seed, y, g = _vjp(model, x, seed, "gradient")
    return call.finish("input_x_gradient", g * call.x, seed, y)


@method(options=(), map_channels="input")
def guided_backprop(model: Model, x: TensorLike, seed: Optional[Seed] = None) -> Attribution:
    """Guided backprop (Springenberg et al., arXiv:1412.6806): the backward pass of the gradient,
    except that every ReLU also zeroes negative incoming gradients, relu(g) * [x > 0]. This is an
    op-level rule (`saliency.autograd.relu_rule("guided")`), so it reaches ReLUs called as
    functions (sl.relu) as well as nn.ReLU modules."""
    call, seed, y, g = _vjp(model, x, seed, "guided")
    return call.finish("guided_backprop", g, seed, y)
