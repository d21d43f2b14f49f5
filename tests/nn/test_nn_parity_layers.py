"""Every kernel-backed layer alone, and the two reference models, against PyTorch through state_dict.

Outputs and input gradients: float32 to 1e-4 relative, float64 to 1e-10.
"""
import os
import sys

import numpy as np
import pytest

import saliency as sl
import saliency.nn as nn

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from reference_models import build, copy_weights  # noqa: E402

TOL = {np.float32: dict(rtol=1e-4), np.float64: dict(rtol=1e-10)}
DTYPES = [(np.float32, torch.float32), (np.float64, torch.float64)]

LAYERS = [
    ("Conv2d", (3, 4, 3), {}), ("Conv2d", (3, 4, 3), {"padding": 1}), ("Conv2d", (3, 6, 3), {"stride": 2, "padding": 1}),
    ("Conv2d", (4, 6, (3, 2)), {"padding": (1, 0), "dilation": (2, 1)}), ("Conv2d", (4, 6, 3), {"groups": 2}),
    ("Conv2d", (4, 4, 3), {"groups": 4, "padding": 1, "bias": False}), ("Conv2d", (3, 5, 1), {}),
    ("Conv2d", (3, 4, 3), {"padding": "same"}), ("Conv2d", (3, 2, 5), {"stride": 3, "padding": 2}),
    ("MaxPool2d", (2,), {}), ("MaxPool2d", (3,), {"stride": 2, "padding": 1}),
    ("AvgPool2d", (2,), {}), ("AvgPool2d", (3,), {"stride": 2, "padding": 1}),
    ("AdaptiveAvgPool2d", (1,), {}), ("AdaptiveAvgPool2d", ((3, 2),), {}),
    ("Upsample", (), {"scale_factor": 2, "mode": "nearest"}), ("Upsample", (), {"scale_factor": 3, "mode": "nearest"}),
    ("Upsample", (), {"scale_factor": 2, "mode": "bilinear"}), ("BatchNorm2d", (4,), {}),
    ("ReLU", (), {}), ("Sigmoid", (), {}), ("Tanh", (), {}), ("Flatten", (), {}), ("Identity", (), {}),
]
LAYERS += [  # activations; PReLU(4) has one weight per channel of the (2, 4, 9, 7) input
    ("ReLU6", (), {}), ("Hardtanh", (-2.0, 0.5), {}), ("LeakyReLU", (0.2,), {}),
    ("ELU", (), {"alpha": 0.5}), ("SiLU", (), {}), ("Hardswish", (), {}), ("Hardsigmoid", (), {}), ("GELU", (), {}),
    ("GELU", (), {"approximate": "tanh"}), ("Softplus", (2.0, 1.0), {}), ("Mish", (), {}), ("PReLU", (), {}),
    ("PReLU", (4,), {}), ("PReLU", (4, 0.1), {}),
]

LAYERS += [
    ("ConvTranspose2d", (4, 3, 3), {}), ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ("ConvTranspose2d", (4, 4, 4), {"stride": 2, "padding": 1}),
    ("ConvTranspose2d", (4, 6, 3), {"padding": 2, "dilation": 2, "groups": 2, "bias": False}),
    ("ConvTranspose2d", (4, 3, (3, 2)), {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2), "dilation": (1, 3)}),
]

LAYERS += [  # resizing to any size or by any factor (the (2, 4, 9, 7) input: non-square)
    ("Upsample", (), {"scale_factor": 1.5}), ("Upsample", (), {"scale_factor": (2, 1.5), "mode": "bilinear"}),
    ("Upsample", (), {"size": (5, 11), "mode": "bilinear", "align_corners": True}), ("Upsample", ((4, 3),), {}),
    ("Upsample", (), {"scale_factor": 0.5, "mode": "bilinear", "recompute_scale_factor": True}),
    ("Upsample", (), {"scale_factor": 2.5, "mode": "bilinear", "align_corners": False}),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}), ("UpsamplingBilinear2d", ((12, 10),), {}),
    ("PixelShuffle", (2,), {}),
]

LAYERS += [  # pooling with PyTorch's other arguments (ceil_mode, dilation, count_include_pad, divisor_override)
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}), ("MaxPool2d", ((3, 2),), {"dilation": (1, 2)}),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}),
    ("AvgPool2d", (2,), {"ceil_mode": True, "divisor_override": 3}), ("AdaptiveAvgPool2d", ((None, 4),), {}),
    ("AdaptiveMaxPool2d", (1,), {}), ("AdaptiveMaxPool2d", ((4, 3),), {}),
    ("Dropout2d", (0.3,), {}),  # eval mode: the identity
]


