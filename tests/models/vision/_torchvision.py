"""Comparing an architecture of `saliency.models.vision` with torchvision's own: torchvision builds
it with its random initialisation (batch-norm statistics randomised too), saves its state dict
with `torch.save`, and the model built here by name loads that file, strict; then the state-dict
keys, the outputs and the input gradients must agree (`compare`). For the large architectures,
`compare_in_memory` does the same without a file and without torchvision's initialisation:
torchvision's model is built on the meta device, allocated and filled with seeded random values
(`fill_randomly`), and its state dict is loaded into ours built with the initialisers skipped.

torchvision's compiled ops do not load against the CPU build of torch the tests use (`operator
torchvision::nms does not exist` when `torchvision._meta_registrations` registers them); its
model builders do not need them, so that module is replaced by an empty one before the import.
"""
import contextlib
import functools
import math
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


@contextlib.contextmanager
def _regnet_widths_on_cpu():
    """RegNet computes its stage widths with tensors it reads back (`tolist`), which meta tensors
    cannot be: within this, that computation runs on the CPU."""
    import torch

    params = torchvision().models.regnet.BlockParams
    saved = params.__dict__["from_init_params"]
    from_init_params = saved.__func__

    def on_cpu(cls, *args, **kw):
        with torch.device("cpu"):
            return from_init_params(cls, *args, **kw)

    params.from_init_params = classmethod(on_cpu)
    try:
        yield
    finally:
        params.from_init_params = saved


def on_meta(name, dtype=None, **kwargs):
    """torchvision's `name` (weights=None) built on the meta device: no memory, no initialisation;
    its floating-point parameters and buffers in `dtype` (a torch dtype; torch's default if None)."""
    import torch

    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype or before)
        with _regnet_widths_on_cpu(), torch.device("meta"):
            return torchvision().models.get_model(name, weights=None, **kwargs)
    finally:
        torch.set_default_dtype(before)


_BATCH_NORM_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


_POOL_SIZE = 1 << 24  # more values than any one tensor of the models filled has (15.5M at most)


@functools.lru_cache(maxsize=1)
def _pool(seed, dtype):
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.empty(_POOL_SIZE, dtype=dtype).uniform_(-math.sqrt(3), math.sqrt(3), generator=gen)


def fill_randomly(module, seed=0):
    """Write seeded random values into a torch module allocated but unwritten (`to_empty`), scaled so
    that activations stay of order one: conv, linear and attention weights of standard deviation
    1 / sqrt(fan_in); norm weights 1 + 0.1 x; Swin V2's logit scales log(10) + 0.1 x; biases and the
    rest (class tokens, position embeddings, layer scales, relative position tables) 0.1 x; batch
    norms as `randomise_statistics`. The values x are uniform of variance 1: each tensor a window
    at a random offset into 2^24 values drawn once from the seeded generator (a copy and a scaling
    instead of a draw per value: drawing 100M float64 values takes about a second; the last 2^24
    values are kept). Swin's computed
    buffers (relative position indices and coordinate tables) are computed again; any other buffer
    is an error. Returns the module."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    pool = _pool(seed, next(module.parameters()).dtype)

    def draw(t, std=1.0, mean=0.0):
        n = t.numel()
        if n > _POOL_SIZE:
            t.uniform_(mean - std * math.sqrt(3), mean + std * math.sqrt(3), generator=gen)
            return
        start = int(torch.randint(_POOL_SIZE - n + 1, (), generator=gen))
        torch.mul(pool[start:start + n], std, out=t.view(-1))
        if mean:
            t.add_(mean)

    with torch.no_grad():
        for m in module.modules():
            if hasattr(m, "define_relative_position_index"):  # Swin's windowed attention, v1 and v2
                m.define_relative_position_index()
                if hasattr(m, "cpb_mlp"):
                    m.define_relative_position_bias_table()  # v2: the coordinates table (a buffer)
            for b_name, b in m.named_buffers(recurse=False):
                if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and b_name in _BATCH_NORM_BUFFERS:
                    b.zero_()  # the running statistics are drawn below
                elif b_name not in ("relative_position_index", "relative_coords_table"):
                    raise AssertionError(f"{type(m).__name__}.{b_name}: a buffer left unwritten")
            is_norm = isinstance(m, (torch.nn.LayerNorm, torch.nn.GroupNorm))
            for p_name, p in m.named_parameters(recurse=False):
                if is_norm and p_name == "weight":
                    draw(p, 0.1, 1.0)
                elif p_name == "logit_scale":
                    draw(p, 0.1, math.log(10))
                elif p_name in ("weight", "in_proj_weight") and p.ndim > 1:
                    draw(p, 1 / math.sqrt(p[0].numel()))
                else:
                    draw(p, 0.1)
    return randomise_statistics(module, seed)


@contextlib.contextmanager
def batch_norms_scaled_to_inputs(module):
    """Within it, each batch norm of a torch module in eval mode, the first time it runs, multiplies
    its running mean by the root mean square of its input and its running variance by the mean
    square, before normalising: its outputs stay of order one however deep the network, and the
    output of that first forward pass is the module's from then on."""
    import torch

    hooks = {}

    def scale(m, inputs):
        ms = float(inputs[0].detach().square().mean())
        with torch.no_grad():
            m.running_mean.mul_(math.sqrt(ms))
            m.running_var.mul_(ms)
        hooks.pop(m).remove()

    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            hooks[m] = m.register_forward_pre_hook(scale)
    try:
        yield
    finally:
        for h in hooks.values():
            h.remove()


