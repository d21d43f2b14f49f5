"""The op functions are exported under the same names wherever PyTorch exports them.

`saliency.autograd.api` declares every public op once, with the surfaces it appears on; the
Tensor methods, `saliency.<name>` and `saliency.nn.functional.<name>` are generated from that
registry. Each op must be `saliency.<name>`, a `Tensor` method and `saliency.nn.functional.<name>`
exactly where PyTorch has `torch.<name>`, `torch.Tensor.<name>` and `torch.nn.functional.<name>`,
unless it is in EXCEPTIONS with a reason; and where two of our surfaces share a name, they are the
same function (or, for the few that PyTorch defines differently, a documented wrapper).
"""
import inspect

import pytest

import saliency as sl
from saliency.autograd import api
from saliency.nn import functional as F

REGISTERED = {surface: api.exported(surface) for surface in api.SURFACES}
OP_NAMES = sorted({n for names in REGISTERED.values() for n in names if not n.startswith("__")} - {"backward"})
OURS = {"Tensor": sl.Tensor, "saliency": sl, "F": F}


def test_the_surfaces_are_generated_from_the_registry():
    for surface, names in REGISTERED.items():
        for name, fn in names.items():
            assert getattr(OURS[surface], name) is fn, f"{surface}.{name}"


def test_every_public_function_of_api_py_is_registered():
    registered = {id(fn) for names in REGISTERED.values() for fn in names.values()}
    orphans = [n for n, v in vars(api).items() if inspect.isfunction(v) and v.__module__ == api.__name__
               and not n.startswith("_") and n not in ("public", "exported") and id(v) not in registered]
    assert not orphans, f"declared in api.py but on no surface: {orphans}"


def test_an_unknown_surface_is_refused():
    with pytest.raises(ValueError, match="unknown surface"):
        api.public("torch")


torch = pytest.importorskip("torch")

SURFACES = {  # ours -> PyTorch's
    "saliency": (sl, torch),
    "Tensor": (sl.Tensor, torch.Tensor),
    "F": (F, torch.nn.functional),
}

# (surface, name): why ours differs from PyTorch there
EXCEPTIONS = {
    ("Tensor", "where"): "missing: x.where(condition, y) is not provided; sl.where(condition, x, y) is",
    ("F", "upsample_conv2d"): "ours only: the Upsample(nearest) + 3x3 Conv2d node of a fused Sequential (nn.fuse)",
    ("saliency", "cross_entropy"): "extra: the losses are also top-level functions (sl.cross_entropy(logits, y))",
    ("saliency", "nll_loss"): "extra: the losses are also top-level functions",
    ("saliency", "mse_loss"): "extra: the losses are also top-level functions",
    ("saliency", "pad"): "extra: sl.pad as well as F.pad",
    ("F", "flatten"): "extra: F.flatten, used by the nn layers (torch.flatten's signature)",
}

# nn.functional names that PyTorch defines with other defaults than the Tensor method (dim=None warns)
F_WRAPPERS = {"softmax", "log_softmax"}


def test_the_op_list_is_read_from_the_registry():
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
        found = {surface: getattr(OURS[surface], name) for surface in OURS if hasattr(OURS[surface], name)
                 and not (surface == "F" and name in F_WRAPPERS)}
        assert len({id(fn) for fn in found.values()}) == 1, f"{name}: {sorted(found)} differ"
