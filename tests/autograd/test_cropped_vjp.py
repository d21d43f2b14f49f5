"""Cropped VJPs: a local seed's gradient computed on windows equals the full computation.

Every case runs the same seeds twice, in float64: once as the engine does by default (a seed that
is zero outside a small window travels as windows, `saliency.autograd.patch`), once with cropping
switched off; the two must agree to 1e-12. Seeds sit at the corners and borders of the map as
well as inside it, and the op under test must have taken its windowed path.
"""
import numpy as np
import pytest

import saliency as sl
from saliency import autograd
from saliency.autograd import engine, patch
from saliency.autograd.ops import conv, elementwise, norm, pool, resize, shape
from saliency.models import load
from saliency.nn import functional as F

H, W = 17, 19  # not square, odd: a row/column mix-up or an off-by-one at a border shows


def weight(rng, o, c, k):
    return sl.tensor(rng.normal(size=(o, c, k, k)) / (c * k * k) ** 0.5)


def pixel_seeds(y, extra=4, seed=0):
    """One-hot seeds (K, *y.shape): the four corners, the middle of each border, the centre, a few
    random pixels, one in the second image and one in the last channel."""
    n, c, h, w = y.shape
    pts = [(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1), (0, w // 2), (h // 2, 0), (h - 1, w // 2),
           (h // 2, w - 1), (h // 2, w // 2)]
    rng = np.random.default_rng(seed)
    pts += [tuple(int(v) for v in rng.integers(0, (h, w))) for _ in range(extra)]
    v = np.zeros((len(pts) + 2,) + y.shape)
    for k, (r, col) in enumerate(pts):
        v[k, 0, 0, r, col] = 1.0
    v[len(pts), n - 1, 0, h // 3, w // 3] = 1.0
    v[len(pts) + 1, 0, c - 1, h - 1, w // 4] = 1.0
    return v


def both_ways(fn, x, v, monkeypatch):
    """(windowed, full) gradients of sum(v[k] * fn(x)) with respect to x, and whether the seed became windows."""
    made = []
    real = engine.from_seed

    def spy(g, seed_ndim):
        p = real(g, seed_ndim)
        made.append(p is not None)
        return p

    monkeypatch.setattr(engine, "from_seed", spy)
    xt = sl.tensor(x, requires_grad=True)
    y = fn(xt)
    (windowed,) = autograd.grad(y, xt, sl.tensor(v), retain_graph=True, batched=True)
    monkeypatch.setattr(patch, "SPARSE_AT", -1.0)
    (full,) = autograd.grad(y, xt, sl.tensor(v), batched=True)
    return windowed.numpy(), full.numpy(), made[0]


def counting(monkeypatch, cls):
    """Count the calls of cls.backward_window that returned windows (not None)."""
    calls = []
    real = cls.backward_window

    def spy(self, p):
        out = real(self, p)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(cls, "backward_window", spy)
    return calls


RNG = np.random.default_rng(7)
W3 = weight(RNG, 4, 3, 3)  # the first layer of every case: 3 -> 4 channels


def first(x):
    return F.conv2d(x, W3, padding=1)


CASES = {
    "conv 3x3 s1 p1": (conv.Convolution, lambda x: F.conv2d(first(x), weight(RNG, 5, 4, 3), padding=1)),
    "conv 3x3 s2 p1": (conv.Convolution, lambda x: F.conv2d(first(x), weight(RNG, 5, 4, 3), stride=2, padding=1)),
    "conv 5x5 s3 p2": (conv.Convolution, lambda x: F.conv2d(first(x), weight(RNG, 5, 4, 5), stride=3, padding=2)),
    "conv 3x3 dilation 2 p2": (conv.Convolution,
                               lambda x: F.conv2d(first(x), weight(RNG, 5, 4, 3), padding=2, dilation=2)),
    "conv 3x3 s2 no padding": (conv.Convolution, lambda x: F.conv2d(first(x), weight(RNG, 5, 4, 3), stride=2)),
    "conv 1x1": (conv.Convolution, lambda x: F.conv2d(first(x), weight(RNG, 5, 4, 1))),
    "conv depthwise": (conv.Convolution,
                       lambda x: F.conv2d(first(x), weight(RNG, 4, 1, 3), padding=1, groups=4)),
    "conv groups 2, stride 2, dilation 2": (conv.Convolution, lambda x: F.conv2d(
        first(x), weight(RNG, 6, 2, 3), stride=2, padding=1, dilation=2, groups=2)),
    "max pool 2": (pool.MaxPool2d, lambda x: F.max_pool2d(first(x), 2)),
    "max pool 3 s2 p1": (pool.MaxPool2d, lambda x: F.max_pool2d(first(x), 3, 2, 1)),
    "upsample nearest x2": (resize.Upsample, lambda x: F.interpolate(first(x), scale_factor=2)),
    "upsample nearest x3": (resize.Upsample, lambda x: F.interpolate(first(x), scale_factor=3)),
    "upsample bilinear x2": (resize.Upsample, lambda x: F.interpolate(first(x), scale_factor=2, mode="bilinear")),
    "upsample bilinear x3": (resize.Upsample, lambda x: F.interpolate(first(x), scale_factor=3, mode="bilinear")),
    "upsample + conv fused": (conv.UpsampleConvolution,
                              lambda x: F.upsample_conv2d(first(x), weight(RNG, 5, 4, 3), scale_factor=2)),
    "avg pool 3 s2 p1": (pool.AvgPool2d, lambda x: F.avg_pool2d(first(x), 3, 2, 1)),
    "avg pool 2": (pool.AvgPool2d, lambda x: F.avg_pool2d(first(x), 2)),
    "padding": (shape.Pad, lambda x: F.conv2d(F.pad(first(x), (2, 1, 0, 3)), weight(RNG, 5, 4, 3))),
    "cropping": (shape.GetItem, lambda x: F.conv2d(first(x)[:, 1:, 2:-1, 1:], weight(RNG, 5, 3, 3), padding=1)),
    "relu": (elementwise.Relu, lambda x: F.relu(first(x))),
    "exp": (elementwise.Exp, lambda x: sl.exp(first(x))),
    "sigmoid": (elementwise.Sigmoid, lambda x: sl.sigmoid(first(x))),
    "tanh, neg, clamp": (elementwise.Clamp, lambda x: sl.clamp(-sl.tanh(first(x)), -0.5, 0.3)),
    "log, sqrt, abs": (elementwise.Log, lambda x: sl.log(sl.sqrt(sl.abs(first(x)) + 0.1))),
    "batch norm eval": (norm.BatchNorm, lambda x: F.batch_norm(
        first(x), np.linspace(-1, 1, 4), np.linspace(0.5, 2, 4), sl.tensor(np.linspace(0.5, 1.5, 4)),
        sl.tensor(np.ones(4)))),
    "skip connection (add)": (elementwise.Add, lambda x: F.relu(first(x)) + F.conv2d(
        first(x), weight(RNG, 4, 4, 3), padding=1)),
    "sub and mul": (elementwise.Mul, lambda x: (first(x) - F.relu(first(x))) * sl.tanh(first(x))),
    "div, pow, maximum": (elementwise.Div, lambda x: first(x) / (1 + sl.maximum(first(x), 0.0) ** 2)),
    "squeeze-excitation (mul by a gate per channel)": (elementwise.Mul, lambda x: (
        lambda h: h * sl.sigmoid(h.mean(dim=(2, 3), keepdim=True)))(first(x))),
    "where": (elementwise.Where, lambda x: F.conv2d(sl.where(first(x) > 0, first(x), 0.1 * sl.tanh(first(x))),
                                                    weight(RNG, 5, 4, 3), padding=1)),
    "expand one channel to all": (shape.Expand, lambda x: F.conv2d(
        first(x)[:, :1].expand(2, 4, H, W) * first(x), weight(RNG, 5, 4, 3), padding=1)),
    "channel shuffle (reshape, transpose)": (shape.Transpose, lambda x: F.conv2d(
        first(x).reshape(2, 2, 2, H, W).transpose(1, 2).reshape(2, 4, H, W), weight(RNG, 5, 4, 3), padding=1)),
    "U-Net cat of a skip": (shape.Cat, lambda x: F.conv2d(sl.cat([
        F.interpolate(F.conv2d(first(x), weight(RNG, 4, 4, 3), stride=2, padding=1), scale_factor=2)[..., :H, :W],
        F.relu(first(x))], dim=1), weight(RNG, 3, 8, 3), padding=1)),
    "conv transpose 4x4 s2 p1": (conv.ConvolutionTranspose,
                                 lambda x: F.conv_transpose2d(first(x), weight(RNG, 4, 5, 4), stride=2, padding=1)),
    "conv transpose 3x3 s2 p1 op1": (conv.ConvolutionTranspose, lambda x: F.conv_transpose2d(
        first(x), weight(RNG, 4, 5, 3), stride=2, padding=1, output_padding=1)),
    "conv transpose groups 2, dilation 2": (conv.ConvolutionTranspose, lambda x: F.conv_transpose2d(
        first(x), weight(RNG, 4, 3, 3), padding=2, dilation=2, groups=2)),
    "U-Net decoder: conv transpose up, cat of a skip": (conv.ConvolutionTranspose, lambda x: F.conv2d(sl.cat([
        F.conv_transpose2d(F.relu(F.conv2d(first(x), weight(RNG, 6, 4, 3), stride=2, padding=1)),
                           weight(RNG, 6, 4, 3), stride=2, padding=1),  # 9x10 -> 17x19
        F.relu(first(x))], dim=1), weight(RNG, 3, 8, 3), padding=1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_windowed_equals_full_on_every_layer_type(name, monkeypatch):
    cls, fn = CASES[name]
    calls = counting(monkeypatch, cls)
    x = np.random.default_rng(1).normal(size=(2, 3, H, W))
    y = fn(sl.tensor(x))
    windowed, full, made = both_ways(fn, x, pixel_seeds(y), monkeypatch)
    assert made, "the pixel seeds should travel as windows"
    assert any(calls), f"{cls.__name__} should compute its VJP on windows"
    assert np.abs(full).max() > 0
    np.testing.assert_allclose(windowed, full, rtol=0, atol=1e-12 * np.abs(full).max())


def test_ops_without_a_window_rule_fall_back_to_the_dense_vjp(monkeypatch):
    def fn(x):  # a strided slice, a factor broadcast along the rows, a cat along the width
        scale = sl.tensor(np.linspace(1, 2, 4 * 18).reshape(4, 1, 18), requires_grad=True)
        y = first(x)[:, :, ::2, 1:] * scale
        return sl.cat([y, y[..., :3]], dim=3)

    x = np.random.default_rng(2).normal(size=(2, 3, H, W))
    y = fn(sl.tensor(x))
    windowed, full, made = both_ways(fn, x, pixel_seeds(y), monkeypatch)
    assert made
    np.testing.assert_allclose(windowed, full, rtol=0, atol=1e-12 * np.abs(full).max())


def test_region_seeds_and_a_seed_that_covers_the_whole_map(monkeypatch):
    fn = CASES["U-Net cat of a skip"][1]
    x = np.random.default_rng(3).normal(size=(1, 3, H, W))
    y = fn(sl.tensor(x))
    v = np.zeros((3,) + y.shape)
    v[0, :, :, 2:6, 3:9] = 1.0     # a small region, all channels
    v[1, :, 1, -4:, -5:] = 0.5     # a corner region of one channel
    v[2, :, :, 5, 7] = 1.0
    windowed, full, made = both_ways(fn, x, v, monkeypatch)
    assert made
    np.testing.assert_allclose(windowed, full, rtol=0, atol=1e-12 * np.abs(full).max())

    v_all = np.zeros((2,) + y.shape)
    v_all[0] = 1.0                  # covers the map: stays dense
    v_all[1, 0, 0, 0, 0] = 1.0
    windowed, full, made = both_ways(fn, x, v_all, monkeypatch)
    assert not made
    np.testing.assert_allclose(windowed, full, rtol=0, atol=1e-12 * np.abs(full).max())


def test_a_window_that_grows_to_the_whole_image_is_still_right(monkeypatch):
    def fn(x):  # a deep stack of 5x5 convolutions: the field outgrows the map after a few layers
        h = first(x)
        for _ in range(6):
            h = F.relu(F.conv2d(h, weight(RNG, 4, 4, 5), padding=2))
        return h

    x = np.random.default_rng(4).normal(size=(1, 3, H, W))
    y = fn(sl.tensor(x))
    windowed, full, made = both_ways(fn, x, pixel_seeds(y), monkeypatch)
    assert made
    np.testing.assert_allclose(windowed, full, rtol=0, atol=1e-12 * np.abs(full).max())


def test_plain_backward_of_a_pixel_seed_crops_and_fills_grad_as_before(monkeypatch):
    calls = counting(monkeypatch, conv.Convolution)
    x = np.random.default_rng(5).normal(size=(1, 3, H, W))
    w2 = sl.tensor(weight(RNG, 2, 4, 3).numpy(), requires_grad=True)

    def run():
        xt = sl.tensor(x, requires_grad=True)
        y = F.conv2d(F.relu(first(xt)), w2, padding=1)
        v = np.zeros(y.shape)
        v[0, 1, 3, 17] = 1.0
        y.backward(sl.tensor(v))
        g = (xt.grad.numpy(), w2.grad.numpy())
        w2.grad = None
        return g

    gx, gw = run()
    assert any(calls), "the first convolution (frozen weight) should run on windows"
    monkeypatch.setattr(patch, "SPARSE_AT", -1.0)
    gx_full, gw_full = run()
    np.testing.assert_allclose(gx, gx_full, rtol=0, atol=1e-13)
    np.testing.assert_allclose(gw, gw_full, rtol=0, atol=1e-13)  # the trainable conv took the dense path


def test_hooks_and_retain_grad_see_the_dense_gradient(monkeypatch):
    x = np.random.default_rng(6).normal(size=(1, 3, H, W))
    w2 = weight(RNG, 2, 4, 3)

    def run():
        seen = []
        xt = sl.tensor(x, requires_grad=True)
        h = F.relu(first(xt))
        h.retain_grad()
        h.register_hook(lambda g: seen.append(g.shape))
        y = F.conv2d(h, w2, padding=1)
        v = np.zeros(y.shape)
        v[0, 0, 8, 9] = 1.0
        y.backward(sl.tensor(v))
        assert seen == [h.shape] and h.grad.shape == h.shape
        return h.grad.numpy(), xt.grad.numpy()

    gh, gx = run()
    assert np.count_nonzero(gh) <= 4 * 9 and np.count_nonzero(gx) > 0  # a 3x3 window of each channel
    monkeypatch.setattr(patch, "SPARSE_AT", -1.0)
    gh_full, gx_full = run()
    np.testing.assert_array_equal(gh, gh_full)
    np.testing.assert_allclose(gx, gx_full, rtol=0, atol=1e-13)


def test_the_zoo_depth_model_cropped_equals_full_in_float64(monkeypatch):
    model = load("depth")
    model.double()
    for p in model.parameters():
        p.requires_grad_(False)
    x = np.random.default_rng(8).uniform(size=(1, 3, 128, 128))
    y = model(sl.tensor(x))
    v = pixel_seeds(y, extra=3)
    windowed, full, made = both_ways(model, x, v, monkeypatch)
    assert made
    np.testing.assert_allclose(windowed, full, rtol=0, atol=1e-12 * np.abs(full).max())


def test_batched_weight_and_bias_gradients_of_pixel_seeds(monkeypatch):
    calls = counting(monkeypatch, conv.Convolution)
    x = np.random.default_rng(9).normal(size=(2, 3, H, W))
    w2, b2 = (sl.tensor(a, requires_grad=True) for a in (weight(RNG, 2, 4, 3).numpy(), np.array([0.3, -0.2])))

    def run():
        xt = sl.tensor(x, requires_grad=True)
        y = F.conv2d(F.relu(first(xt)), w2, b2, stride=2, padding=1)
        return [g.numpy() for g in autograd.grad(y, [xt, w2, b2], sl.tensor(pixel_seeds(y)), batched=True)]

    windowed = run()
    assert all(calls)
    monkeypatch.setattr(patch, "SPARSE_AT", -1.0)
    for a, b in zip(windowed, run()):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(b).max())
