"""Module hooks: `RemovableHandle` and the identity nodes behind `register_full_backward_hook`.

A full backward hook must see the gradient with respect to a module's *inputs*, however many ops
the module runs. As in PyTorch (torch.utils.hooks.BackwardHook), the module's tensor inputs and
outputs pass through identity nodes named `BackwardHookFunctionBackward`:

* the node on the outputs runs first in the backward pass and captures `grad_output`;
* the node on the inputs runs once every op inside the module has sent its gradient back, so it
  holds `grad_input`: it calls the hooks there, and may pass on their replacement.

Our nodes have one output each, so several tensors share one *gate* node: the first tensor goes
through the gate itself and every other one through a small `_Carry` node that hands its
gradient to the gate (and sends zeros along the graph edge that makes the gate wait for it).
"""
from __future__ import annotations

import itertools
import warnings
from typing import Any, Callable, Literal, Sequence

import numpy as np

from ..autograd import rules
from ..autograd.node import Function
from ..autograd.geometry import whole_window
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.tensor import Tensor

_next_id = itertools.count().__next__

# a gradient array, or None where a tensor got none
_Grads = list[Any]
# the Module whose hooks these are (not named: module.py imports this one)
_Module = Any


class RemovableHandle:
    """Returned by `register_*_hook`; `.remove()` unregisters the hook (also usable as a context manager)."""

    def __init__(self, hooks: dict[int, Any]) -> None:
        self._hooks = hooks
        self.id = _next_id()

    def remove(self) -> None:
        """Unregister the hook (nothing happens if it is already removed)."""
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.remove()
        return False


class _Gate(Function):
    """Identity on the first tensor; on backward, hands every tensor's gradient to `on_grads`.

    A tensor that got no gradient is None, or zeros of its shape with `materialize` (as PyTorch
    gives its input-side hooks)."""

    __slots__ = ("on_grads", "materialize", "stash", "shapes")
    rule = rules.ROUTE
    window_rule = whole_window  # a hook may return any gradient

    def forward(self, first: np.ndarray, *rest: np.ndarray, on_grads: Callable[[_Grads], _Grads],
                materialize: bool) -> np.ndarray:
        self.on_grads, self.materialize = on_grads, materialize
        self.stash: dict[int | str, np.ndarray] = {}
        self.shapes = [(a.shape, a.dtype) for a in (first, *rest)]
        return first

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        stash, self.stash = self.stash, {}
        seed_ndim = g.ndim - len(self.out_shape)
        # g is the carries' zeros object itself when the first tensor got no gradient of its own
        grads: _Grads = [None if g is stash.get("zeros") else g] + [stash.get(i) for i in range(1, len(self.shapes))]
        if self.materialize:
            grads = [np.zeros(g.shape[:seed_ndim] + shape, dtype=dtype) if gi is None else gi
                     for gi, (shape, dtype) in zip(grads, self.shapes)]
        return tuple(self.on_grads(grads))

    def name(self) -> str:
        return "BackwardHookFunctionBackward"


class _Carry(Function):
    """Identity on one more tensor of a gate; its gradient goes to the gate's stash.

    The first carry to run also sends zeros to the gate, so that the gate runs even when its own
    tensor got no gradient (the others send None, which still counts as done)."""

    __slots__ = ("gate", "index")
    rule = rules.ROUTE
    window_rule = whole_window

    def forward(self, carrier: np.ndarray, *, data: np.ndarray, gate: _Gate, index: int) -> np.ndarray:
        self.gate, self.index = gate, index
        return data

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None]:
        stash = self.gate.stash
        prev = stash.get(self.index)
        stash[self.index] = g if prev is None else prev + g
        if "zeros" in stash:
            return (None,)
        seed_ndim = g.ndim - len(self.out_shape)
        stash["zeros"] = np.zeros(g.shape[:seed_ndim] + self.gate.out_shape, dtype=self.gate.out_dtype)
        return (stash["zeros"],)

    def name(self) -> str:
        return "BackwardHookFunctionBackward"


def _through_gate(tensors: Sequence[Tensor], on_grads: Callable[[_Grads], _Grads],
                  materialize: bool) -> list[Tensor]:
    """The tensors passed through one gate node (in the same order)."""
    first = _Gate.apply(*tensors, on_grads=on_grads, materialize=materialize)
    gate = first.grad_fn
    out = [first]
    for i, t in enumerate(tensors[1:], 1):
        out.append(_Carry.apply(first, data=t._array, gate=gate, index=i))
    return out


def _as_tensor(g: np.ndarray | None) -> Tensor | None:
    return None if g is None else Tensor._make(g, False, None)


