"""Window rules against the exact support of the VJP, found by brute force in float64.

With positive weights and positive seeds nothing cancels, so the support of a VJP is exactly the
set of input positions some path reaches: its bounding box must equal the rule's box.
"""

import numpy as np
import pytest

import saliency as sl
from saliency import autograd, nn
from saliency.autograd.windows import Box, input_boxes, receptive_box, receptive_window
from saliency.nn import functional as F

H, W = 11, 13  # not square: a row/column mix-up shows


def support(g):
    """Bounding Box of the non-zero entries of g over its last two dimensions, or None."""
    nz = (np.abs(g) > 0).reshape((-1,) + g.shape[-2:]).any(axis=0)
    rows, cols = np.nonzero(nz.any(axis=1))[0], np.nonzero(nz.any(axis=0))[0]
    return Box(int(rows[0]), int(cols[0]), int(rows[-1]) + 1, int(cols[-1]) + 1) if rows.size else None


def positive(rng, shape):
    return sl.tensor(rng.uniform(0.5, 1.5, shape))


def leaf(rng, shape=(2, 3, H, W)):
    return sl.tensor(rng.uniform(0.5, 1.5, shape), requires_grad=True)


def boxes_of(shape, rng, n=6):
    """Pixel boxes at the corners and the centre, plus random boxes, of a map of `shape`."""
    h, w = shape[-2:]
    out = [Box(r, c, r + 1, c + 1) for r, c in [(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1), (h // 2, w // 2)]]
    for _ in range(n):
        r0, c0 = rng.integers(0, h), rng.integers(0, w)
        out.append(Box(int(r0), int(c0), int(rng.integers(r0 + 1, h + 1)), int(rng.integers(c0 + 1, w + 1))))
    return out


def check_op(fn, inputs, rng, exact=True):
    """For boxes of fn(*inputs)'s output: the support of each input's VJP against the rules (for one
    op, its input_boxes; for a few ops, the walk)."""
    y = fn(*inputs)
    for box in boxes_of(y.shape, rng):
        v = np.zeros(y.shape)
        v[..., box.r0:box.r1, box.c0:box.c1] = rng.uniform(0.5, 1.5, v[..., box.r0:box.r1, box.c0:box.c1].shape)
        grads = autograd.grad(y, inputs, v, retain_graph=True, allow_unused=True)
        want = [receptive_window(y, x, box) for x in inputs]
        for g, b in zip(grads, want):
            got = support(g.numpy())
            if exact:
                assert got == b, (box, got, b)
            else:  # contained
                assert got is not None and b.r0 <= got.r0 and b.c0 <= got.c0 and got.r1 <= b.r1 and got.c1 <= b.c1


@pytest.mark.parametrize("kernel, stride, padding, dilation", [
    (1, 1, 0, 1), (3, 1, 1, 1), (3, 2, 0, 1), (3, 2, 1, 1), (3, 1, 2, 1), (5, 2, 2, 1), (3, 1, 2, 2),
    (3, 2, 1, 2), (3, 3, 0, 3), ((3, 2), (2, 1), (1, 0), (1, 2)), (2, 2, 1, 1), (1, 1, 2, 1)])
def test_convolution(kernel, stride, padding, dilation):
    rng = np.random.default_rng(0)
    k = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    x, w = leaf(rng), positive(rng, (4, 3) + k)
    check_op(lambda x: F.conv2d(x, w, None, stride, padding, dilation), [x], rng)


def test_grouped_convolution_has_the_same_window():
    rng = np.random.default_rng(1)
    x, w = leaf(rng, (1, 4, H, W)), positive(rng, (4, 2, 3, 3))
    check_op(lambda x: F.conv2d(x, w, None, 2, 1, 1, groups=2), [x], rng)


@pytest.mark.parametrize("kernel, stride, padding, output_padding, dilation, groups", [
    (1, 1, 0, 0, 1, 1), (3, 1, 1, 0, 1, 1), (3, 2, 1, 1, 1, 1), (4, 2, 1, 0, 1, 1), (3, 2, 0, 0, 2, 2),
    (1, 2, 0, 1, 1, 1), (3, 1, 0, 2, 3, 1), (5, 3, 2, 2, 1, 1), ((3, 2), (2, 1), (1, 0), (1, 0), (1, 2), 1)])
def test_transposed_convolution(kernel, stride, padding, output_padding, dilation, groups):
    """Exact, also where a stride leaves output rows that no input reaches (kernel 1, stride 2)."""
    rng = np.random.default_rng(5)
    k = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    x, w = leaf(rng, (1, 4, 6, 5)), positive(rng, (4, 4 // groups) + k)
    check_op(lambda x: F.conv_transpose2d(x, w, None, stride, padding, output_padding, groups, dilation), [x], rng)


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_fused_upsample_convolution(scale):
    rng = np.random.default_rng(2)
    x, w = leaf(rng, (1, 2, 5, 6)), positive(rng, (3, 2, 3, 3))
    y = F.upsample_conv2d(x, w, None, scale)
    assert y.grad_fn.name() == "UpsampleConvolutionBackward0"
    check_op(lambda x: F.upsample_conv2d(x, w, None, scale), [x], rng)


@pytest.mark.parametrize("kernel, stride, padding", [(2, None, 0), (3, 1, 1), (3, 2, 1), (2, 1, 1), (3, 3, 0)])
def test_average_pooling(kernel, stride, padding):
    rng = np.random.default_rng(3)
    check_op(lambda x: F.avg_pool2d(x, kernel, stride, padding), [leaf(rng)], rng)


@pytest.mark.parametrize("kernel, stride, padding", [(2, None, 0), (3, 1, 1), (3, 2, 1)])
def test_max_pooling_gradient_stays_inside_the_window_box(kernel, stride, padding):
    rng = np.random.default_rng(4)
    check_op(lambda x: F.max_pool2d(x, kernel, stride, padding), [leaf(rng)], rng, exact=False)
    x = leaf(rng, (1, 1, 4, 4))
    y = F.max_pool2d(x, 2)
    assert input_boxes(y.grad_fn, Box(1, 0, 2, 1)) == (Box(2, 0, 4, 2),)


@pytest.mark.parametrize("out", [(1, 1), (3, 4), (5, 2), (H, W)])
def test_adaptive_average_pooling(out):
    rng = np.random.default_rng(5)
    check_op(lambda x: F.adaptive_avg_pool2d(x, out), [leaf(rng)], rng)
    if out == (1, 1):
        x = leaf(rng)
        assert input_boxes(F.adaptive_avg_pool2d(x, 1).grad_fn, Box(0, 0, 1, 1)) == (Box(0, 0, H, W),)


@pytest.mark.parametrize("call", [
    lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), lambda x: F.avg_pool2d(x, 3, 2, 1, True, False),
    lambda x: F.avg_pool2d(x, (2, 3), (2, 1), (1, 0), divisor_override=2), lambda x: F.adaptive_avg_pool2d(x, (None, 4)),
    lambda x: F.group_norm(x, 1), lambda x: F.layer_norm(x, (H, W)), lambda x: F.instance_norm(x)])
def test_pooling_with_pytorchs_other_arguments_and_per_sample_norms(call):
    rng = np.random.default_rng(6)
    check_op(call, [leaf(rng)], rng)


@pytest.mark.parametrize("call", [
    lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), lambda x: F.max_pool2d(x, (3, 2), 1, 1, dilation=(2, 3)),
    lambda x: F.adaptive_max_pool2d(x, (4, 3)), lambda x: F.adaptive_max_pool2d(x, (12, 13))])
def test_max_pooling_with_other_arguments_stays_inside_the_window_box(call):
    rng = np.random.default_rng(7)
    check_op(call, [leaf(rng)], rng, exact=False)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("scale", [1, 2, 3, 4])
def test_upsampling(mode, scale):
    rng = np.random.default_rng(6)
    check_op(lambda x: F.interpolate(x, scale_factor=scale, mode=mode), [leaf(rng, (1, 2, 5, 4))], rng)


def test_bilinear_reads_two_rows_clamped_at_the_edges():
    x = sl.tensor(np.ones((1, 1, 4, 4)), requires_grad=True)
    node = F.interpolate(x, scale_factor=2, mode="bilinear").grad_fn
    assert input_boxes(node, Box(0, 0, 1, 1)) == (Box(0, 0, 1, 1),)  # source -0.25 clamps to 0
    assert input_boxes(node, Box(1, 2, 2, 3)) == (Box(0, 0, 2, 2),)  # sources 0.25 and 0.75
    assert input_boxes(node, Box(7, 7, 8, 8)) == (Box(3, 3, 4, 4),)  # source 3.25, clipped to row 3


def test_elementwise_and_broadcasting():
    rng = np.random.default_rng(7)
    x, b = leaf(rng), leaf(rng, (1, 3, 1, W))
    check_op(lambda x, b: sl.sigmoid(x * b + 1.0), [x, b], rng)
    y = x * b
    assert input_boxes(y.grad_fn, Box(2, 3, 5, 7)) == (Box(2, 3, 5, 7), Box(0, 3, 1, 7))
    s = leaf(rng, ())
    assert input_boxes((x + s).grad_fn, Box(2, 3, 5, 7)) == (Box(2, 3, 5, 7), Box(0, 0, 1, 1))


def test_cat_along_channels_and_along_the_map():
    rng = np.random.default_rng(8)
    a, b = leaf(rng, (1, 2, H, W)), leaf(rng, (1, 3, H, W))
    check_op(lambda a, b: sl.cat([a, b], dim=1), [a, b], rng)
    c = leaf(rng, (1, 2, 4, W))
    check_op(lambda a, c: sl.cat([a, c], dim=2), [a, c], rng)
    d = leaf(rng, (1, 2, H, 3))
    check_op(lambda d, a: sl.cat([d, a], dim=3), [d, a], rng)
    const = sl.tensor(rng.uniform(size=(1, 2, H, 3)))   # a block that takes no gradient
    check_op(lambda a: sl.cat([const, a], dim=3), [a], rng)
    check_op(lambda a: sl.cat([a, sl.zeros(1, 2, 3, W)], dim=2), [a], rng)


def test_pad_slicing_and_transposes():
    rng = np.random.default_rng(9)
    x = leaf(rng)
    check_op(lambda x: F.pad(x, (2, 1, 3, 0)), [x], rng)
    check_op(lambda x: x[:, 1:, 2:9, 1::3], [x], rng)
    check_op(lambda x: x[0, ..., ::2, 4:], [x], rng)
    check_op(lambda x: x.transpose(2, 3) * 2.0, [x], rng)
    check_op(lambda x: x.permute(1, 0, 3, 2), [x], rng)
    check_op(lambda x: x.reshape(6, H, W).unsqueeze(0), [x], rng)
    y = x[:, :, 2:5]
    assert input_boxes(y.grad_fn, Box(1, 4, 2, 6)) == (Box(3, 4, 4, 6),)


def test_channel_reductions_keep_the_box_and_spatial_ones_take_the_whole_map():
    rng = np.random.default_rng(10)
    x = leaf(rng)
    check_op(lambda x: x.sum(dim=1), [x], rng)
    check_op(lambda x: sl.softmax(x, dim=1), [x], rng)
    assert input_boxes(x.mean(dim=(2, 3)).grad_fn, Box(0, 0, 1, 1)) == (Box(0, 0, H, W),)
    assert input_boxes(x.sum().grad_fn, Box(0, 0, 1, 1)) == (Box(0, 0, H, W),)


def test_batch_norm_eval_keeps_the_box_and_training_takes_the_whole_map():
    rng = np.random.default_rng(11)
    mean, var, g, b = np.zeros(3), np.ones(3), positive(rng, 3), positive(rng, 3)
    for training in (False, True):
        check_op(lambda x, t=training: F.batch_norm(x, mean.copy(), var.copy(), g, b, training=t), [leaf(rng)], rng)
    y = F.batch_norm(leaf(rng), mean, var, g, b, training=True)
    assert input_boxes(y.grad_fn, Box(3, 3, 4, 4))[0] == Box(0, 0, H, W)


def test_flatten_and_linear_take_the_whole_map():
    rng = np.random.default_rng(12)
    x = leaf(rng, (1, 2, 5, 6))
    y = nn.Sequential(nn.Flatten(), nn.Linear(60, 4)).double()(x)
    assert receptive_box(y, x, 0, 2) == Box(0, 0, 5, 6)


# ---- whole graphs --------------------------------------------------------------------------------

def make_positive(model, scale=None):
    """Every parameter abs(w) + 0.1 (times 1/fan-in, so activations stay O(1)): no cancellation, and
    with a positive input every ReLU is active."""
    for name, p in model.named_parameters():
        fan_in = int(np.prod(p.shape[1:])) if p.ndim > 1 else 1
        rng = np.random.default_rng(len(name))
        p.data = (np.abs(rng.standard_normal(p.shape)) + 0.1) / (fan_in if scale is None else scale)
    return model.double().eval()


def pixel_seeds(shape, rng, extra=4):
    h, w = shape[-2:]
    pts = {(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1), (0, w // 2), (h // 2, 0), (h - 1, w // 3),
           (h // 3, w - 1), (h // 2, w // 2)}
    pts |= {(int(rng.integers(h)), int(rng.integers(w))) for _ in range(extra)}
    return sorted(pts)


def check_model(model, x_shape, seed=0):
    """For pixel seeds at corners, borders and inside: support of the gradient == receptive_box."""
    rng = np.random.default_rng(seed)
    x = leaf(rng, x_shape)
    y = model(x)
    pts = pixel_seeds(y.shape, rng)
    want = [receptive_box(y, x, r, c) for r, c in pts]
    v = np.zeros((len(pts),) + y.shape)
    for j, (r, c) in enumerate(pts):
        v[j, ..., r, c] = 1.0
    (g,) = autograd.grad(y, x, v, batched=True)
    for j, p in enumerate(pts):
        assert support(g.numpy()[j]) == want[j], (p, support(g.numpy()[j]), want[j])
    return dict(zip(pts, want))


@pytest.mark.parametrize("n", [1, 2, 4])
def test_stacked_3x3_convolutions_reach_2n_plus_1(n):
    model = make_positive(nn.Sequential(*[nn.Conv2d(1, 1, 3, padding=1) for _ in range(n)]))
    boxes = check_model(model, (1, 1, 15, 16))
    assert boxes[(7, 8)] == Box(7 - n, 8 - n, 8 + n, 9 + n) and boxes[(7, 8)].size == (2 * n + 1, 2 * n + 1)
    assert boxes[(0, 0)] == Box(0, 0, n + 1, n + 1)


def random_layer(rng, c):
    """A random layer keeping c channels: conv (stride 2, dilation 2, padding 0/1/2), pooling,
    upsampling, batch norm or ReLU. A dilated conv pads a multiple of its dilation (see windows.py)."""
    kind = rng.choice(["conv", "dilated", "stride", "avg", "up", "bn", "relu"])
    if kind == "conv":
        k = int(rng.choice([1, 2, 3, 5]))
        return nn.Conv2d(c, c, k, padding=int(rng.integers(0, min(2, k - 1) + 1)))
    if kind == "dilated":
        return nn.Conv2d(c, c, 3, padding=int(rng.choice([0, 2])), dilation=2)
    if kind == "stride":
        return nn.Conv2d(c, c, 3, stride=2, padding=int(rng.integers(0, 2)))
    if kind == "avg":
        return nn.AvgPool2d(int(rng.choice([2, 3])), stride=int(rng.choice([1, 2])), padding=int(rng.integers(0, 2)))
    if kind == "up":
        return nn.Upsample(scale_factor=int(rng.choice([2, 3])), mode=str(rng.choice(["nearest", "bilinear"])))
    return nn.BatchNorm2d(c) if kind == "bn" else nn.ReLU()


@pytest.mark.parametrize("seed", range(8))
def test_random_cnns(seed):
    rng = np.random.default_rng(100 + seed)
    layers, size = [nn.Conv2d(2, 3, 3, padding=1)], 20
    while len(layers) < 6:
        layer = random_layer(rng, 3)
        probe = nn.Sequential(*layers, layer).double()
        out = probe(sl.tensor(np.ones((1, 2, size, size)))).shape[-1]
        if 4 <= out <= 40:
            layers.append(layer)
    check_model(make_positive(nn.Sequential(*layers)), (2, 2, size, size - 2), seed)


class Skip(nn.Module):
    """conv -> [stride-2 conv -> upsample x2 -> conv] cat [the first conv's features] -> conv."""

    def __init__(self, mode):
        super().__init__()
        self.inc = nn.Conv2d(2, 3, 3, padding=1)
        self.down = nn.Conv2d(3, 3, 3, stride=2, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode=mode)
        self.mix = nn.Conv2d(3, 3, 5, padding=2)
        self.out = nn.Conv2d(6, 2, 3, padding=1)

    def forward(self, x):
        e = sl.relu(self.inc(x))
        d = self.mix(self.up(sl.relu(self.down(e))))
        return self.out(sl.cat([d, e], dim=1))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_skip_connections(mode):
    boxes = check_model(make_positive(Skip(mode)), (1, 2, 16, 18))
    assert boxes[(8, 9)].size[0] < 16  # not the whole map: the test would be empty otherwise


def test_fused_upsample_conv_in_a_sequential():
    model = make_positive(nn.fuse(nn.Sequential(nn.Conv2d(2, 2, 3, stride=2), nn.Upsample(scale_factor=2),
                                                nn.Conv2d(2, 2, 3, padding=1))))
    x = leaf(np.random.default_rng(0), (1, 2, 13, 13))
    assert model(x).grad_fn.name() == "UpsampleConvolutionBackward0"
    check_model(model, (1, 2, 13, 13))


def test_depth_unet():
    from saliency.models import architectures
    model = make_positive(architectures.DepthNet(widths=(2, 2, 2, 2, 2)))
    boxes = check_model(model, (1, 3, 128, 96))
    assert boxes[(0, 0)].size[0] < 70 and boxes[(127, 95)].size[1] < 80


# ---- the walk ------------------------------------------------------------------------------------

def test_walk_to_an_intermediate_tensor_and_union_over_paths():
    rng = np.random.default_rng(13)
    x = leaf(rng, (1, 1, 12, 12))
    w = positive(rng, (1, 1, 3, 3))
    h = F.conv2d(x, w, None, 1, 1)
    y = h[..., :6, :] + F.conv2d(h, w, None, 1, 1)[..., 6:, :]  # y[2, 2] = h[2, 2] + conv(h)[8, 2]
    assert receptive_box(y, h, 2, 2) == Box(2, 1, 10, 4)
    assert receptive_box(y, x, 2, 2) == Box(1, 0, 11, 5)
    v = np.zeros(y.shape)
    v[..., 2, 2] = 1
    assert support(autograd.grad(y, x, v, retain_graph=True)[0].numpy()) == Box(1, 0, 11, 5)
    assert receptive_window(y, x, Box(0, 0, 1, 12)) == Box(0, 0, 9, 12)
    assert receptive_window(y, h, Box(0, 0, 1, 12)) == Box(0, 0, 8, 12)


def test_errors():
    x = leaf(np.random.default_rng(14), (1, 1, 4, 4))
    y = x * 2.0
    with pytest.raises(ValueError, match=r"pixel \(4, 0\) is outside the 4x4 output map"):
        receptive_box(y, x, 4, 0)
    with pytest.raises(ValueError, match="no grad_fn"):
        receptive_box(x.detach(), x, 0, 0)
    other = leaf(np.random.default_rng(15), (1, 1, 4, 4))
    with pytest.raises(ValueError, match="not reached from output"):
        receptive_box(y, other, 0, 0)


def test_a_box_can_exceed_the_support_when_dilation_leaves_holes_at_the_border():
    # the top conv reads rows {0, 2} of the middle map for output row 0 (row -2 is padding); the
    # box [0, 3) also holds row 1, whose window reaches input row 0, which rows 0 and 2 do not
    model = make_positive(nn.Sequential(nn.Conv2d(1, 1, 3, padding=1, dilation=2),
                                        nn.Conv2d(1, 1, 3, padding=2, dilation=2)))
    x = leaf(np.random.default_rng(16), (1, 1, 12, 12))
    y = model(x)
    v = np.zeros(y.shape)
    v[..., 0, 5] = 1
    assert support(autograd.grad(y, x, v, retain_graph=True)[0].numpy()) == Box(1, 2, 6, 11)
    assert receptive_box(y, x, 0, 5) == Box(0, 2, 6, 11)


@pytest.mark.parametrize("fused", [False, True], ids=["conv2d", "upsample_conv2d"])
def test_the_weights_of_a_convolution_whose_input_takes_no_gradient(fused):
    x = sl.tensor(np.ones((1, 2, 5, 5), np.float32))                 # does not require grad
    w = sl.tensor(np.ones((3, 2, 3, 3), np.float32), requires_grad=True)
    y = F.upsample_conv2d(x, w, None, 2) if fused else F.conv2d(x, w, padding=1)
    assert receptive_box(y, w, 2, 2) == Box(0, 0, 3, 3)               # every weight tap is read