def _channels(layer, args):
    return args[0] if layer in ("Conv2d", "ConvTranspose2d", "BatchNorm2d") else 4


def _compare(ours, theirs, x_np, dtype, train=False):
    ours.train(train)
    theirs.train(train)
    x = sl.tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=TOL[dtype]["rtol"] * np.abs(ty.detach().numpy()).max(),
                               **TOL[dtype])
    v = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    y.backward(sl.tensor(v))
    ty.backward(torch.tensor(v))
    g, tg = x.grad.numpy(), tx.grad.numpy()
    np.testing.assert_allclose(g, tg, atol=TOL[dtype]["rtol"] * np.abs(tg).max(), **TOL[dtype])
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=TOL[dtype]["rtol"] * np.abs(tp.grad.numpy()).max(),
                                   **TOL[dtype])


@pytest.mark.parametrize("dtype,tdtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("layer,args,kwargs", LAYERS, ids=[f"{l}{a}{k}" for l, a, k in LAYERS])
def test_layer_matches_pytorch(layer, args, kwargs, dtype, tdtype):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, layer)(*args, **kwargs).to(tdtype)
    ours = getattr(nn, layer)(*args, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.to(dtype)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, _channels(layer, args), 9, 7)).astype(dtype)
    if layer in ("MaxPool2d", "AdaptiveMaxPool2d"):  # distinct values: no ties to break differently
        x = rng.permutation(x.size).reshape(x.shape).astype(dtype) / x.size
    _compare(ours, theirs, x, dtype)
    if layer == "BatchNorm2d":  # training mode too, and the running statistics it leaves behind
        _compare(ours, theirs, x, dtype, train=True)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype,tdtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name,batch", [("classifier", 1), ("classifier", 3), ("depth", 1)])
def test_reference_models_match_pytorch(name, batch, dtype, tdtype):
    torch.manual_seed(0)
    theirs = build(name, torch.nn).to(tdtype)
    ours = copy_weights(theirs, build(name, nn)).to(dtype)
    shape = (batch, 3, 64, 64) if name == "classifier" else (batch, 3, 128, 128)
    x = np.random.default_rng(2).random(shape).astype(dtype)
    _compare(ours, theirs, x, dtype)


def test_full_backward_hook_on_the_first_conv_sees_exactly_x_grad():
    """Seed example 11: grad_input[0] of the first layer's hook is the x.grad the backward leaves."""
    model = build("depth", nn)
    seen = []
    model[0].register_full_backward_hook(lambda module, grad_input, grad_output: seen.append(grad_input[0]))
    x = sl.tensor(np.random.default_rng(3).random((1, 3, 128, 128)).astype(np.float32), requires_grad=True)
    y = model(x)
    y.backward(sl.ones_like(y))
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0].numpy(), x.grad.numpy())


def test_upsample_then_conv_runs_fused_and_equals_the_two_layers():
    torch.manual_seed(0)
    theirs = build("depth", torch.nn).double()
    fused = copy_weights(theirs, build("depth", nn)).double()           # build() fuses ours
    plain = nn.unfuse(copy_weights(theirs, build("depth", nn)).double())
    x = np.random.default_rng(4).random((2, 3, 32, 32))
    names = []
    for model in (fused, plain):
        xt = sl.tensor(x, requires_grad=True)
        y = model(xt)
        y.backward(sl.ones_like(y))
        names.append(sl.autograd.render_graph(y))
        model.result = (y.numpy(), xt.grad.numpy(), model[7].weight.grad.numpy())
    assert names[0].count("UpsampleConvolutionBackward0") == 2 and "UpsampleNearest2DBackward0" not in names[0]
    assert names[1].count("UpsampleNearest2DBackward0") == 2 and "UpsampleConvolutionBackward0" not in names[1]
    for a, b in zip(fused.result, plain.result):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_a_hook_on_the_conv_keeps_the_two_layers_apart():
    model = build("depth", nn)
    seen = []
    model[7].register_forward_hook(lambda module, args, out: seen.append(args[0].shape))
    y = model(sl.tensor(np.zeros((1, 3, 32, 32), np.float32)))
    assert seen == [(1, 64, 16, 16)]  # the conv saw the upsampled image
    assert y.shape == (1, 1, 32, 32)