class BackwardHook:
    """One module call's full backward hooks: set up on its inputs and outputs, fired on backward."""

    def __init__(self, module: _Module, hooks: list[Callable[..., Any]], pre_hooks: list[Callable[..., Any]]) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs: tuple[Tensor | None, ...] | None = None
        self.n_inputs = 0
        self.input_index: list[int] | None = None  # positions of the tensor inputs that require grad, or None
        self.n_outputs = 0
        self.output_index: list[int] | None = None

    @staticmethod
    def _differentiable(args: Sequence[Any]) -> list[int]:
        return [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]

    def setup_input_hook(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        self.n_inputs = len(args)
        index = self._differentiable(args)
        if not index or not is_grad_enabled():
            return args
        self.input_index = index
        return self._replace(args, index, self._on_input_grads, True)

    def setup_output_hook(self, result: Any) -> Any:
        single = not isinstance(result, (tuple, list))
        outputs = (result,) if single else tuple(result)
        self.n_outputs = len(outputs)
        index = self._differentiable(outputs)
        if not index or not is_grad_enabled():
            if not any(isinstance(o, Tensor) for o in outputs):
                warnings.warn(f"{type(self.module).__name__} returned {type(result).__name__}; full backward "
                              f"hooks only fire for modules that return a Tensor or a tuple of Tensors",
                              UserWarning, stacklevel=3)
            return result
        self.output_index = index
        outputs = self._replace(outputs, index, self._on_output_grads, False)
        return outputs[0] if single else type(result)(outputs)

    @staticmethod
    def _replace(args: Sequence[Any], index: list[int], on_grads: Callable[[_Grads], _Grads],
                 materialize: bool) -> tuple[Any, ...]:
        passed = _through_gate([args[i] for i in index], on_grads, materialize)
        items = list(args)
        for i, t in zip(index, passed):
            items[i] = t
        return tuple(items)

    def _pack(self, index: list[int], grads: _Grads, n: int) -> tuple[Tensor | None, ...]:
        packed: list[Tensor | None] = [None] * n
        for i, g in zip(index, grads):
            packed[i] = _as_tensor(g)
        return tuple(packed)

    def _on_output_grads(self, grads: _Grads) -> _Grads:
        name = type(self.module).__name__
        assert self.output_index is not None  # this gate is only set up on outputs that require grad
        self.grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            out = hook(self.module, self.grad_outputs)
            if out is not None:
                self.grad_outputs = _check_tuple(out, len(self.grad_outputs), "grad_output", f"pre hook of {name}")
        grads = _unpack(self.grad_outputs, self.output_index, grads, f"pre hook of {name}")
        if self.input_index is None:
            warnings.warn(f"the full backward hook of {name} fires when the gradients with respect to its outputs "
                          f"are computed, because none of its inputs requires grad", UserWarning, stacklevel=2)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                out = hook(self.module, grad_inputs, self.grad_outputs)
                if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
                    raise RuntimeError(f"a backward hook of {name}, whose inputs do not require grad, returned "
                                       f"gradients; it must return None (or a tuple of None)")
            self.grad_outputs = None
        return grads

    def _on_input_grads(self, grads: _Grads) -> _Grads:
        if self.grad_outputs is None:
            # the gradient reached the inputs without passing through the outputs (as PyTorch: no call)
            return grads
        name = type(self.module).__name__
        assert self.input_index is not None  # this gate is only set up on inputs that require grad
        res = self._pack(self.input_index, grads, self.n_inputs)
        for hook in self.hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is not None:
                res = _check_tuple(out, len(res), "grad_input", f"backward hook of {name}")
        self.grad_outputs = None
        return _unpack(res, self.input_index, grads, f"backward hook of {name}")


def _check_tuple(out: Any, n: int, what: str, who: str) -> tuple[Any, ...]:
    if not isinstance(out, (tuple, list)):
        out = (out,)
    if len(out) != n:
        raise RuntimeError(f"the {who} returned {len(out)} {what} entries, expected {n} (one per "
                           f"{'input' if what == 'grad_input' else 'output'}, None where there is none)")
    return tuple(out)


def _unpack(values: Sequence[Any], index: list[int], like: _Grads, who: str) -> _Grads:
    """Arrays for the gate from a (possibly replaced) tuple of Tensors: one per differentiable tensor."""
    grads: _Grads = []
    for i, old in zip(index, like):
        v = values[i]
        if v is None:
            grads.append(None)
            continue
        arr = v._array if isinstance(v, Tensor) else np.asarray(v)
        if old is not None and arr.shape != old.shape:
            raise RuntimeError(f"the {who} returned a gradient of shape {arr.shape} for entry {i}, "
                               f"expected {old.shape}")
        grads.append(arr)
    return grads
