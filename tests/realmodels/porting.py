"""Port a PyTorch model file to saliency the way a user does, and compare the two models.

The architecture files
----------------------
Each file `tests/realmodels/archs/<name>.py` is one architecture written as a researcher writes a
PyTorch model file. Its first three lines are exactly

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

followed by plain PyTorch code and a module-level `build(**kwargs)` that returns the model:
`build()` is the real architecture (real widths), keyword arguments make it smaller. Files whose
name starts with "_" are not architectures (helpers, drafts) and are skipped.

Optional module-level constants, read from the file's text (they must be literals: the test
collection evaluates them with `ast.literal_eval`, without running the file):

    INPUT = (3, 32, 32)              # the real input: (C, H, W) of one image, or a whole batch
                                     # (N, C, H, W); (3, 32, 32) when absent
    TEST_INPUT = (1, 3, 40, 52)      # the input of the tests, same forms; INPUT when absent
    TEST_KWARGS = {"width": 16}      # keyword arguments of build() for the tests; {} when absent
    XFAIL = "needs F.pixel_shuffle"  # only while an op the file uses is missing from saliency:
                                     # the tests are then strict xfails with this reason, so they
                                     # fail as soon as the op lands and the line must go

The tests build `build(**TEST_KWARGS)` (keep it small: each file's tests should take a few
seconds) and feed it a random float64 batch of shape TEST_INPUT (a (C, H, W) shape gets a batch
of two). `build()` at its defaults is built too, on both sides, and its state-dict keys and
shapes compared (no forward pass). A model whose output is 4-D (N, C, H, W) is a dense-output
model (segmentation, depth, ...) and is checked with the all-ones seed and with one-hot pixel
seeds; any other output, (N, classes), is a classifier, checked with one-hot class seeds.

Porting
-------
`load(path, "saliency")` reads the file, replaces exactly those three lines with

    import saliency as torch
    import saliency.nn as nn
    import saliency.nn.functional as F

(nothing else changes: line numbers stay those of the file) and runs it as a fresh module;
`load(path, "torch")` runs it unchanged. `build_pair` builds both models from the same file and
copies the weights PyTorch -> saliency through `state_dict()` as NumPy arrays with
`load_state_dict(strict=True)`, after giving every batch-norm layer non-trivial running
statistics and affine parameters (as a trained model has; fresh ones are the identity). Both
models are in eval mode and float64.
"""
import ast
import importlib.util
import itertools
import os
import sys
from dataclasses import dataclass

import numpy as np

import saliency

ARCHS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "archs")

TORCH_HEADER = ("import torch", "import torch.nn as nn", "import torch.nn.functional as F")
SALIENCY_HEADER = ("import saliency as torch", "import saliency.nn as nn", "import saliency.nn.functional as F")

DEFAULT_INPUT = (3, 32, 32)
BATCH = 2
RTOL, ATOL = 1e-9, 1e-10  # float64, both outputs and input gradients

_loaded = itertools.count()


def arch_files():
    """The architecture files, sorted by name (files starting with "_" left out)."""
    if not os.path.isdir(ARCHS_DIR):
        return []
    return sorted(os.path.join(ARCHS_DIR, f) for f in os.listdir(ARCHS_DIR)
                  if f.endswith(".py") and not f.startswith("_"))


def arch_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def read_source(path):
    """The file's text, after checking that it starts with the three PyTorch import lines."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head = tuple(line.rstrip() for line in text.splitlines()[:3])
    if head != TORCH_HEADER:
        raise ValueError(f"{path} must start with the three lines {' / '.join(TORCH_HEADER)}, got {head}")
    return text


def ported_source(text):
    """`text` with its three PyTorch import lines replaced by saliency's, line for line."""
    lines = text.splitlines(keepends=True)
    for i, ours in enumerate(SALIENCY_HEADER):
        ending = lines[i][len(lines[i].rstrip()):]
        lines[i] = ours + ending
    return "".join(lines)


