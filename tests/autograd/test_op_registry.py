"""Every op in the package declares where its VJP can be non-zero and whether it has a cropped VJP, and
every cropped VJP equals the dense one.

The ops are found by walking `Function.__subclasses__()` after importing every module of the package,
so a new op is checked without being listed here: it fails by name when it has no `window_rule`
(forgetting one used to give it whole-map windows silently), when its window rule is local but it
leaves `backward_window` undeclared (forgetting one used to make it dense silently), and when it has a
cropped VJP that no case below exercises.
"""
import importlib
import os
import pkgutil
import zlib

import numpy as np
import pytest

import saliency
import saliency as sl
from saliency.autograd import Function, geometry, relu_rule
from saliency.autograd.node import DENSE
from saliency.autograd.ops import activation
from saliency.autograd.ops import conv, elementwise, loss, norm, pad, pool, reduce, resize, shape, shuffle
from saliency.autograd.patch import Patch
from saliency.autograd.windows import Box, input_boxes, receptive_window
from saliency.kernels import window as kernel_window
from saliency.nn import functional as F

N, C, H, W = 2, 3, 9, 11  # not square: a row/column mix-up shows


def package_ops():
    """Every Function subclass defined in the saliency package (all its modules imported first)."""
    # saliency.__path__ also holds the repository root (for saliency.models and saliency.cli): walk the
    # package's own folder, then those two, so that no folder is walked twice
    roots = [(os.path.dirname(saliency.__file__), "saliency.")]
    roots += [(importlib.import_module(f"saliency.{sub}").__path__[0], f"saliency.{sub}.") for sub in ("models", "cli")]
    for path, prefix in roots:
        for info in pkgutil.walk_packages([path], prefix):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
    found, stack = [], [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("saliency.") and sub not in found:
                found.append(sub)
    return found


OPS = package_ops()


def test_the_walk_finds_the_ops_of_every_family_and_the_hook_nodes():
    names = {cls.__name__ for cls in OPS}
    assert {"Add", "Relu", "Convolution", "MaxPool2d", "Upsample", "Sum", "Reshape", "Matmul", "NllLoss",
            "BatchNorm", "_Gate", "_Carry"} <= names


def test_every_op_declares_a_window_rule():
    missing = [f"{cls.__module__}.{cls.__qualname__}" for cls in OPS if not callable(getattr(cls, "window_rule", None))]
    assert not missing, ("these ops declare no window_rule (give them geometry.elementwise_window, a method "
                         "window_rule(self, box, shapes), or geometry.whole_window if they mix positions): "
                         + ", ".join(missing))


def test_every_op_declares_its_attribution_rule():
    """Each op says what it is to the rule-based methods (saliency.autograd.rules: PASS, SPLIT,
    ROUTE, WINNER, WEIGHTS, BATCHNORM, or NONE: no sound rule), in its class or its family's, as a
    Kind or as a property giving one; and an op of kind WEIGHTS offers what the weight rules run."""
    from saliency.autograd import rules

    missing, weights = [], []
    for cls in OPS:
        if cls.__name__.startswith("_") and cls.__subclasses__():
            continue  # a family's base class (_Binary, _Reduction): its members declare theirs
        lineage = cls.__mro__[:cls.__mro__.index(Function)]
        declared = next((k.__dict__["rule"] for k in lineage if "rule" in k.__dict__), None)
        if not isinstance(declared, (rules.Kind, property)):
            missing.append(f"{cls.__module__}.{cls.__qualname__}")
        if declared is rules.WEIGHTS or isinstance(declared, property) and hasattr(cls, "affine"):
            weights.append(cls)
    assert not missing, ("these ops declare no attribution rule (rule = rules.PASS, SPLIT, ROUTE, WINNER, "
                         "WEIGHTS, BATCHNORM or NONE): " + ", ".join(missing))
    assert {c.__name__ for c in weights} >= {"Convolution", "ConvolutionTranspose", "UpsampleConvolution", "Linear",
                                             "Matmul"}
    for cls in weights:
        assert callable(getattr(cls, "affine", None)) and callable(getattr(cls, "affine_vjp", None)), cls
        assert getattr(cls, "family", None) in ("conv", "linear"), cls


def declared_in(cls):
    """The class of `cls`'s lineage (itself, or a family base between it and Function) that declares its
    `backward_window`, or None when it is Function's default."""
    lineage = cls.__mro__[:cls.__mro__.index(Function)]
    return next((k for k in lineage if "backward_window" in k.__dict__), None)


def undeclared(ops):
    """The ops whose window rule is not the whole map that leave `backward_window` undeclared."""
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in ops
            if getattr(cls, "window_rule", None) is not geometry.whole_window and declared_in(cls) is None]


