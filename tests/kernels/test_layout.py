"""Memory formats: channels-last arrays through the kernels that keep them (depthwise, 1x1
convolutions, elementwise activations) give the contiguous results' values, in the format they
promise; every other kernel reads them as NCHW."""
import numpy as np
import pytest

from saliency.kernels import activation, layout
from saliency.kernels import conv2d as K

from . import _reference as ref


def last(a):
    """a's values in a channels-last array."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def test_the_format_is_read_from_the_strides():
    a = np.zeros((2, 3, 4, 5), np.float32)
    assert not layout.channels_last(a) and layout.channels_last(last(a))
    assert not layout.channels_last(np.zeros((2, 3, 1, 1)))  # both formats at once: contiguous
    assert not layout.channels_last(a[:, :, ::2])  # gaps: neither
    assert layout.dense_order(last(a)) == (0, 2, 3, 1) and layout.dense_order(a[:, :, ::2]) is None
    b = last(a)
    assert np.shares_memory(layout.nhwc(b), b)


# (C, size, kernel, stride, padding, dilation): layers the cost model sends channels-last, and the
# edge cases of the generated kernels (fewer output columns than a block, 7x7, dilation, stride 2)
LAYERS = [(96, 8, 3, 1, 1, 1), (160, 7, 5, 2, 2, 1), (64, 3, 3, 1, 1, 1), (48, 9, 7, 1, 3, 1), (64, 10, 3, 1, 2, 2),
          (40, 6, (3, 5), (2, 1), (1, 2), 1)]


@pytest.mark.parametrize("case", LAYERS)
@pytest.mark.parametrize("given", ["contiguous", "channels-last"])
def test_depthwise_layers_on_either_format_equal_the_reference(case, given, monkeypatch):
    """Forward and input VJP (two seeds) of depthwise layers run channels-last (forced), from a
    contiguous or a channels-last array, equal the reference and come back channels-last."""
    monkeypatch.setattr(K.depthwise, "channels_last_pays", lambda *a, **k: True)
    C, size, k, s, p, d = case
    s, p, d = ref.pair(s), ref.pair(p), ref.pair(d)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, C, size, size))
    w = rng.standard_normal((C, 1) + ref.pair(k))
    b = rng.standard_normal(C)
    y = K.conv2d_forward(last(x) if given == "channels-last" else x, w, b, s, p, d, C)
    np.testing.assert_allclose(y, ref.conv2d(x, w, b, s, p, d, C), rtol=1e-10, atol=1e-10)
    assert layout.channels_last(y)
    g = rng.standard_normal((2,) + y.shape)
    gg = np.stack([last(g[0]), last(g[1])]) if given == "channels-last" else g
    dx = K.conv2d_grad_input(gg, w, x.shape, s, p, d, C)
    for i in range(2):
        np.testing.assert_allclose(dx[i], ref.conv2d_grad_input(g[i], w, x.shape, s, p, d, C), rtol=1e-10,
                                   atol=1e-10)
        assert layout.channels_last(dx[i]) or min(p) > d[0] * (w.shape[2] - 1)


@pytest.mark.parametrize("stride", [1, 2])
def test_pointwise_convolutions_keep_the_channels_last_format(stride):
    """A 1x1 convolution of a channels-last x is channels-last, its input VJP too, with the
    reference's values; a contiguous x stays contiguous."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 24, 7, 6)).astype(np.float32)
    w = rng.standard_normal((40, 24, 1, 1)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    want = ref.conv2d(x.astype(np.float64), w.astype(np.float64), b, stride, 0, 1)
    y = K.conv2d_forward(last(x), w, b, stride)
    assert layout.channels_last(y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    assert K.conv2d_forward(x, w, b, stride).flags.c_contiguous
    g = rng.standard_normal(y.shape).astype(np.float32)
    dx = K.conv2d_grad_input(last(g), w, x.shape, stride)
    assert layout.channels_last(dx)
    np.testing.assert_allclose(dx, ref.conv2d_grad_input(g.astype(np.float64), w.astype(np.float64), x.shape, stride,
                                                         0, 1), rtol=1e-4, atol=1e-4)


def test_other_convolutions_read_channels_last_arrays_as_nchw():
    """A dense 3x3 convolution (GEMM paths) given a channels-last x and cotangent: the reference's values."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 9, 9))
    w = rng.standard_normal((16, 8, 3, 3))
    y = K.conv2d_forward(last(x), w, None, 1, 1)
    np.testing.assert_allclose(y, ref.conv2d(x, w, np.zeros(16), 1, 1, 1), rtol=1e-10, atol=1e-10)
    g = rng.standard_normal(y.shape)
    want = ref.conv2d_grad_input(g, w, x.shape, 1, 1, 1)
    np.testing.assert_allclose(K.conv2d_grad_input(last(g), w, x.shape, 1, 1), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["relu", "silu", "gelu", "hardswish", "sigmoid", "hardtanh"])
def test_activations_keep_the_format_and_the_values(name):
    """Each activation of a channels-last array (large enough for the kernels) is channels-last with
    the values of the contiguous one; its derivative too; ReLU's VJP with two seeds."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 16, 8, 9)).astype(np.float32) * 4
    xl = last(x)
    if name == "relu":
        (y, mask), (y0, mask0) = activation.relu_forward(xl), activation.relu_forward(x)
        assert layout.channels_last(y) and layout.channels_last(mask)
        np.testing.assert_array_equal(mask, mask0)
        g = rng.standard_normal((2,) + x.shape).astype(np.float32)
        gl = np.ascontiguousarray(g.transpose(0, 1, 3, 4, 2)).transpose(0, 1, 4, 2, 3)
        np.testing.assert_array_equal(activation.relu_grad(gl, mask), g * mask0)
    elif name == "sigmoid":
        y, y0 = activation.sigmoid(xl), activation.sigmoid(x)
    elif name == "hardtanh":
        (y, mask), (y0, mask0) = activation.hardtanh(xl, 0.0, 6.0), activation.hardtanh(x, 0.0, 6.0)
        assert layout.channels_last(mask)
        np.testing.assert_array_equal(mask, mask0)
    else:
        fn = getattr(activation, name)
        (y, slope), (y0, slope0) = fn(xl, True), fn(x, True)
        assert layout.channels_last(slope)
        np.testing.assert_array_equal(slope, slope0)
    assert layout.channels_last(y)
    np.testing.assert_array_equal(y, y0)


def test_a_leaf_gradient_has_the_leafs_format_whatever_the_graph_gives():
    """A map's gradient of a contiguous input is contiguous even when the input's first layer is a
    depthwise convolution that runs channels-last (PyTorch's rule for .grad: the leaf's strides)."""
    import saliency as sl
    import saliency.nn.functional as F

    rng = np.random.default_rng(7)
    x = sl.tensor(rng.standard_normal((1, 256, 6, 6)).astype(np.float32), requires_grad=True)
    w = sl.tensor(rng.standard_normal((256, 1, 3, 3)).astype(np.float32))
    y = F.conv2d(x, w, None, 1, 1, 1, 256)
    assert layout.channels_last(y.numpy())
    y.sum().backward()
    assert x.grad.numpy().flags.c_contiguous
    want = ref.conv2d_grad_input(np.ones(y.shape), w.numpy().astype(np.float64), x.shape, 1, 1, 1, 256)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-5)


def test_channels_last_depthwise_with_padding_beyond_the_output_reach(monkeypatch):
    """A stride longer than the plane with padding wider than the output's reach (the padded copy
    is narrower than the padding): the reference's values, from a channels-last x."""
    monkeypatch.setattr(K.depthwise, "channels_last_pays", lambda *a, **k: True)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 5, 1, 2))
    w = rng.standard_normal((5, 1, 1, 1))
    y = K.conv2d_forward(last(x), w, None, 10, 3, 1, 5)
    np.testing.assert_allclose(y, ref.conv2d(x, w, np.zeros(5), 10, 3, 1, 5), rtol=1e-12, atol=1e-12)
