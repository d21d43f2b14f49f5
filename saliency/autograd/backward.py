"""Entry points of the backward pass: `backward` (fills .grad) and `grad` (returns the VJPs)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from . import engine
from .patch import Patch
from .tensor import Tensor, as_array

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .tensor import GradNode, TensorLike


def _as_list(x: Tensor | Iterable[Tensor], what: str) -> list[Tensor]:
    if isinstance(x, Tensor):
        return [x]
    items = list(x)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}[{i}] must be a Tensor, got {type(t).__name__}")
    return items


def _root(t: Tensor, i: int) -> GradNode:
    """The node a backward pass starts from for output `t`."""
    if not t.requires_grad:
        raise RuntimeError(f"output {i} does not require grad and has no grad_fn: nothing it depends on was "
                           f"created with requires_grad=True; set requires_grad=True on the inputs you want "
                           f"gradients for (and compute outside sl.no_grad())")
    return t.grad_fn if t.grad_fn is not None else t._accumulator()


def _seed(t: Tensor, gradient: TensorLike | None, i: int, seed_ndim: int) -> NDArray[Any]:
    """The gradient that starts the pass at output `t`: checked, as an array of t's dtype."""
    if gradient is None:
        if seed_ndim:
            raise ValueError("batched=True needs grad_outputs whose first dimension indexes the seeds")
        if t._array.size != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs, but output {i} has shape "
                               f"{t.shape}; pass gradient= of that shape (the vector v in v^T J), "
                               f"e.g. sl.ones_like(y) for the gradient of y.sum()")
        return np.ones(t.shape, dtype=t.dtype)
    g = as_array(gradient)
    if g.shape[seed_ndim:] != t.shape or g.ndim != seed_ndim + t.ndim:
        want = ("(K,) + " if seed_ndim else "") + str(t.shape)
        raise RuntimeError(f"Mismatch in shape: gradient {i} has shape {g.shape} but output {i} has shape "
                           f"{t.shape}; pass a gradient of shape {want}")
    return g.astype(t.dtype, copy=False)


def backward(tensors: Tensor | Sequence[Tensor], grad_tensors: TensorLike | Sequence[TensorLike] | None = None,
             retain_graph: bool | None = None, inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate sum_i v_i^T dy_i/dx into x.grad for every leaf x (or only for `inputs`)."""
    outputs = _as_list(tensors, "tensors")
    if isinstance(tensors, Tensor):
        # backward(y, g) and backward(y, [g]) alike, as in PyTorch; a nested list of numbers is one gradient
        one = isinstance(grad_tensors, (list, tuple)) and len(grad_tensors) == 1 and \
            isinstance(grad_tensors[0], (Tensor, np.ndarray))
        grads: list[Any] = [grad_tensors[0] if one else grad_tensors]  # type: ignore[index]
    else:
        grads = list(grad_tensors) if grad_tensors is not None else [None] * len(outputs)  # type: ignore[arg-type]
    if len(grads) != len(outputs):
        raise ValueError(f"got {len(grads)} gradients for {len(outputs)} outputs; pass one per output")
    roots = [(_root(t, i), _seed(t, g, i, 0)) for i, (t, g) in enumerate(zip(outputs, grads))]
    targets: dict[GradNode, list[tuple[Tensor, int]]] | None = None
    if inputs is not None:
        leaves = _as_list(inputs, "inputs")
        if not leaves:
            raise ValueError("inputs= is empty; pass the tensors whose .grad to fill, or leave it out")
        targets = {}
        for t in leaves:
            if not t.requires_grad:
                raise RuntimeError("one of inputs= does not require grad; only tensors that require grad get .grad")
            node = t.grad_fn if t.grad_fn is not None else t._accumulator()
            targets.setdefault(node, []).append((t, 0))
    engine.execute(roots, retain_graph=bool(retain_graph), targets=targets)


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: TensorLike | Sequence[TensorLike] | None = None, retain_graph: bool | None = None,
         batched: bool = False, allow_unused: bool = False) -> tuple[Tensor | None, ...]:
    """The VJPs sum_i v_i^T dy_i/dx for each x in `inputs`, without touching any .grad.

    With batched=True the first dimension of every grad_output indexes K seeds, which all go
    through ONE backward pass; each result then has that leading dimension too.
    """
    outs = _as_list(outputs, "outputs")
    ins = _as_list(inputs, "inputs")
    seed_ndim = 1 if batched else 0
    if grad_outputs is None:
        grads: list[Any] = [None] * len(outs)
    elif isinstance(grad_outputs, (Tensor, np.ndarray)) or np.isscalar(grad_outputs):
        grads = [grad_outputs]
    else:
        grads = list(grad_outputs)  # type: ignore[arg-type]
    if len(grads) != len(outs):
        raise ValueError(f"got {len(grads)} grad_outputs for {len(outs)} outputs; pass one per output")
    roots = [(_root(t, i), _seed(t, g, i, seed_ndim)) for i, (t, g) in enumerate(zip(outs, grads))]
    if batched and len({g.shape[0] for _, g in roots}) != 1:
        raise ValueError("batched grad_outputs must all have the same number of seeds (first dimension)")
    targets: dict[GradNode, list[tuple[Tensor, int]]] = {}
    for slot, t in enumerate(ins):
        if not t.requires_grad:
            raise RuntimeError(f"inputs[{slot}] does not require grad; autograd.grad can only differentiate with "
                               f"respect to tensors that require grad")
        node = t.grad_fn if t.grad_fn is not None else t._accumulator()
        targets.setdefault(node, []).append((t, slot))
    found = engine.execute(roots, retain_graph=bool(retain_graph), targets=targets, capture=True, seed_ndim=seed_ndim)
    assert found is not None  # capture=True returns the list
    results: list[Tensor | None] = []
    for slot, g in enumerate(found):
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"inputs[{slot}] was not used to compute the outputs (no path leads to it); "
                                   f"pass allow_unused=True to get None for it")
            results.append(None)
        else:
            # a Patch's dense array is fresh; any other array may be shared with the graph: copy it
            g = g.dense().astype(ins[slot].dtype, copy=False) if type(g) is Patch else np.array(g, ins[slot].dtype)
            results.append(Tensor._make(g, False, None))
    return tuple(results)