def test_every_op_with_a_local_window_rule_declares_its_cropped_vjp():
    missing = undeclared(OPS)
    assert not missing, ("these ops have a local window rule but do not say whether they have a cropped VJP: "
                         "give them backward_window (a method, a shared one such as elementwise.unary_window, or "
                         "DENSE from saliency.autograd.node with the reason) in their class: " + ", ".join(missing))


class _Local(Function):
    """An op of a local window rule that declares nothing about its cropped VJP."""

    window_rule = geometry.elementwise_window


class _Declared(_Local):
    backward_window = DENSE


class _Inherits(_Declared):
    pass


class _Whole(Function):
    window_rule = geometry.whole_window


def test_the_declaration_check_names_an_op_that_leaves_it_to_the_default():
    assert undeclared([_Local, _Declared, _Inherits, _Whole]) == [f"{__name__}._Local"]
    assert declared_in(_Inherits) is _Declared
    assert declared_in(elementwise.Neg) is elementwise.Neg
    assert elementwise.Neg.backward_window is elementwise.unary_window
    assert declared_in(elementwise.Div) is declared_in(elementwise.Minimum) is elementwise._Binary
    assert declared_in(reduce.Sum) is reduce._Reduction and reduce.Sum.backward_window is DENSE
    assert loss.Softmax.backward_window is DENSE


def test_an_op_with_a_cropped_vjp_has_a_local_window_rule():
    """A cropped VJP means the gradient stays local; its window rule must say where, not the whole map."""
    whole = [cls.__name__ for cls in OPS
             if getattr(cls, "backward_window", None) is not None
             and getattr(cls, "window_rule", None) is geometry.whole_window]
    assert not whole


class Identity(Function):
    """A user's op, defined without a window rule."""

    def forward(self, x):
        return x.copy()

    def backward(self, g):
        return (g,)


def test_a_user_function_without_a_window_rule_gets_the_whole_map():
    x = sl.tensor(np.ones((1, 2, 5, 7)), requires_grad=True)
    y = Identity.apply(x)
    assert input_boxes(y.grad_fn, Box(1, 2, 2, 3)) == (Box(0, 0, 5, 7),)
    z = sl.relu(y * 2)  # elementwise ops keep the box, down to the user's node
    assert receptive_window(z, y, Box(1, 2, 2, 3)) == Box(1, 2, 2, 3)
    assert receptive_window(z, x, Box(1, 2, 2, 3)) == Box(0, 0, 5, 7)


# ---- cropped VJP == dense VJP, op by op, on random windows ---------------------------------------------
def leaf(rng, shape=(N, C, H, W), low=None):
    a = rng.normal(size=shape) if low is None else rng.uniform(low, low + 2, shape)
    return sl.tensor(a, requires_grad=True)


def const(rng, shape):
    return sl.tensor(rng.normal(size=shape))