# ---- ConvTranspose2d: output_size, initialisation, a U-Net decoder ----------------------------------
@pytest.mark.parametrize("output_size", [None, (11, 9), (12, 10), [2, 3, 12, 9]])
def test_conv_transpose_output_size_matches_pytorch(output_size):
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1).double()
    ours = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.double()
    x = np.random.default_rng(0).standard_normal((2, 4, 6, 5))
    y, ty = ours(sl.tensor(x), output_size), theirs(torch.tensor(x), output_size)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"valid sizes range from \[11, 9\] to \[12, 10\]"):
        ours(sl.tensor(x), (13, 9))
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        ours(sl.tensor(x), (1, 11, 9))


def test_conv_transpose_constructor_matches_pytorch():
    for args, kwargs in [((4, 6, 3), {"groups": 2, "output_padding": 1, "stride": 2, "bias": False}),
                         ((2, 3, (3, 2)), {"padding": 1, "dilation": 2})]:
        ours, theirs = nn.ConvTranspose2d(*args, **kwargs), torch.nn.ConvTranspose2d(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert {k: v.shape for k, v in ours.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    for args, kwargs, match in [((3, 4, 3), {"groups": 2}, "divisible by groups"),
                                ((4, 3, 3), {"groups": 2}, "divisible by groups"),
                                ((4, 4, 3), {"padding_mode": "reflect"}, "padding mode|padding_mode")]:
        with pytest.raises(ValueError, match=match):
            torch.nn.ConvTranspose2d(*args, **kwargs)
        with pytest.raises(ValueError, match=match):
            nn.ConvTranspose2d(*args, **kwargs)


def test_conv_transpose_initialisation_uses_pytorchs_fan_of_the_transposed_layout():
    """fan_in = weight.shape[1] * kh * kw = out_channels / groups * kh * kw (not in_channels)."""
    sl.manual_seed(0)
    layer = nn.ConvTranspose2d(64, 8, 3, groups=2)
    bound = 1 / np.sqrt(4 * 9)
    for p in (layer.weight.numpy(), layer.bias.numpy()):
        assert np.abs(p).max() <= bound and np.abs(p).max() > 0.9 * bound
    w = layer.weight.numpy()
    assert abs(w.std() - bound / np.sqrt(3)) < 0.05 * bound  # U(-b, b) has standard deviation b / sqrt(3)


class _Decoder:
    """A small U-Net: Conv2d down (stride 2), ConvTranspose2d up (kernel 4, stride 2, padding 1, as
    U-Nets use), cat with the skip, Conv2d head; built from `nn` (ours or torch.nn) with `cat`."""

    def __init__(self, nn_, cat):
        self.enc = nn_.Conv2d(3, 6, 3, padding=1)
        self.down = nn_.Conv2d(6, 8, 3, stride=2, padding=1)
        self.up = nn_.ConvTranspose2d(8, 6, 4, stride=2, padding=1)
        self.up_odd = nn_.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.head = nn_.Conv2d(18, 2, 3, padding=1)
        self.relu, self.cat = nn_.ReLU(), cat

    def modules(self):
        return [self.enc, self.down, self.up, self.up_odd, self.head]

    def __call__(self, x):
        skip = self.relu(self.enc(x))
        low = self.relu(self.down(skip))
        return self.head(self.cat([self.relu(self.up(low)), self.up_odd(low), skip], 1))


def test_unet_decoder_matches_pytorch_in_float64():
    torch.manual_seed(0)
    theirs = _Decoder(torch.nn, torch.cat)
    ours = _Decoder(nn, sl.cat)
    for a, b in zip(ours.modules(), theirs.modules()):
        b.double()
        a.load_state_dict({k: v.detach().numpy() for k, v in b.state_dict().items()})
        a.double()
    x_np = np.random.default_rng(5).standard_normal((2, 3, 12, 10))
    x, tx = sl.tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(6).standard_normal(y.shape)
    y.backward(sl.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(ours.modules(), theirs.modules()):
        for (name, p), (_, tp) in zip(a.named_parameters(), b.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
    # a pixel seed travels as windows through the decoder and gives PyTorch's input gradient
    x.grad = None
    tx.grad = None
    seed = np.zeros(y.shape)
    seed[1, 0, 5, 3] = 1.0
    (g,) = sl.autograd.grad(ours(x), x, sl.tensor(seed))
    (tg,) = torch.autograd.grad(theirs(tx), tx, torch.tensor(seed))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


# ---- normalisation layers: train and eval mode, random affine weights, running statistics --------------
NORM_LAYERS = [
    ("GroupNorm", (2, 4), {}, (2, 4, 9, 7)), ("GroupNorm", (1, 4), {"affine": False}, (2, 4, 9, 7)),
    ("GroupNorm", (4, 4), {"eps": 1e-3, "bias": False}, (3, 4, 5)), ("GroupNorm", (1, 4), {}, (5, 4)),
    ("LayerNorm", (7,), {}, (2, 4, 9, 7)), ("LayerNorm", ([4, 9, 7],), {}, (2, 4, 9, 7)),
    ("LayerNorm", (7,), {"elementwise_affine": False}, (2, 4, 9, 7)), ("LayerNorm", ((9, 7),), {"bias": False}, (2, 4, 9, 7)),
    ("InstanceNorm2d", (4,), {}, (2, 4, 9, 7)), ("InstanceNorm2d", (4,), {"affine": True}, (2, 4, 9, 7)),
    ("InstanceNorm2d", (4,), {"affine": True, "track_running_stats": True}, (2, 4, 9, 7)),
    ("InstanceNorm2d", (4,), {"track_running_stats": True, "momentum": 0.3}, (4, 9, 7)),
    ("BatchNorm1d", (4,), {}, (8, 4)), ("BatchNorm1d", (4,), {}, (3, 4, 7)),
    ("BatchNorm1d", (4,), {"momentum": None}, (3, 4, 7)), ("BatchNorm1d", (4,), {"affine": False}, (6, 4)),
    ("BatchNorm1d", (4,), {"track_running_stats": False}, (3, 4, 5)), ("BatchNorm2d", (4,), {"bias": False}, (2, 4, 9, 7)),
    ("BatchNorm2d", (4,), {"momentum": None, "eps": 1e-3}, (2, 4, 9, 7)),
]


@pytest.mark.parametrize("dtype,tdtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("layer,args,kwargs,shape", NORM_LAYERS, ids=[f"{l}{a}{k}{s}" for l, a, k, s in NORM_LAYERS])
def test_norm_layer_matches_pytorch_in_train_and_eval(layer, args, kwargs, shape, dtype, tdtype):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, layer)(*args, **kwargs).to(tdtype)
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.5, 1.0)
    ours = getattr(nn, layer)(*args, **kwargs).to(dtype)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(0)
    for step in range(2):  # two training steps (momentum=None averages them), then eval on what they left
        x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
        _compare(ours, theirs, x, dtype, train=True)
        for name, buf in theirs.named_buffers():
            np.testing.assert_allclose(getattr(ours, name).numpy(), buf.numpy(), rtol=1e-6, atol=1e-7, err_msg=name)
    _compare(ours, theirs, (rng.standard_normal(shape) * 2 + 1).astype(dtype), dtype, train=False)


def test_norm_layers_declare_whole_window_rules_for_per_sample_statistics():
    """Group, layer and instance norm mix every position of a group: their window rule is the whole map."""
    from saliency.autograd import geometry
    from saliency.autograd.ops import norm
    assert norm.GroupNorm.window_rule is geometry.whole_window
    assert norm.LayerNorm.window_rule is geometry.whole_window
    x = sl.tensor(np.random.default_rng(0).standard_normal((1, 2, 6, 6)), requires_grad=True)
    y = nn.InstanceNorm2d(2)(x)
    g = np.zeros(y.shape)
    g[0, 0, 2, 3] = 1.0
    y.backward(sl.tensor(g))
    assert np.count_nonzero(x.grad.numpy()[0, 0]) == 36 and not x.grad.numpy()[0, 1].any()


# ---- multi-head attention: self-attention as ViT calls it, cross-attention, masks, unbatched inputs ------
KPM = np.array([[False, False, False, True, True], [False, False, False, False, False]])  # (N, S): True leaves out
CAUSAL = np.triu(np.ones((4, 5), bool), 1)                                                  # (L, S): True leaves out
MHA_CASES = [  # (constructor kwargs, forward kwargs, query, key/value shapes or None for self-attention)
    ({"batch_first": True}, {"need_weights": False}, (2, 5, 8), None),  # ViT's call
    ({"batch_first": True}, {}, (2, 5, 8), None),
    ({}, {"average_attn_weights": False}, (4, 2, 8), (5, 2, 8)),
    ({"bias": False}, {"need_weights": False}, (4, 2, 8), (5, 2, 8)),
    ({"kdim": 3, "vdim": 6}, {}, (4, 2, 8), ((5, 2, 3), (5, 2, 6))),
    ({}, {}, (4, 8), (5, 8)),  # unbatched
    ({"batch_first": True}, {"key_padding_mask": KPM, "attn_mask": CAUSAL}, (2, 4, 8), (2, 5, 8)),
    ({"batch_first": True}, {"key_padding_mask": KPM, "attn_mask": CAUSAL, "need_weights": False}, (2, 4, 8),
     (2, 5, 8)),
    ({"batch_first": True}, {"attn_mask": CAUSAL[:, :4], "is_causal": True, "need_weights": False}, (2, 4, 8), None),
    ({"batch_first": True}, {"attn_mask": np.random.default_rng(3).standard_normal((4, 4, 4))}, (2, 4, 8), None),
]


@pytest.mark.parametrize("dtype,tdtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("kwargs,call,q_shape,kv_shape", MHA_CASES,
                         ids=[f"{k}{list(c)}{q}" for k, c, q, _ in MHA_CASES])
def test_multihead_attention_matches_pytorch(kwargs, call, q_shape, kv_shape, dtype, tdtype):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 4 if kwargs.get("kdim") else 2, **kwargs)
    with torch.no_grad():  # random biases too (PyTorch starts them at 0), in float32 as our parameters
        for p in theirs.parameters():
            p.normal_(0.0, 0.5)
    theirs.to(tdtype)
    ours = nn.MultiheadAttention(8, 4 if kwargs.get("kdim") else 2, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.to(dtype)
    rng = np.random.default_rng(0)
    if kv_shape is None:
        arrays = [rng.standard_normal(q_shape).astype(dtype)] * 3
    else:
        k_shape, v_shape = kv_shape if isinstance(kv_shape[0], tuple) else (kv_shape, kv_shape)
        arrays = [rng.standard_normal(s).astype(dtype) for s in (q_shape, k_shape, v_shape)]
    leaves = {id(a): (sl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)) for a in arrays}
    ins, tins = zip(*(leaves[id(a)] for a in arrays))
    tcall = {k: torch.tensor(v).to(tdtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else
             torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in call.items()}
    (y, w), (ty, tw) = ours(*ins, **call), theirs(*tins, **tcall)
    assert (w is None) == (tw is None)
    tol = dict(rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["rtol"])
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **tol)
    outputs = [(y, ty)]
    if w is not None:
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), **tol)
        outputs.append((w, tw))
    seeds = [np.random.default_rng(1 + i).standard_normal(o.shape).astype(dtype) for i, (o, _) in enumerate(outputs)]
    sl.autograd.backward([o for o, _ in outputs], [sl.tensor(s) for s in seeds])
    torch.autograd.backward([t for _, t in outputs], [torch.tensor(s) for s in seeds])
    for a, b in leaves.values():
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), err_msg=name, **tol)


