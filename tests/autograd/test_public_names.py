"""The op functions are exported under the same names wherever PyTorch exports them.

`saliency.autograd.functions` lists every op as a function. Each one must be `saliency.<name>`,
a `Tensor` method and `saliency.nn.functional.<name>` exactly where PyTorch has `torch.<name>`,
`torch.Tensor.<name>` and `torch.nn.functional.<name>`, unless it is in EXCEPTIONS with a reason;
and where two of our surfaces share a name, they are the same function (or, for the few that
PyTorch defines differently, a documented wrapper).
"""
import inspect

import pytest

import saliency as sl
from saliency.autograd import functions
from saliency.nn import functional as F

torch = pytest.importorskip("torch")

OP_NAMES = sorted(n for n, v in vars(functions).items()
                  if not n.startswith("_") and inspect.isroutine(v) and n not in ("as_array",))

SURFACES = {  # ours -> PyTorch's
    "saliency": (sl, torch),
    "Tensor": (sl.Tensor, torch.Tensor),
    "nn.functional": (F, torch.nn.functional),
}

# (surface, name): why ours differs from PyTorch there
EXCEPTIONS = {
    ("Tensor", "where"): "missing: x.where(condition, y) is not provided; sl.where(condition, x, y) is",
    ("nn.functional", "upsample_conv2d"): "ours only: the fused Upsample(nearest) + 3x3 Conv2d node of Sequential",
    ("saliency", "cross_entropy"): "extra: the losses are also top-level functions (sl.cross_entropy(logits, y))",
    ("saliency", "nll_loss"): "extra: the losses are also top-level functions",
    ("saliency", "mse_loss"): "extra: the losses are also top-level functions",
    ("saliency", "pad"): "extra: sl.pad as well as F.pad",
    ("nn.functional", "flatten"): "extra: F.flatten, used by the nn layers (torch.flatten's signature)",
}

# nn.functional names that PyTorch defines with other defaults than the Tensor method (dim=None warns)
F_WRAPPERS = {"softmax", "log_softmax", "flatten"}


def test_the_op_list_is_read_from_functions_py():
    assert {"add", "relu", "conv2d", "cat", "where", "max_pool2d", "interpolate", "upsample_conv2d"} <= set(OP_NAMES)


@pytest.mark.parametrize("surface", list(SURFACES))
def test_an_op_is_exported_where_pytorch_exports_it(surface):
    ours, theirs = SURFACES[surface]
    wrong = []
    for name in OP_NAMES:
        if (surface, name) in EXCEPTIONS:
            assert hasattr(ours, name) != hasattr(theirs, name), \
                f"{surface}.{name} agrees with PyTorch now: remove it from EXCEPTIONS"
            continue
        if hasattr(ours, name) != hasattr(theirs, name):
            wrong.append(f"{name} ({'only ours' if hasattr(ours, name) else 'missing'})")
    assert not wrong, f"{surface}: " + ", ".join(wrong)


def test_the_same_name_is_the_same_function_everywhere():
    for name in OP_NAMES:
        fn = getattr(functions, name)
        if hasattr(sl, name):
            assert getattr(sl, name) is fn, name
        if hasattr(F, name) and name not in F_WRAPPERS:
            assert getattr(F, name) is fn, name
        method = getattr(sl.Tensor, name, None)
        if method is not None and fn.__module__ != functions.__name__:
            assert method is fn, name  # functions.py binds the Tensor method itself
