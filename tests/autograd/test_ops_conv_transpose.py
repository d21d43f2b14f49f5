"""conv_transpose2d: argument errors as PyTorch raises them (one sentence each), the kernels that run
for frozen weights, and K seeds through one pass. Its values and gradients are checked in
_op_specs.py (finite differences, PyTorch), its windows in test_windows.py, test_op_registry.py and
test_cropped_vjp.py."""
import numpy as np
import pytest

import saliency as sl
from saliency import kernels
from saliency.autograd.errors import LayerInputError
from saliency.nn import functional as F


def _inputs(rng, frozen=True, dtype=np.float32):
    x = sl.tensor(rng.standard_normal((2, 4, 5, 6)).astype(dtype), requires_grad=True)
    w = sl.tensor(rng.standard_normal((4, 3, 3, 3)).astype(dtype), requires_grad=not frozen)
    b = sl.tensor(rng.standard_normal(3).astype(dtype), requires_grad=not frozen)
    return x, w, b


def test_surfaces_are_pytorchs():
    assert sl.conv_transpose2d is F.conv_transpose2d
    assert not hasattr(sl.Tensor, "conv_transpose2d")


def test_output_shape():
    x, w, b = _inputs(np.random.default_rng(0))
    assert F.conv_transpose2d(x, w, b).shape == (2, 3, 7, 8)
    assert F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1).shape == (2, 3, 10, 12)
    assert F.conv_transpose2d(x, w, b, stride=(2, 3), dilation=(1, 2), output_padding=(1, 2)).shape == (2, 3, 12, 22)


@pytest.mark.parametrize("kwargs, match", [
    (dict(output_padding=1), r"output_padding must be smaller than either stride or dilation"),
    (dict(stride=2, output_padding=2), r"output_padding must be smaller than either stride or dilation"),
    (dict(stride=2, dilation=2, output_padding=(1, 2)), r"output_padding must be smaller"),
    (dict(stride=0), r"stride >= 1"),
    (dict(padding=-1), r"padding >= 0"),
    (dict(groups=3), r"groups=3 must be a positive int dividing the weight's 4 input channels"),
    (dict(padding=5), r"output would be empty"),
])
def test_bad_arguments_are_one_sentence_value_errors(kwargs, match):
    x, w, b = _inputs(np.random.default_rng(1))
    with pytest.raises(ValueError, match=match) as info:
        F.conv_transpose2d(x, w, None, **kwargs)
    assert str(info.value).count(". ") == 0 and "\n" not in str(info.value)


def test_pytorch_rejects_the_same_arguments():
    torch = pytest.importorskip("torch")
    x, w = torch.zeros(2, 4, 5, 6), torch.zeros(4, 3, 3, 3)
    for kwargs in [dict(output_padding=1), dict(stride=2, output_padding=2), dict(groups=3), dict(padding=5)]:
        with pytest.raises(RuntimeError):
            torch.nn.functional.conv_transpose2d(x, w, **kwargs)
    torch.nn.functional.conv_transpose2d(x, w, output_padding=2, dilation=3)  # smaller than the dilation: allowed
    F.conv_transpose2d(sl.tensor(x.numpy()), w.numpy(), output_padding=2, dilation=3)


def test_input_errors_are_those_of_conv2d():
    x, w, b = _inputs(np.random.default_rng(2))
    with pytest.raises(LayerInputError, match=r"takes 4 input channels; its input has 3") as info:
        F.conv_transpose2d(x[:, :3], w)
    assert (info.value.what, info.value.expected, info.value.got) == ("channels", 4, 3)
    with pytest.raises(ValueError, match=r"expects input of shape \(N, C, H, W\), got \(4, 5, 6\)"):
        F.conv_transpose2d(x[0], w)
    with pytest.raises(TypeError, match="float32 but weight has dtype float64"):
        F.conv_transpose2d(x, w.double())
    with pytest.raises(ValueError, match=r"bias must have shape \(3,\)"):
        F.conv_transpose2d(x, w, np.zeros(4, np.float32))


def test_frozen_weights_run_no_weight_or_bias_kernel_and_keep_no_input(monkeypatch):
    x, w, b = _inputs(np.random.default_rng(3))

    def forbidden(*args, **kwargs):
        raise AssertionError("a weight/bias VJP kernel ran although the weights are frozen")

    monkeypatch.setattr(kernels, "conv2d_grad_weight", forbidden)
    monkeypatch.setattr(kernels, "conv2d_grad_bias", forbidden)
    y = F.conv_transpose2d(x, w, b, stride=2, padding=1)
    assert not any(s is x.numpy() for s in y.grad_fn.saved if s is not None)
    y.backward(sl.ones_like(y))
    assert x.grad is not None and w.grad is None and b.grad is None


@pytest.mark.parametrize("frozen", [True, False], ids=["frozen", "trainable"])
def test_k_seeds_in_one_pass_equal_k_passes(frozen):
    rng = np.random.default_rng(4)
    x, w, b = _inputs(rng, frozen, np.float64)
    leaves = [x] if frozen else [x, w, b]
    y = F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, dilation=2)
    seeds = rng.standard_normal((5,) + y.shape)
    batched = sl.autograd.grad(y, leaves, sl.tensor(seeds), batched=True, retain_graph=True)
    for k in range(5):
        one = sl.autograd.grad(y, leaves, sl.tensor(seeds[k]), retain_graph=True)
        for a, c in zip(batched, one):
            np.testing.assert_allclose(a.numpy()[k], c.numpy(), rtol=1e-12, atol=1e-12)
