"""Padding layers against PyTorch's: values, input gradients and reprs."""
import numpy as np
import pytest

import saliency as sl
from saliency import nn

CASES = [("ReflectionPad2d", (2,)), ("ReflectionPad2d", ((1, 0, 2, 1),)), ("ReplicationPad2d", ((1, 2, 3, 0),)),
         ("ReplicationPad2d", (3,)), ("ZeroPad2d", ((1, 0, 2, 1),)), ("ZeroPad2d", (2,)),
         ("ConstantPad2d", (1, 3.5)), ("ConstantPad2d", ((0, 2, 1, 0), -1.0))]


@pytest.mark.parametrize("name, args", CASES)
def test_padding_layers_match_pytorch(name, args):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 6))
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    xs, xt = sl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ys, yt = ours(xs), theirs(xt)
    v = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    ys.backward(sl.tensor(v))
    yt.backward(torch.tensor(v))
    np.testing.assert_array_equal(ys.numpy(), yt.detach().numpy())
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_reflection_mirrors_without_repeating_the_border():
    y = nn.ReflectionPad2d((2, 1, 0, 0))(sl.tensor([[[[1.0, 2.0, 3.0]]]]))
    assert y.tolist() == [[[[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]]]


def test_a_padding_of_three_numbers_is_refused():
    with pytest.raises(ValueError, match="an int or 4 ints"):
        nn.ZeroPad2d((1, 2, 3))
