"""Graph nodes of ops: the `Function` base class (an instance is a `grad_fn`), and `unbroadcast`.

(The node of a leaf, `AccumulateGrad`, lives with `Tensor` in saliency.autograd.tensor.)

An op subclasses `Function` and writes, side by side:

* `forward(self, *arrays, **params) -> ndarray`: NumPy arrays in, one array out.
  It saves what the VJP needs with `self.save_for_backward(...)`.
* `backward(self, g) -> tuple`: `g` has the output's shape, possibly with extra
  leading *seed* dimensions (K seeds in one pass); it returns one gradient per
  input, each with `g`'s leading seed dimensions plus that input's shape, or
  `None` for an input that needs no gradient (`self.needs_input_grad[i]` false).

`Op.apply(*inputs, **params)` runs the forward pass and, when grad mode is on
and an input requires grad, leaves the node on the graph.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

import numpy as np

from .grad_mode import enabled_var, frozen_var
from .rules import record_var
from .tensor import PreHooks, Tensor, next_seq

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .._typing import Shape
    from .tensor import GradNode

_NO_EDGE = (None, 0)
_grad_enabled = enabled_var.get  # the grad mode of the calling thread or task
_frozen = frozen_var.get          # leaves that record no graph in the calling thread or task
_recording = record_var.get       # the Recording of a rule-based method's forward pass, or None

# `backward_window = DENSE` declares an op without a cropped VJP: a Patch reaching it is made dense
# and goes through `backward`. It is None, the engine's one test; an op declares it in its class (or
# its family's base class) with the reason, so that the choice is visible where the op is written.
DENSE = None


class Function(PreHooks):
    """Base class of every op; an instance is the node the op leaves on the graph."""

    __slots__ = ("next_functions", "needs_input_grad", "saved", "out_shape", "out_dtype", "seq", "retain_ref",
                 "__weakref__")
    next_functions: tuple[tuple[GradNode | None, int], ...]
    needs_input_grad: list[bool]
    saved: Any  # the tuple save_for_backward kept; None once a backward has freed it
    out_shape: Shape
    out_dtype: np.dtype[Any]
    seq: int
    retain_ref: Any  # a weakref.ref to the non-leaf Tensor whose .grad is kept, or None
    # True for elementwise ops whose inputs broadcast: a shape error names both shapes.
    broadcasts = False
    # Every op with a spatial window rule declares `backward_window` in its class: its cropped VJP
    # `backward_window(self, patch)`, the VJP of a gradient that is zero outside windows (a
    # `saliency.autograd.patch.Patch`), returning one Patch, dense array or None per input, or None as
    # a whole to get the dense gradient through `backward`; or DENSE. The default here is for a user's
    # Function, which declares nothing (tests/autograd/test_op_registry.py checks the package's ops).
    backward_window: Callable[..., Any] | None = DENSE
    # Every op also declares `window_rule(self, box, shapes)`, where in each input its VJP can be
    # non-zero for a box of its output (a method, or a shared rule of saliency.autograd.geometry:
    # `elementwise_window`, `whole_window` for an op that mixes positions). The base class declares
    # none, so a missing rule is detectable (tests/autograd/test_op_registry.py); a Function without
    # one gets whole maps in saliency.autograd.windows.

    @classmethod
    def apply(cls, *inputs: Any, **params: Any) -> Tensor:
        """Run the op on `inputs` (Tensors, arrays or numbers) with keyword `params` and return the output
        Tensor: `forward` gets the inputs' arrays, and when grad mode is on and an input requires grad, a new
        node of this class is left on the graph as the output's grad_fn. The one way to call an op."""
        node = cls.__new__(cls)
        arrays: list[Any] = []
        edges: list[tuple[GradNode | None, int]] = []
        needs: list[bool] = []
        record = _grad_enabled()
        any_grad = False
        frozen: frozenset[int] | None = None
        source: Tensor | None = None
        for t in inputs:
            if isinstance(t, Tensor):
                arrays.append(t._array)
                if record and t._requires_grad:
                    fn = t.grad_fn
                    if fn is None:
                        if frozen is None:
                            frozen = _frozen()
                            kept = _recording()
                            source = None if kept is None else kept.source
                        # a frozen leaf, or inside a rule-based method's recording any leaf but its input:
                        # a constant (a function model's parameters are weights, not data)
                        if (frozen and id(t) in frozen) or (source is not None and t is not source):
                            edges.append(_NO_EDGE)
                            needs.append(False)
                            continue
                    edges.append((fn if fn is not None else t._accumulator(), 0))
                    needs.append(True)
                    any_grad = True
                    continue
            else:
                arrays.append(t)
            edges.append(_NO_EDGE)
            needs.append(False)
        node.needs_input_grad = needs
        node.saved = ()
        try:
            out = node.forward(*arrays, **params)
        except ValueError:
            if cls.broadcasts:
                shapes = " and ".join(str(np.shape(a)) for a in arrays)
                raise ValueError(f"{cls.__name__.lower()}: shapes {shapes} cannot be broadcast together; "
                                 f"each dimension must match or be 1") from None
            raise
        if type(out) is not np.ndarray:
            out = np.asarray(out)
        if not any_grad:
            return Tensor._make(out, False, None)
        node.next_functions = tuple(edges)
        node.out_shape = out.shape
        node.out_dtype = out.dtype
        node.seq = next_seq()
        node.pre_hooks = None
        node.retain_ref = None
        kept_by = _recording()
        if kept_by is not None:
            kept_by.keep(node, arrays, out, params)
        return Tensor._make(out, True, node)

    def save_for_backward(self, *arrays: Any) -> None:
        """Keep `arrays` as `self.saved` for `backward` (forward calls it with what the VJP needs);
        a backward without retain_graph frees them."""
        self.saved = arrays

    def forward(self, *arrays: Any, **params: Any) -> Any:
        """What a subclass implements: the output array from the inputs' arrays (NumPy in, one array
        out) and the op's keyword params, saving what backward needs; `apply` calls it."""
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    def backward(self, g: Any) -> Any:
        """What a subclass implements, the VJP: from `g`, the output's gradient (with any leading seed
        dimensions), one gradient per input with g's seed dimensions plus that input's shape, or None where
        `needs_input_grad[i]` is false. The engine calls it during backward()."""
        raise NotImplementedError(f"{type(self).__name__} has no backward")

    def name(self) -> str:
        """The node's name as PyTorch spells it, e.g. 'MulBackward0'."""
        return type(self).__name__ + "Backward0"

    def seed_ndim(self, g: NDArray[Any]) -> int:
        """Number of leading seed dimensions that `g` carries beyond the output's shape."""
        return g.ndim - len(self.out_shape)

    def __getattr__(self, attr: str) -> NoReturn:
        # only reached when normal lookup fails: name the node as PyTorch does (an unset slot
        # may be what name() itself reads, so those fail plainly)
        if attr.startswith("_") or any(attr in getattr(k, "__slots__", ()) for k in type(self).__mro__):
            raise AttributeError(attr)
        raise AttributeError(f"'{self.name()}' object has no attribute '{attr}'")

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


def unbroadcast(g: NDArray[Any], shape: Sequence[int], seed_ndim: int = 0) -> NDArray[Any]:
    """Sum `g` down to `g.shape[:seed_ndim] + shape`: the reverse of NumPy broadcasting.

    `seed_ndim` is the number of leading seed dimensions of `g`, which are kept.
    """
    if g.shape[seed_ndim:] == shape and g.ndim == seed_ndim + len(shape):
        return g
    extra = g.ndim - seed_ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(seed_ndim, seed_ndim + extra)))
    axes = tuple(seed_ndim + i for i, n in enumerate(shape) if n == 1 and g.shape[seed_ndim + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g


def shape_of(a: Any) -> Shape:
    """Shape of an ndarray or of a Python/NumPy scalar constant."""
    kind = type(a)
    if kind is np.ndarray:
        return a.shape
    if kind is float or kind is int:
        return ()
    return np.shape(a)