# (id, op class, graph builder rng -> output whose grad_fn is the op, whether the cropped VJP applies
#  [, the relu_rule the backward runs under])
CASES = [
    ("add", elementwise.Add, lambda r: leaf(r) + leaf(r), True),
    ("add a broadcast bias", elementwise.Add, lambda r: leaf(r) + leaf(r, (1, C, 1, 1)), True),
    ("add a number", elementwise.Add, lambda r: leaf(r) + 2.0, True),
    ("sub", elementwise.Sub, lambda r: leaf(r) - leaf(r), True),
    ("number - tensor", elementwise.Sub, lambda r: 1.0 - leaf(r), True),
    ("mul", elementwise.Mul, lambda r: leaf(r) * leaf(r), True),
    ("mul by a constant map", elementwise.Mul, lambda r: leaf(r) * const(r, (N, C, H, W)), True),
    ("mul by a number", elementwise.Mul, lambda r: leaf(r) * 3.0, True),
    ("mul by a broadcast factor", elementwise.Mul, lambda r: leaf(r) * leaf(r, (1, C, 1, 1)), True),
    ("mul by a constant per channel", elementwise.Mul, lambda r: leaf(r) * const(r, (1, C, 1, 1)), True),
    ("mul by a map of each image", elementwise.Mul, lambda r: leaf(r, (N, 1, H, W)) * leaf(r), True),
    ("mul by a row", elementwise.Mul, lambda r: leaf(r) * leaf(r, (N, C, 1, W)), False),
    ("div", elementwise.Div, lambda r: leaf(r) / leaf(r, low=0.5), True),
    ("div by a broadcast divisor", elementwise.Div, lambda r: leaf(r) / leaf(r, (1, C, 1, 1), low=0.5), True),
    ("number / tensor", elementwise.Div, lambda r: 2.0 / leaf(r, low=0.5), True),
    ("div by a constant map", elementwise.Div, lambda r: leaf(r) / (const(r, (H, W)) ** 2 + 0.5), True),
    ("div by a column", elementwise.Div, lambda r: leaf(r) / leaf(r, (N, C, H, 1), low=0.5), False),
    ("tensor ** number", elementwise.Pow, lambda r: leaf(r, low=0.5) ** 1.7, True),
    ("tensor ** tensor", elementwise.Pow, lambda r: leaf(r, low=0.5) ** leaf(r), True),
    ("number ** tensor", elementwise.Pow, lambda r: 2.0 ** leaf(r), True),
    ("maximum", elementwise.Maximum, lambda r: sl.maximum(leaf(r), leaf(r)), True),
    ("maximum with ties", elementwise.Maximum, lambda r: (lambda a: sl.maximum(a, sl.clamp(a, -0.3, 0.3)))(leaf(r)),
     True),
    ("minimum with a broadcast bound", elementwise.Minimum, lambda r: sl.minimum(leaf(r), leaf(r, (1, C, 1, 1))), True),
    ("where", elementwise.Where, lambda r: sl.where(r.normal(size=(N, C, H, W)) > 0, leaf(r), leaf(r)), True),
    ("where, a map condition and a number", elementwise.Where,
     lambda r: sl.where(r.normal(size=(H, W)) > 0, leaf(r), 0.5), True),
    ("where, a condition per channel and a broadcast operand", elementwise.Where,
     lambda r: sl.where(r.normal(size=(N, C, 1, 1)) > 0, leaf(r, (1, C, 1, 1)), leaf(r)), True),
    ("where, the other operand frozen", elementwise.Where,
     lambda r: sl.where(r.normal(size=(N, 1, H, W)) > 0, const(r, (N, C, H, W)), leaf(r)), True),
    ("where, a condition per row", elementwise.Where,
     lambda r: sl.where(r.normal(size=(N, C, H, 1)) > 0, leaf(r), leaf(r)), False),
    ("neg", elementwise.Neg, lambda r: -leaf(r), True),
    ("exp", elementwise.Exp, lambda r: sl.exp(leaf(r)), True),
    ("log", elementwise.Log, lambda r: sl.log(leaf(r, low=0.5)), True),
    ("sqrt", elementwise.Sqrt, lambda r: sl.sqrt(leaf(r, low=0.5)), True),
    ("abs", elementwise.Abs, lambda r: sl.abs(leaf(r)), True),
    ("relu", elementwise.Relu, lambda r: sl.relu(leaf(r)), True),
    ("relu, guided backprop", elementwise.Relu, lambda r: sl.relu(leaf(r)), True, "guided"),
    ("sigmoid", elementwise.Sigmoid, lambda r: sl.sigmoid(leaf(r)), True),
    ("tanh", elementwise.Tanh, lambda r: sl.tanh(leaf(r)), True),
    ("clamp", elementwise.Clamp, lambda r: sl.clamp(leaf(r), -0.5, 0.3), True),
    ("cast to float32", elementwise.Cast, lambda r: leaf(r).float(), True),
    ("clone", elementwise.Clone, lambda r: sl.clone(leaf(r)), True),
    ("relu6", activation.Hardtanh, lambda r: F.relu6(3 * leaf(r)), True),
    ("hardtanh", activation.Hardtanh, lambda r: F.hardtanh(leaf(r), -0.5, 0.3), True),
    ("leaky relu", activation.LeakyRelu, lambda r: F.leaky_relu(leaf(r), 0.1), True),
    ("elu", activation.Elu, lambda r: F.elu(leaf(r), 0.7), True),
    ("silu", activation.Silu, lambda r: F.silu(leaf(r)), True),
    ("hardswish", activation.Hardswish, lambda r: F.hardswish(3 * leaf(r)), True),
    ("hardsigmoid", activation.Hardsigmoid, lambda r: F.hardsigmoid(3 * leaf(r)), True),
    ("gelu", activation.Gelu, lambda r: F.gelu(leaf(r)), True),
    ("gelu tanh", activation.Gelu, lambda r: F.gelu(leaf(r), approximate="tanh"), True),
    ("erf", activation.Erf, lambda r: sl.erf(leaf(r)), True),
    ("softplus", activation.Softplus, lambda r: F.softplus(leaf(r), 2.0, 1.0), True),
    ("mish", activation.Mish, lambda r: F.mish(leaf(r)), True),
    ("prelu, frozen weight per channel", activation.Prelu, lambda r: F.prelu(leaf(r), const(r, (C,))), True),
    ("prelu, trainable weight per channel", activation.Prelu, lambda r: F.prelu(leaf(r), leaf(r, (C,))), True),
    ("prelu, one trainable weight", activation.Prelu, lambda r: F.prelu(leaf(r), leaf(r, (1,))), True),
    ("prelu, trainable weight only", activation.Prelu, lambda r: F.prelu(const(r, (N, C, H, W)), leaf(r, (C,))), True),
    ("prelu on (C, H, W), trainable weight per channel", activation.Prelu,
     lambda r: F.prelu(leaf(r, (C, H, W)), leaf(r, (H,))), False),
    ("conv 3x3 p1", conv.Convolution, lambda r: F.conv2d(leaf(r), const(r, (4, C, 3, 3)), padding=1), True),
    ("conv 5x3 s2 p(2,1) d(1,2)", conv.Convolution,
     lambda r: F.conv2d(leaf(r), const(r, (4, C, 5, 3)), stride=2, padding=(2, 1), dilation=(1, 2)), True),
    ("conv groups 3", conv.Convolution,
     lambda r: F.conv2d(leaf(r), const(r, (6, 1, 3, 3)), stride=(1, 2), padding=1, groups=3), True),
    ("conv with trainable weight and bias", conv.Convolution,
     lambda r: F.conv2d(leaf(r), leaf(r, (4, C, 3, 3)), leaf(r, (4,)), stride=2, padding=1), True),
    ("conv transpose 3x3 s2 p1 op1", conv.ConvolutionTranspose,
     lambda r: F.conv_transpose2d(leaf(r), const(r, (C, 4, 3, 3)), stride=2, padding=1, output_padding=1), True),
    ("conv transpose 4x4 s2 p1 (U-Net)", conv.ConvolutionTranspose,
     lambda r: F.conv_transpose2d(leaf(r), const(r, (C, 4, 4, 4)), stride=2, padding=1), True),
    ("conv transpose (3, 2) s(3, 1) p(2, 0) d(1, 2) op(2, 1) groups 3", conv.ConvolutionTranspose,
     lambda r: F.conv_transpose2d(leaf(r), const(r, (C, 2, 3, 2)), stride=(3, 1), padding=(2, 0),
                                  output_padding=(2, 1), groups=3, dilation=(1, 2)), True),
    ("conv transpose 1x1 s2", conv.ConvolutionTranspose,
     lambda r: F.conv_transpose2d(leaf(r), const(r, (C, 4, 1, 1)), stride=2), True),
    ("conv transpose with trainable weight and bias", conv.ConvolutionTranspose,
     lambda r: F.conv_transpose2d(leaf(r), leaf(r, (C, 4, 3, 3)), leaf(r, (4,)), stride=2, padding=1,
                                  output_padding=1), True),
    ("upsample + conv fused", conv.UpsampleConvolution,
     lambda r: F.upsample_conv2d(leaf(r), const(r, (4, C, 3, 3)), scale_factor=2), True),
    ("upsample + conv, trainable weight", conv.UpsampleConvolution,
     lambda r: F.upsample_conv2d(leaf(r), leaf(r, (4, C, 3, 3)), scale_factor=2), False),
    ("max pool 2", pool.MaxPool2d, lambda r: F.max_pool2d(leaf(r), 2), True),
    ("max pool 3 s2 p1", pool.MaxPool2d, lambda r: F.max_pool2d(leaf(r), 3, 2, 1), True),
    ("avg pool 2", pool.AvgPool2d, lambda r: F.avg_pool2d(leaf(r), 2), True),
    ("avg pool (3, 2) s(2, 1) p1", pool.AvgPool2d, lambda r: F.avg_pool2d(leaf(r), (3, 2), (2, 1), 1), True),
    ("max pool 3 s2 p1 ceil", pool.MaxPool2d, lambda r: F.max_pool2d(leaf(r), 3, 2, 1, ceil_mode=True), True),
    ("max pool (3, 2) s(2, 1) p1 d(2, 3)", pool.MaxPool2d,
     lambda r: F.max_pool2d(leaf(r), (3, 2), (2, 1), 1, dilation=(2, 3)), True),
    ("avg pool 3 s2 p1 ceil", pool.AvgPool2d, lambda r: F.avg_pool2d(leaf(r), 3, 2, 1, ceil_mode=True), True),
    ("avg pool (2, 3) s2 p(1, 0) ceil exclude pad", pool.AvgPool2d,
     lambda r: F.avg_pool2d(leaf(r), (2, 3), 2, (1, 0), True, False), True),
    ("avg pool 3 s1 p1 divisor 4", pool.AvgPool2d, lambda r: F.avg_pool2d(leaf(r), 3, 1, 1, divisor_override=4), True),
    ("adaptive avg pool (4, 3)", pool.AdaptiveAvgPool2d, lambda r: F.adaptive_avg_pool2d(leaf(r), (4, 3)), True),
    ("adaptive avg pool (12, 5), bins overlap", pool.AdaptiveAvgPool2d,
     lambda r: F.adaptive_avg_pool2d(leaf(r), (12, 5)), True),
    ("adaptive max pool (4, 3)", pool.AdaptiveMaxPool2d, lambda r: F.adaptive_max_pool2d(leaf(r), (4, 3)), True),
    ("adaptive max pool (12, 7)", pool.AdaptiveMaxPool2d, lambda r: F.adaptive_max_pool2d(leaf(r), (12, 7)), True),
    ("upsample nearest x2", resize.Upsample, lambda r: F.interpolate(leaf(r), scale_factor=2), True),
    ("upsample bilinear x3", resize.Upsample, lambda r: F.interpolate(leaf(r), scale_factor=3, mode="bilinear"), True),
    ("interpolate nearest x1.5", resize.Upsample, lambda r: F.interpolate(leaf(r), scale_factor=1.5), True),
    ("interpolate nearest to a smaller size", resize.Upsample, lambda r: F.interpolate(leaf(r), size=(4, 7)), True),
    ("interpolate bilinear x(2.5, 1.5)", resize.Upsample,
     lambda r: F.interpolate(leaf(r), scale_factor=(2.5, 1.5), mode="bilinear"), True),
    ("interpolate bilinear align_corners to (20, 7)", resize.Upsample,
     lambda r: F.interpolate(leaf(r), size=(20, 7), mode="bilinear", align_corners=True), True),
    ("interpolate bilinear down x0.6", resize.Upsample,
     lambda r: F.interpolate(leaf(r), scale_factor=0.6, mode="bilinear"), True),
    ("batch norm eval", norm.BatchNorm, lambda r: F.batch_norm(
        leaf(r), r.normal(size=C), r.uniform(0.5, 2, C), const(r, (C,)), const(r, (C,))), True),
    ("batch norm training", norm.BatchNorm, lambda r: F.batch_norm(
        leaf(r), np.zeros(C), np.ones(C), training=True), False),
    ("batch norm eval on (N, C, L)", norm.BatchNorm, lambda r: F.batch_norm(
        leaf(r, (N, C, W)), r.normal(size=C), r.uniform(0.5, 2, C)), False),
    ("expand channels", shape.Expand, lambda r: leaf(r, (N, 1, H, W)).expand(N, C, H, W), True),
    ("expand with new leading dimensions", shape.Expand, lambda r: leaf(r, (C, 1, H, W)).expand(2, C, N, -1, -1), True),
    ("broadcast a map", shape.Expand, lambda r: sl.broadcast_to(leaf(r, (H, W)), (N, C, H, W)), True),
    ("expand nothing", shape.Expand, lambda r: leaf(r).expand(N, C, H, W), True),
    ("expand rows", shape.Expand, lambda r: leaf(r, (N, C, 1, W)).expand(N, C, H, W), False),
    ("expand a 1x1 map", shape.Expand, lambda r: leaf(r, (N, C, 1, 1)).expand(N, C, H, W), False),
    ("reshape splitting channels", shape.Reshape, lambda r: leaf(r, (N, 6, H, W)).reshape(N, 2, 3, H, W), True),
    ("view merging images and channels", shape.Reshape, lambda r: leaf(r).view(N * C, H, W), True),
    ("reshape regrouping the map", shape.Reshape, lambda r: leaf(r).reshape(N, C, W, H), False),
    ("squeeze", shape.Squeeze, lambda r: leaf(r, (N, 1, C, H, W)).squeeze(1), True),
    ("squeeze a row", shape.Squeeze, lambda r: leaf(r, (N, C, 1, W)).squeeze(2), False),
    ("unsqueeze", shape.Unsqueeze, lambda r: leaf(r).unsqueeze(1), True),
    ("unsqueeze at the end", shape.Unsqueeze, lambda r: leaf(r).unsqueeze(-1), False),
    ("transpose images and channels", shape.Transpose, lambda r: leaf(r).transpose(0, 1), True),
    ("transpose rows and columns", shape.Transpose, lambda r: leaf(r).transpose(-1, -2), True),
    ("transpose channels and rows", shape.Transpose, lambda r: leaf(r).transpose(1, 2), False),
    ("permute the lead dimensions", shape.Permute, lambda r: leaf(r, (N, C, 2, H, W)).permute(2, 0, 1, 3, 4), True),
    ("permute, the map transposed", shape.Permute, lambda r: leaf(r).permute(1, 0, 3, 2), True),
    ("permute to channels last", shape.Permute, lambda r: leaf(r).permute(0, 2, 3, 1), False),
    ("stack", shape.Stack, lambda r: sl.stack([leaf(r), const(r, (N, C, H, W)), leaf(r)], dim=1), True),
    ("stack along the rows", shape.Stack, lambda r: sl.stack([leaf(r), leaf(r)], dim=3), False),
    ("crop", shape.GetItem, lambda r: leaf(r)[:, 1:, 2:-1, 1:], True),
    ("strided slice", shape.GetItem, lambda r: leaf(r)[:, :, ::2, 1:], False),
    ("cat channels", shape.Cat, lambda r: sl.cat([leaf(r), leaf(r, (N, 2, H, W))], dim=1), True),
    ("cat columns", shape.Cat, lambda r: sl.cat([leaf(r), leaf(r, (N, C, H, 4))], dim=3), False),
    ("pad", shape.Pad, lambda r: F.pad(leaf(r), (2, 1, 0, 3)), True),
    ("pad channels", shape.Pad, lambda r: F.pad(leaf(r), (1, 0, 2, 2, 1, 1)), True),
    ("pad cropping", shape.Pad, lambda r: F.pad(leaf(r), (-2, 1, 3, -1, -1, 1)), True),
    ("pad reflect", pad.TablePad, lambda r: F.pad(leaf(r), (3, 2, 1, 4), mode="reflect"), True),
    ("pad reflect, cropping", pad.TablePad, lambda r: F.pad(leaf(r), (-2, 5, 4, -3), mode="reflect"), True),
    ("pad replicate", pad.TablePad, lambda r: F.pad(leaf(r), (2, 3, 4, 1), mode="replicate"), True),
    ("pad circular", pad.TablePad, lambda r: F.pad(leaf(r), (3, 1, 2, 2), mode="circular"), True),
    ("pad reflect 3-d", pad.TablePad, lambda r: F.pad(leaf(r), (1, 2, 2, 1, 1, 1), mode="reflect"), True),
    ("pad replicate columns", pad.TablePad, lambda r: F.pad(leaf(r, (C, H, W)), (2, 3), mode="replicate"), True),
    ("roll the map", pad.Roll, lambda r: leaf(r).roll((2, -3), (2, 3)), True),
    ("roll channels and rows, by more than the size", pad.Roll, lambda r: leaf(r).roll((1, 13), (1, 2)), True),
    ("roll columns twice", pad.Roll, lambda r: sl.roll(leaf(r), (5, 2), (-1, -1)), True),
    ("roll the lead dimensions", pad.Roll, lambda r: leaf(r).roll((1, 2), (0, 1)), True),
    ("roll flattened", pad.Roll, lambda r: leaf(r).roll(3), False),
    ("roll a map without lead dimensions", pad.Roll, lambda r: leaf(r, (H, W)).roll(2, 0), False),
    ("pixel shuffle 2", shuffle.PixelShuffle, lambda r: F.pixel_shuffle(leaf(r, (N, 4 * C, H, W)), 2), True),
    ("pixel shuffle 3, unbatched", shuffle.PixelShuffle, lambda r: F.pixel_shuffle(leaf(r, (9, 4, 5)), 3), True),
    ("pixel unshuffle 2", shuffle.PixelUnshuffle, lambda r: F.pixel_unshuffle(leaf(r, (N, C, 8, 10)), 2), True),
    ("pixel unshuffle 3", shuffle.PixelUnshuffle, lambda r: F.pixel_unshuffle(leaf(r, (N, C, 9, 6)), 3), True),
]