def load(path, flavour):
    """Run the file as a new module: as written ("torch") or ported ("saliency")."""
    if flavour not in ("torch", "saliency"):
        raise ValueError(f"flavour must be 'torch' or 'saliency', got {flavour!r}")
    text = read_source(path)
    if flavour == "saliency":
        text = ported_source(text)
    name = f"realmodels_{flavour}_{arch_name(path)}_{next(_loaded)}"
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules[name] = module  # dataclasses, pickling and typing look modules up by name
    try:
        exec(compile(text, path, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _shape(path, key, value):
    shape = tuple(value) if isinstance(value, (tuple, list)) else ()
    if len(shape) not in (3, 4) or not all(isinstance(n, int) and n > 0 for n in shape):
        raise ValueError(f"{path}: {key} must be (C, H, W) or (N, C, H, W) of positive ints, got {value!r}")
    return shape if len(shape) == 4 else (BATCH,) + shape


def settings(path):
    """(test input shape (N, C, H, W), TEST_KWARGS, XFAIL) of the file, from its module-level
    assignments."""
    found = {"INPUT": DEFAULT_INPUT, "TEST_INPUT": None, "TEST_KWARGS": {}, "XFAIL": None}
    tree = ast.parse(read_source(path), filename=path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            if key in found:
                found[key] = ast.literal_eval(node.value)
    _shape(path, "INPUT", found["INPUT"])
    test_input = found["INPUT"] if found["TEST_INPUT"] is None else found["TEST_INPUT"]
    shape = _shape(path, "TEST_INPUT" if found["TEST_INPUT"] is not None else "INPUT", test_input)
    if not isinstance(found["TEST_KWARGS"], dict):
        raise ValueError(f"{path}: TEST_KWARGS must be a dict, got {found['TEST_KWARGS']!r}")
    if found["XFAIL"] is not None and not isinstance(found["XFAIL"], str):
        raise ValueError(f"{path}: XFAIL must be a string (the missing op), got {found['XFAIL']!r}")
    return shape, found["TEST_KWARGS"], found["XFAIL"]


def randomize_norm_stats(torch_model, seed=0):
    """Give every norm layer trained-looking values: running statistics where it keeps them, and
    affine weights and biases away from their initial ones and zeros (batch, group, layer and
    instance norms alike; fresh ones would leave the affine step untested)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    norms = (torch.nn.modules.batchnorm._NormBase, torch.nn.GroupNorm, torch.nn.LayerNorm)
    with torch.no_grad():
        for m in torch_model.modules():
            mean, var = getattr(m, "running_mean", None), getattr(m, "running_var", None)
            if isinstance(m, norms) and not isinstance(mean, torch.Tensor):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(0.75 + 0.5 * torch.rand(m.weight.shape, generator=gen, dtype=m.weight.dtype))
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen, dtype=m.bias.dtype))
            if isinstance(mean, torch.Tensor) and isinstance(var, torch.Tensor):
                mean.copy_(0.2 * torch.randn(mean.shape, generator=gen, dtype=mean.dtype))
                var.copy_(0.5 + torch.rand(var.shape, generator=gen, dtype=var.dtype))
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(0.75 + 0.5 * torch.rand(m.weight.shape, generator=gen, dtype=m.weight.dtype))
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen, dtype=m.bias.dtype))


def state_arrays(torch_model):
    """The torch model's state dict as {key: ndarray}."""
    return {k: v.detach().cpu().numpy() for k, v in torch_model.state_dict().items()}


def copy_weights(torch_model, our_model):
    """Load the torch model's weights into ours through the state dict, strictly."""
    our_model.load_state_dict(state_arrays(torch_model), strict=True)
    return our_model


@dataclass
class Pair:
    """The same architecture built by PyTorch and by saliency, with the same weights."""

    name: str
    torch_model: object
    our_model: object
    input_shape: tuple  # (N, C, H, W) of the test input


def build_pair(path, kwargs=None, *, seed=0):
    """Build the file's model with PyTorch and with saliency (`kwargs` default to TEST_KWARGS),
    copy the weights across, both in eval mode and float64."""
    import torch

    shape, test_kwargs, _ = settings(path)
    kwargs = test_kwargs if kwargs is None else kwargs
    torch_file, our_file = load(path, "torch"), load(path, "saliency")
    torch.manual_seed(seed)
    torch_model = torch_file.build(**kwargs)
    saliency.manual_seed(seed)
    our_model = our_file.build(**kwargs)
    if not isinstance(our_model, saliency.nn.Module) or isinstance(our_model, torch.nn.Module):
        raise TypeError(f"{path}: the ported build() returned a {type(our_model).__module__}."
                        f"{type(our_model).__name__}, not a saliency.nn.Module (does the file import torch twice?)")
    randomize_norm_stats(torch_model, seed)
    torch_model.double().eval()
    our_model.double().eval()
    copy_weights(torch_model, our_model)
    return Pair(arch_name(path), torch_model, our_model, shape)


def make_input(shape, seed=0):
    """A random float64 input of shape (N, C, H, W)."""
    return np.random.default_rng(seed).standard_normal(tuple(shape))


def forward(pair, x):
    """(x_torch, y_torch, x_ours, y_ours) for the ndarray input x, both inputs requiring grad."""
    import torch

    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    xs = saliency.tensor(x, dtype=saliency.float64, requires_grad=True)
    return xt, pair.torch_model(xt), xs, pair.our_model(xs)


def is_dense(y):
    """True for a dense (N, C, H, W) output, False for a classifier's (N, classes)."""
    return len(tuple(y.shape)) == 4


def class_seeds(y):
    """One-hot seeds on each sample's top class (the class an attribution map explains)."""
    scores = np.asarray(y.detach().numpy())
    seeds = []
    for n in range(scores.shape[0]):
        v = np.zeros(scores.shape)
        v[(n, int(np.argmax(scores[n])))] = 1.0
        seeds.append((f"class[{n}]", v))
    return seeds


def dense_seeds(shape):
    """The all-ones seed and two one-hot pixel seeds (a corner of sample 0, an interior pixel of
    the last sample and channel) for a dense output of `shape`."""
    n, c, h, w = shape
    corner = np.zeros(shape)
    corner[0, 0, 0, 0] = 1.0
    inner = np.zeros(shape)
    inner[n - 1, c - 1, h // 2, w // 3] = 1.0
    return [("ones", np.ones(shape)), ("pixel[0,0,0,0]", corner), (f"pixel[{n - 1},{c - 1},{h // 2},{w // 3}]", inner)]


def input_gradient_torch(xt, yt, v):
    import torch

    (g,) = torch.autograd.grad(yt, xt, torch.from_numpy(v), retain_graph=True)
    return g.numpy()


def input_gradient_ours(xs, ys, v, batched=False):
    (g,) = saliency.autograd.grad(ys, xs, saliency.tensor(v, dtype=saliency.float64), retain_graph=True,
                                  batched=batched)
    return g.numpy()


def assert_close(ours, theirs, what):
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=RTOL, atol=ATOL, err_msg=what)