def compare_in_memory(name, size, batch=1, dtype="float64", rtol=1e-9, atol=1e-9, seed=0, **kwargs):
    """`compare` without a file and without drawing any initialisation: torchvision's `name` built
    on the meta device in `dtype`, allocated (`to_empty`) and filled by `fill_randomly`, its batch
    norms scaled to the input on its forward pass (`batch_norms_scaled_to_inputs`); ours built with
    the initialisers skipped (`nn.init.skipped`), cast to `dtype` and loaded from that state dict
    (strict, the same keys in the same order); both in eval mode with their parameters frozen. The
    output and the input gradient of the top class's one-hot seed on a random (batch, 3, size,
    size) input must agree within rtol and atol (the gradient's atol scaled by its largest
    magnitude). torchvision's model is let go once ours is loaded; the peak is the two models'
    parameters, 16 bytes each in float64, 8 in float32."""
    import torch

    import saliency as sl
    from saliency import nn
    from saliency.models.vision import ARCHITECTURES

    theirs = on_meta(name, getattr(torch, dtype), **kwargs).to_empty(device="cpu")
    theirs = fill_randomly(theirs.requires_grad_(False), seed).to(getattr(torch, dtype)).eval()
    x = np.random.default_rng(seed).standard_normal((batch, 3, size, size)).astype(dtype)
    xt = torch.tensor(x, requires_grad=True)
    with batch_norms_scaled_to_inputs(theirs):
        y = theirs(xt)
    v = torch.nn.functional.one_hot(y.argmax(1), y.shape[1]).to(y.dtype)
    (g,) = torch.autograd.grad(y, xt, v)
    y = y.detach().numpy()

    with nn.init.skipped():
        ours = ARCHITECTURES[name].build(**kwargs)
    with np.errstate(invalid="ignore"):  # the cast of memory never written, which may hold NaNs
        ours = ours.to(dtype=getattr(sl, dtype)).eval().requires_grad_(False)
    state = theirs.state_dict()
    ours.load_state_dict({k: t.numpy() for k, t in state.items()})
    assert list(ours.state_dict(keep_vars=True)) == list(state)
    del theirs, state
    xs = sl.tensor(x, requires_grad=True)
    ys = ours(xs)
    np.testing.assert_allclose(ys.numpy(), y, rtol=rtol, atol=atol)
    ys.backward(sl.tensor(v.numpy()))
    np.testing.assert_allclose(xs.grad.numpy(), g.numpy(), rtol=rtol, atol=atol * max(1.0, float(g.abs().max())))


def same_out_on_a_batch(ours, theirs, shape):
    """A segmenter's "out" logits on a batch of `shape` (two images, not square, not a multiple of
    the output stride): the same as torchvision's, in float64."""
    import torch

    import saliency as sl

    x = np.random.default_rng(1).standard_normal(shape)
    with torch.no_grad():
        expected = theirs(torch.tensor(x))["out"].numpy()
    with sl.no_grad():
        got = ours(sl.tensor(x))
    assert isinstance(got, sl.Tensor) and got.shape == expected.shape == (shape[0], 21) + tuple(shape[2:])
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-9, atol=1e-9)
