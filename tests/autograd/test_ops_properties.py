"""Property tests over random shapes: broadcasting binary ops, reductions over random dims,
shape ops. Gradients are checked against NumPy closed forms, for one seed and for K seeds in
one batched pass (sl.autograd.grad(..., batched=True))."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import saliency as sl

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True)
TOL = dict(rtol=1e-10, atol=1e-12)
K = 3  # seeds per batched pass


def _distinct(rng, n):
    """n values, no two (and no two absolute values) within 0.25: no ties between or inside inputs."""
    return rng.choice([-1.0, 1.0], n) * (0.5 + 0.25 * rng.permutation(n))


def _sum_into(contrib, shape):
    """Gradient of each element of an input of `shape` broadcast to contrib.shape[1:] (seed axis
    first): the sum of the contributions of the output elements that read it (np.bincount)."""
    out_shape = contrib.shape[1:]
    n = int(np.prod(shape, dtype=int))
    reads = np.broadcast_to(np.arange(n).reshape(shape), out_shape).ravel()
    return np.stack([np.bincount(reads, weights=c.ravel(), minlength=n).reshape(shape) for c in contrib])


def _check_grads(y, leaves, expected_forward, seeds, expected_grads):
    """y's forward value, then y.backward(seeds[0]) and one batched pass with all seeds."""
    np.testing.assert_allclose(y.numpy(), expected_forward, **TOL)
    grads = sl.autograd.grad(y, leaves, sl.tensor(seeds), retain_graph=True, batched=True)
    y.backward(sl.tensor(seeds[0]))
    for leaf, g, want in zip(leaves, grads, expected_grads):
        assert leaf.grad.shape == leaf.shape
        assert g.shape == (len(seeds),) + leaf.shape
        np.testing.assert_allclose(leaf.grad.numpy(), want[0], **TOL)
        np.testing.assert_allclose(g.numpy(), want, **TOL)


# ---- elementwise binary ops with broadcastable shapes ----------------------------------------
# name: (op on tensors, forward in NumPy, partial derivatives (dz/dx, dz/dy) in NumPy)
BINARY = {
    "add": (lambda x, y: x + y, np.add, lambda x, y: (1.0, 1.0)),
    "sub": (lambda x, y: x - y, np.subtract, lambda x, y: (1.0, -1.0)),
    "mul": (lambda x, y: x * y, np.multiply, lambda x, y: (y, x)),
    "div": (lambda x, y: x / y, np.divide, lambda x, y: (1 / y, -x / y ** 2)),
    "pow": (lambda x, y: x ** y, np.power, lambda x, y: (y * x ** (y - 1), x ** y * np.log(x))),
    "maximum": (sl.maximum, np.maximum, lambda x, y: (x > y, x < y)),
    "minimum": (sl.minimum, np.minimum, lambda x, y: (x < y, x > y)),
    "where": (lambda x, y: sl.where((x > y).numpy(), x, y), lambda x, y: np.where(x > y, x, y),
              lambda x, y: (x > y, x < y)),
}


@SETTINGS
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
       op=st.sampled_from(sorted(BINARY)))
def test_binary_ops_broadcast_gradients(shapes, op):
    fn, forward, partials = BINARY[op]
    (sx, sy), out_shape = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(0)
    nx, ny = int(np.prod(sx, dtype=int)), int(np.prod(sy, dtype=int))
    pool = _distinct(rng, nx + ny)
    x, y = pool[:nx].reshape(sx), pool[nx:].reshape(sy)
    if op == "pow":
        x = np.abs(x)  # a positive base; the exponent stays real
    leaves = [sl.tensor(x, requires_grad=True), sl.tensor(y, requires_grad=True)]
    z = fn(*leaves)
    assert z.shape == out_shape
    seeds = rng.standard_normal((K,) + out_shape)
    xb, yb = np.broadcast_to(x, out_shape), np.broadcast_to(y, out_shape)
    dx, dy = partials(xb, yb)
    want = [_sum_into(seeds * dx, sx), _sum_into(seeds * dy, sy)]
    _check_grads(z, leaves, forward(xb, yb), seeds, want)