def family_base(cls):
    """A base class that ops share (`_Binary`, `_Pointwise`): private, with subclasses, never a node itself."""
    return cls.__name__.startswith("_") and any(sub in OPS for sub in cls.__subclasses__())


def test_every_op_with_a_cropped_vjp_has_a_case():
    covered = {case[1] for case in CASES}
    missing = [cls.__name__ for cls in OPS if getattr(cls, "backward_window", None) is not None
               and cls not in covered and not family_base(cls)]
    assert not missing, f"add a case to CASES for: {', '.join(missing)}"


def random_patch(rng, out_shape, dtype, seeds):
    """Random windows (zero outside the map) of random size, each overlapping the map, some of
    them reaching past its border."""
    hm, wm = out_shape[-2:]
    h, w = int(rng.integers(1, max(hm // 2, 1) + 1)), int(rng.integers(1, max(wm // 2, 1) + 1))
    k = int(np.prod(seeds, dtype=int))
    origins = np.stack([rng.integers(1 - h, hm, k), rng.integers(1 - w, wm, k)], axis=1).astype(np.int64)
    data = rng.normal(size=(k,) + tuple(out_shape[:-2]) + (h, w)).astype(dtype)
    return Patch(kernel_window.clip(data, origins, (hm, wm)), origins, (hm, wm), seeds)


def dense(g):
    return g.dense() if type(g) is Patch else g


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_cropped_vjp_equals_the_dense_vjp_on_random_windows(case):
    name, cls, build, crops, rule = case + ("gradient",) * (5 - len(case))
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    node = build(rng).grad_fn
    assert type(node) is cls
    for seeds in [(3,), (), (2, 2)]:
        for _ in range(4):
            p = random_patch(rng, node.out_shape, node.out_dtype, seeds)
            with relu_rule(rule):
                windowed = node.backward_window(p)
                full = node.backward(p.dense())
            assert (windowed is not None) == crops, f"{name}: the cropped VJP should {'' if crops else 'not '}apply"
            if windowed is None:
                continue
            assert len(windowed) == len(full)
            for i, (a, b) in enumerate(zip(windowed, full)):
                assert (a is None) == (b is None), (name, i)
                if b is not None:
                    a = dense(a)
                    assert a.shape == b.shape, (name, i, seeds)
                    tol = (1e-5 if a.dtype == np.float32 else 1e-12) * max(np.abs(b).max(), 1.0)
                    np.testing.assert_allclose(a, b, rtol=0, atol=tol, err_msg=f"{name}, input {i}, seeds {seeds}")
