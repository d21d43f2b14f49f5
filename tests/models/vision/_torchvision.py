"""Comparing an architecture of `saliency.models.vision` with torchvision's own: torchvision builds
it with its random initialisation (batch-norm statistics randomised too), saves its state dict
with `torch.save`, and the model built here by name loads that file, strict; then the state-dict
keys, the outputs and the input gradients must agree.

torchvision's compiled ops do not load against the CPU build of torch the tests use (`operator
torchvision::nms does not exist` when `torchvision._meta_registrations` registers them); its
model builders do not need them, so that module is replaced by an empty one before the import.
"""
import sys
import types

import numpy as np
import pytest


def torchvision():
    """torchvision (imported with its ops' registrations left out), or the test is skipped."""
    torch = pytest.importorskip("torch")
    if "torchvision" not in sys.modules:
        sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    try:
        import torchvision as tv
    except Exception as exc:  # noqa: BLE001: any import failure: no torchvision to compare with
        pytest.skip(f"torchvision cannot be imported: {exc}")
    del torch
    return tv


def randomise_statistics(module, seed=0):
    """Give every batch norm of a torch module random running statistics (and affine parameters),
    so that eval mode differs from an identity; returns the module."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) * 0.5 + 0.75)
                if m.affine:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=gen) * 0.5 + 0.75)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
    return module


def compare(name, tmp_path, size=64, batch=1, dtype="float64", rtol=1e-9, atol=1e-9, seed=0, **kwargs):
    """Build `name` with torchvision (random init, randomised statistics, eval mode), save its
    state dict, load it here by name (`saliency.models.load(name, weights=...)`, strict) and check
    state-dict keys and shapes, the output and the input gradient of a seed (the top class of a
    classifier; for a segmenter, the `out` logits of one pixel) on a random (batch, 3, size, size)
    input, in `dtype`. Returns (ours, theirs)."""
    import torch

    from saliency import models

    tv = torchvision()
    torch.manual_seed(seed)
    theirs = randomise_statistics(tv.models.get_model(name, weights=None, **kwargs), seed).eval()
    path = tmp_path / f"{name}.pth"
    torch.save(theirs.state_dict(), path)
    ours = models.load(name, weights=path, **kwargs)
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        assert tuple(state[k].shape) == tuple(v.shape), k
    if dtype == "float64":
        theirs, ours = theirs.double(), ours.double()
    x = np.random.default_rng(seed).standard_normal((batch, 3, size, size)).astype(dtype)
    xt = torch.tensor(x, requires_grad=True)
    y = theirs(xt)
    y = y["out"] if isinstance(y, dict) else y
    if y.ndim == 2:
        v = torch.nn.functional.one_hot(y.argmax(1), y.shape[1]).to(y.dtype)
    else:
        v = torch.zeros_like(y)
        v[:, :, size // 2, size // 3] = 1
    (g,) = torch.autograd.grad(y, xt, v)
    import saliency as sl

    xs = sl.tensor(x, requires_grad=True)
    ys = ours(xs)
    np.testing.assert_allclose(ys.numpy(), y.detach().numpy(), rtol=rtol, atol=atol)
    ys.backward(sl.tensor(v.numpy()))
    np.testing.assert_allclose(xs.grad.numpy(), g.numpy(), rtol=rtol, atol=atol * max(1.0, float(g.abs().max())))
    return ours, theirs