# ---- reductions over random dims -------------------------------------------------------------
@st.composite
def shape_and_dims(draw):
    """A shape, a non-empty set of its dims (some negative), or None for all of them."""
    shape = draw(array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    if draw(st.booleans()) and draw(st.booleans()):
        return shape, None
    dims = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    negate = draw(st.lists(st.booleans(), min_size=len(dims), max_size=len(dims)))
    dims = [d - len(shape) if n else d for d, n in zip(dims, negate)]
    return shape, (dims[0] if len(dims) == 1 and draw(st.booleans()) else tuple(dims))



# name: (method, forward with keepdims, d reduction / d x given x and the keepdims result)
REDUCTIONS = {
    "sum": ("sum", lambda x, ax: x.sum(ax, keepdims=True), lambda x, r, ax: np.ones_like(x)),
    "mean": ("mean", lambda x, ax: x.mean(ax, keepdims=True),
             lambda x, r, ax: np.full_like(x, r.size / x.size)),
    "amax": ("amax", lambda x, ax: x.max(ax, keepdims=True), lambda x, r, ax: (x == r).astype(float)),
    "amin": ("amin", lambda x, ax: x.min(ax, keepdims=True), lambda x, r, ax: (x == r).astype(float)),
    "logsumexp": ("logsumexp", lambda x, ax: np.log(np.exp(x).sum(ax, keepdims=True)),
                  lambda x, r, ax: np.exp(x - r)),
    "norm": ("norm", lambda x, ax: np.sqrt((x * x).sum(ax, keepdims=True)), lambda x, r, ax: x / r),
}


@SETTINGS
@given(case=shape_and_dims(), keepdim=st.booleans(), op=st.sampled_from(sorted(REDUCTIONS)))
def test_reductions_over_random_dims(case, keepdim, op):
    shape, dim = case
    method, forward, partial = REDUCTIONS[op]
    axes = tuple(range(len(shape))) if dim is None else tuple(np.atleast_1d(dim) % len(shape))
    rng = np.random.default_rng(0)
    x = _distinct(rng, int(np.prod(shape))).reshape(shape)
    leaf = sl.tensor(x, requires_grad=True)
    y = getattr(leaf, method)(dim=dim, keepdim=keepdim)
    kept = forward(x, axes)
    out = kept if keepdim else kept.reshape(tuple(n for i, n in enumerate(shape) if i not in axes))
    assert y.shape == out.shape
    seeds = rng.standard_normal((K,) + out.shape)
    seeds_kept = seeds.reshape((K,) + kept.shape)  # the same numbers with the reduced dims kept as 1
    _check_grads(y, [leaf], out, seeds, [seeds_kept * partial(x, kept, axes)])


# ---- shape ops ---------------------------------------------------------------------------------
@st.composite
def factorisation(draw):
    """A shape and another shape with the same number of elements, maybe with one -1."""
    shape = draw(array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    primes = [p for n in shape for p in _prime_factors(n)]
    slots = draw(st.integers(1, 4))
    sizes = [1] * slots
    for p in primes:
        sizes[draw(st.integers(0, slots - 1))] *= p
    sizes = draw(st.permutations(sizes))
    new = list(sizes)
    if draw(st.booleans()):
        new[draw(st.integers(0, slots - 1))] = -1
    return shape, tuple(sizes), tuple(new)


def _prime_factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@SETTINGS
@given(case=factorisation(), view=st.booleans())
def test_reshape_to_random_factorisations(case, view):
    shape, sizes, new = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    leaf = sl.tensor(x, requires_grad=True)
    y = leaf.view(*new) if view else leaf.reshape(new)
    seeds = rng.standard_normal((K,) + sizes)
    _check_grads(y, [leaf], x.reshape(sizes), seeds, [seeds.reshape((K,) + shape)])


@SETTINGS
@given(data=st.data(), shape=array_shapes(min_dims=1, max_dims=5, min_side=1, max_side=3))
def test_permute_random_permutations(data, shape):
    perm = data.draw(st.permutations(range(len(shape))))
    perm = [p - len(shape) if data.draw(st.booleans()) else p for p in perm]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    leaf = sl.tensor(x, requires_grad=True)
    y = leaf.permute(*perm)
    out = np.transpose(x, perm)
    seeds = rng.standard_normal((K,) + out.shape)
    inverse = np.argsort(np.array(perm) % len(shape))
    _check_grads(y, [leaf], out, seeds, [np.transpose(seeds, [0] + [1 + i for i in inverse])])


@SETTINGS
@given(data=st.data(), shape=array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
def test_transpose_random_dims(data, shape):
    d0 = data.draw(st.integers(-len(shape), len(shape) - 1))
    d1 = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    leaf = sl.tensor(x, requires_grad=True)
    y = leaf.transpose(d0, d1)
    out = np.swapaxes(x, d0, d1)
    seeds = rng.standard_normal((K,) + out.shape)
    _check_grads(y, [leaf], out, seeds, [np.swapaxes(seeds, 1 + d0 % len(shape), 1 + d1 % len(shape))])


@SETTINGS
@given(data=st.data(), shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
def test_getitem_random_integer_arrays(data, shape):
    """Random (possibly repeated, negative) indices along a random dim: scatter-add back."""
    dim = data.draw(st.integers(0, len(shape) - 1))
    index = data.draw(st.lists(st.integers(-shape[dim], shape[dim] - 1), min_size=1, max_size=6))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    leaf = sl.tensor(x, requires_grad=True)
    key = (slice(None),) * dim + (index,)
    y = leaf[key]
    out = x[key]
    seeds = rng.standard_normal((K,) + out.shape)
    want = np.zeros((K,) + shape)
    for j, i in enumerate(index):
        want[(slice(None),) * (dim + 1) + (i,)] += seeds[(slice(None),) * (dim + 1) + (j,)]
    _check_grads(y, [leaf], out, seeds, [want])


def test_empty_dim_list_reduces_everything_as_torch_does():
    x = sl.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x.sum(dim=())
    assert y.shape == ()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones((2, 3)), rtol=0, atol=0)
    assert x.amax(dim=[]).item() == pytest.approx(5.0, abs=0)
