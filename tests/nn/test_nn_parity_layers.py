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


def _channels(layer, args):
    return args[0] if layer in ("Conv2d", "BatchNorm2d") else 4


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
    if layer == "MaxPool2d":  # distinct values: no ties to break differently
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
