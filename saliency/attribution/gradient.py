"""One-pass methods: the gradient, input x gradient, and guided backprop.

Each is `method(model, x, seed=None)`: one forward pass, one backward pass (K batched seeds
included) and a map of the input's shape, with a leading K dimension for K seeds.
"""
from ._core import Call, resolve


def _vjp(model, x, seed, rule):
    call = Call(model, x)
    xt, y = call.forward(call.x, grad=True)
    seed, v = resolve(seed, y.data)
    return call, seed, y.data, call.grad(y, xt, v, seed.count is not None, rule=rule)


def gradient(model, x, seed=None):
    """The gradient of sum(v * model(x)) with respect to x: v^T dy/dx."""
    call, seed, y, g = _vjp(model, x, seed, "gradient")
    return call.finish("gradient", g, seed, y)


def input_x_gradient(model, x, seed=None):
    """x * v^T dy/dx (Shrikumar et al. 2016): the gradient scaled by the input, elementwise."""
    call, seed, y, g = _vjp(model, x, seed, "gradient")
    return call.finish("input_x_gradient", g * call.x, seed, y)


def guided_backprop(model, x, seed=None):
    """Guided backprop (Springenberg et al., arXiv:1412.6806): the backward pass of the gradient,
    except that every ReLU also zeroes negative incoming gradients, relu(g) * [x > 0]. This is an
    op-level rule (`saliency.autograd.relu_rule("guided")`), so it reaches ReLUs called as
    functions (sl.relu) as well as nn.ReLU modules."""
    call, seed, y, g = _vjp(model, x, seed, "guided")
    return call.finish("guided_backprop", g, seed, y)
