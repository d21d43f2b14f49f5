"""Versions of arrays' memory, and values derived from arrays computed once per version.

A weight transform (Winograd's tiles of a 3x3 weight, a convolution's weight with a batch norm
folded in) depends only on the weight's values, which change rarely: between optimiser steps,
when a state dict is loaded, never while maps are computed. Computing it at every call is a pass
over the weight per layer and per map. `derived(name, fn, *arrays)` computes `fn(*arrays)` once
and returns the same value until one of the arrays is written in place or replaced:

    u = versions.derived("winograd", transform, w)   # computed at the first call only
    p.copy_(new_values)                               # p's memory: a new version
    u = versions.derived("winograd", transform, w)   # computed again

Like PyTorch's version counter (`Tensor._version`), the version belongs to the memory, not to one
array object: every in-place write the package makes (`Tensor.copy_`, `add_`, `t[...] = v`, `.data`
writes, `load_state_dict`, `nn.init`, the optimisers, batch norm's running statistics) calls
`bump(a)`, which moves the version of the whole array `a` views (its root: `a.base`, followed down),
so a write through one view is seen through every other. A replaced array (`t.data = other`,
`module.float()`) is a different key. `Tensor.numpy()` hands out the tensor's memory and counts as
a write, so `t.numpy()[0] = 1` is seen too. What cannot be seen: an array kept from `numpy()` (or
from `np.asarray(t)`) and written into after later calls; write through the tensor instead
(`t.data[0] = 1`, `t.copy_(v)`), or call `bump(a)` after such a write.

The derived values are kept while their arrays live, least recently used first out beyond
BUDGET_BYTES, and are read-only (a caller that changed one would change every later call's).
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Hashable

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

# Memory the derived values may hold at once; beyond it the least recently used go.
BUDGET_BYTES = 512 << 20

_lock = threading.Lock()
# id(root array) -> (weak reference to it, number of in-place writes). The reference tells a live
# array from a freed one whose id was reused, and its callback forgets the entry.
_versions: dict[int, tuple[weakref.ref[np.ndarray], int]] = {}
_values: OrderedDict[tuple, "_Entry"] = OrderedDict()   # key -> _Entry, least recently used first
_held = [0]   # bytes in _values
# Keys of values whose arrays were freed. Freeing happens anywhere (while _lock is held, too), so
# the weak references' callbacks only append here, and `derived` drops them under the lock.
_dead: list[tuple] = []


def _root(a: NDArray[Any]) -> NDArray[Any]:
    """The array whose memory `a` views (a itself when it owns its memory)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def bump(a: NDArray[Any] | None) -> None:
    """Record an in-place write to `a` (an array or None): the version of its memory goes up, and
    every value derived from it will be computed again."""
    if a is None:
        return
    root = _root(a)
    key = id(root)
    with _lock:
        entry = _versions.get(key)
        if entry is not None and entry[0]() is root:
            _versions[key] = (entry[0], entry[1] + 1)
        else:
            _versions[key] = (weakref.ref(root, lambda ref: _forget_version(key, ref)), 1)


def _forget_version(key: int, ref: weakref.ref[np.ndarray]) -> None:
    # a freed array's id can be reused only after this callback has run, so the entry is its own
    if _versions.get(key, (None,))[0] is ref:
        _versions.pop(key, None)


def _version_of_root(root: NDArray[Any]) -> int:
    entry = _versions.get(id(root))
    return entry[1] if entry is not None and entry[0]() is root else 0


def version(a: NDArray[Any]) -> int:
    """How many in-place writes the memory of `a` has had (0 for one never written in place)."""
    return _version_of_root(_root(a))


class _Entry:
    __slots__ = ("refs", "versions", "value", "nbytes")
    refs: tuple[weakref.ref[np.ndarray] | None, ...]
    versions: tuple[int, ...]
    value: Any
    nbytes: int


def _identity(a: NDArray[Any] | None) -> tuple[NDArray[Any] | None, tuple[Hashable, ...] | None]:
    """(root, where `a` sits in it) for an array, (None, None) for None."""
    if a is None:
        return None, None
    root = _root(a)
    where = (a.shape, a.strides, a.dtype.str) if root is a else (a.ctypes.data, a.shape, a.strides, a.dtype.str)
    return root, where


def _pop(key: tuple) -> _Entry | None:
    entry = _values.pop(key, None)
    if entry is not None:
        _held[0] -= entry.nbytes
    return entry


def _drop_dead() -> None:
    while _dead:
        _pop(_dead.pop())


def derived(name: str, fn: Callable[..., Any], *arrays: NDArray[Any] | None) -> Any:
    """fn(*arrays) (an array or a tuple of arrays), computed again only when one of `arrays` (each
    an array or None) is a different array or its memory has been written in place since the last
    call with the same `name`. The result is shared between calls: read-only."""
    ids = [_identity(a) for a in arrays]
    key = (name,) + tuple((None if root is None else id(root), where) for root, where in ids)
    now = tuple(0 if root is None else _version_of_root(root) for root, _ in ids)
    with _lock:
        _drop_dead()
        entry = _values.get(key)
        if entry is not None and entry.versions == now and all(
                (r is None) == (root is None) and (r is None or r() is root) for r, (root, _) in zip(entry.refs, ids)):
            _values.move_to_end(key)
            return entry.value
    value = fn(*arrays)
    parts = value if isinstance(value, tuple) else (value,)
    for v in parts:
        if any(root is not None and _root(v) is root for root, _ in ids):
            raise ValueError(f"derived value {name!r} shares memory with its input; it must be a new array")
        v.flags.writeable = False
    entry = _Entry()
    entry.refs = tuple(None if root is None else weakref.ref(root, lambda _: _dead.append(key))
                       for root, _ in ids)
    entry.versions, entry.value = now, value
    entry.nbytes = sum(v.nbytes for v in parts)
    dropped = []   # freed after the lock is released
    with _lock:
        _drop_dead()
        dropped.append(_pop(key))
        if entry.nbytes <= BUDGET_BYTES:
            _values[key] = entry
            _held[0] += entry.nbytes
            while _held[0] > BUDGET_BYTES:
                dropped.append(_pop(next(iter(_values))))
    return value


def held_bytes() -> int:
    """Bytes the derived values hold now."""
    with _lock:
        _drop_dead()
        return _held[0]


def clear() -> None:
    """Forget every derived value (they are computed again at their next use)."""
    with _lock:
        entries = list(_values.values())   # freed after the lock is released
        _values.clear()
        _held[0] = 0
        _dead.clear()
    del entries
