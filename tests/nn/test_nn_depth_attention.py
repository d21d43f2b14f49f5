"""Seed example 12: attention maps of a per-pixel depth model (the reference depth architecture)."""
import os
import sys

import numpy as np

import saliency as sl
import saliency.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from reference_models import LAYERS, build  # noqa: E402


def _support(lo, hi, layers):
    """The input rows [lo, hi] that can reach output rows [lo, hi], walking the layers backwards."""
    for layer, args, kwargs in reversed(layers):
        if layer == "Conv2d":
            k, s, p = args[2], kwargs.get("stride", 1), kwargs.get("padding", 0)
            lo, hi = lo * s - p, hi * s - p + k - 1
        elif layer == "Upsample":
            s = kwargs["scale_factor"]
            lo, hi = lo // s, hi // s
    return lo, hi


def _model_and_input():
    sl.manual_seed(0)
    model = build("depth", nn).eval().requires_grad_(False)
    x = sl.tensor(np.random.default_rng(0).random((1, 3, 128, 128)).astype(np.float32), requires_grad=True)
    return model, x


def test_all_ones_seed_is_the_gradient_of_the_summed_depth():
    """backward(ones) against central differences of the summed depth along random directions, in
    float64 (an independent computation: only forward passes)."""
    model, x = _model_and_input()
    model.double()
    x64 = sl.tensor(x.numpy().astype(np.float64), requires_grad=True)
    y = model(x64)
    y.backward(sl.ones_like(y))
    grad = x64.grad.numpy()
    rng = np.random.default_rng(1)
    with sl.no_grad():
        for _ in range(3):
            d = rng.standard_normal(x64.shape)
            d /= np.linalg.norm(d)
            eps = 1e-4
            up = model(sl.tensor(x64.numpy() + eps * d)).sum().item()
            down = model(sl.tensor(x64.numpy() - eps * d)).sum().item()
            np.testing.assert_allclose(np.sum(grad * d), (up - down) / (2 * eps), rtol=1e-6)


def test_a_pixel_seed_is_zero_outside_the_receptive_field_and_channels_differ():
    model, x = _model_and_input()
    y = model(x)
    r, c = 70, 41
    seed = np.zeros(y.shape, np.float32)
    seed[0, 0, r, c] = 1.0
    y.backward(sl.tensor(seed))
    g = x.grad.numpy()[0]
    (r0, r1), (c0, c1) = _support(r, r, LAYERS["depth"]), _support(c, c, LAYERS["depth"])
    outside = np.ones(g.shape[1:], bool)
    outside[max(r0, 0):r1 + 1, max(c0, 0):c1 + 1] = False
    assert np.all(g[:, outside] == 0)
    assert np.count_nonzero(g[:, ~outside]) > 0.5 * g[:, ~outside].size
    assert not np.allclose(g[0], g[1]) and not np.allclose(g[1], g[2])