def test_multihead_attention_drops_weights_in_training_only_and_its_gradient_is_exact_for_a_drawn_mask():
    ours = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True).double()
    x = sl.tensor(np.random.default_rng(0).standard_normal((2, 5, 8)), requires_grad=True)
    plain = ours(x, x, x)[0].numpy()
    ours.train()
    for need_weights in (False, True):
        def call(t):
            sl.manual_seed(0)  # the same masks at every call
            return ours(t, t, t, need_weights=need_weights)[0]
        dropped = call(x).numpy()
        assert not np.allclose(dropped, plain) and np.array_equal(call(x).numpy(), dropped)
        assert sl.autograd.gradcheck(call, [x], eps=1e-6, atol=1e-5, rtol=1e-3)
    q = sl.tensor(np.ones((1, 2, 3, 4)))
    assert not sl.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=1.0).numpy().any()


def test_multihead_attention_refuses_the_options_it_does_not_implement():
    for option in ("add_bias_kv", "add_zero_attn"):
        with pytest.raises(NotImplementedError, match=option):
            nn.MultiheadAttention(8, 2, **{option: True})
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(8, 3)
    x = sl.tensor(np.zeros((2, 3, 8)))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        nn.MultiheadAttention(8, 2)(x, x, x, is_causal=True)
