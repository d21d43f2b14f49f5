"""Containers: `Sequential` (modules applied in order), `ModuleList` (modules held in a list) and `ModuleDict`
(modules held under string keys)."""
from __future__ import annotations

import collections
import collections.abc
import operator
from typing import (TYPE_CHECKING, Any, ItemsView, Iterable, Iterator, KeysView, Mapping, SupportsIndex, ValuesView,
                    overload)

from ..autograd.rules import record_var
from .module import Module, _addindent

if TYPE_CHECKING:
    from typing import Self


class _Indexed(Module):
    """What Sequential and ModuleList share: children "0", "1", ... with list-like access."""

    def _index(self, idx: SupportsIndex) -> int:
        n = len(self._modules)
        try:
            i = operator.index(idx)
        except TypeError:
            raise TypeError(f"{type(self).__name__} indices must be integers or slices, "
                            f"not {type(idx).__name__}") from None
        if not -n <= i < n:
            raise IndexError(f"index {idx} is out of range for {type(self).__name__} of length {n}")
        return i % n

    @overload
    def __getitem__(self, idx: slice) -> Self: ...

    @overload
    def __getitem__(self, idx: SupportsIndex) -> Module: ...

    def __getitem__(self, idx: slice | SupportsIndex) -> Self | Module:
        if isinstance(idx, slice):  # Sequential takes the OrderedDict (ModuleList overrides this method)
            return type(self)(collections.OrderedDict(list(self._modules.items())[idx]))  # type: ignore[call-arg]
        return list(self._modules.values())[self._index(idx)]

    def __setitem__(self, idx: SupportsIndex, module: Module) -> None:
        key = list(self._modules)[self._index(idx)]
        self.add_module(key, module)

    def __delitem__(self, idx: SupportsIndex | slice) -> None:
        keys = list(self._modules)
        for key in keys[idx] if isinstance(idx, slice) else [keys[self._index(idx)]]:
            del self._modules[key]
        if all(k.isdigit() for k in keys):  # keep "0", "1", ... contiguous, as PyTorch does
            items = list(self._modules.values())
            self._modules.clear()
            self._modules.update((str(i), m) for i, m in enumerate(items))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Self:
        """Add `module` at the end, as the child str(len(self)); returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Self:
        """Append each module of `modules`, in order; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Self:
        """Insert `module` before position `index` (negative counts from the end), the children renumbered
        "0", "1", ...; returns self."""
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"index {index} is out of range for {type(self).__name__} of length {n}")
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self


class Sequential(_Indexed):
    """Applies its modules in order; `Sequential(a, b)` or `Sequential(OrderedDict(name=module))`.

    Children are named "0", "1", ... (so a state-dict key reads "0.weight"); indexing with an int
    gives a child, with a slice a new Sequential of the same child objects.

    Each module runs on its own, as in PyTorch, unless `saliency.nn.fuse` was called on this
    Sequential or on a model holding it: then the adjacent pairs it planned run as one op (an
    Upsample(nearest) followed by a plain 3x3 Conv2d with padding 1 runs as one sub-pixel
    convolution, `F.upsample_conv2d`: same result, 4/9 of the work, one UpsampleConvolutionBackward0
    node instead of two). A planned pair still runs as its two modules when either has hooks or
    they no longer fit the fusion; `saliency.nn.unfuse` forgets the plan. The zoo's models are
    fused when built; a Sequential you build yourself is not fused until you call `nn.fuse` on it.
    See `saliency.nn.fusion`.
    """

    # {index of the first module of a pair: fusion.PairFusion}, set by nn.fuse / nn.unfuse (Any: fusion imports
    # this module, so this one does not name its types)
    _fusion_plan: dict[int, Any] = {}

    @overload
    def __init__(self, *args: Module) -> None: ...

    @overload
    def __init__(self, arg: dict[str, Module], /) -> None: ...

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], dict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, x: Any) -> Any:
        """Run x through each module in order, each one's output the next one's input (a pair planned by
        `nn.fuse` as one op); returns the last module's output."""
        modules = list(self._modules.values())
        plan = self._fusion_plan
        i = 0
        while i < len(modules):
            fusion = plan.get(i) if plan else None
            # the plan is checked again: hooks added since nn.fuse, or a changed module, keep the pair apart
            if fusion is not None and i + 1 < len(modules) and fusion.applies(modules[i], modules[i + 1]):
                record = record_var.get()
                if record is None:
                    x = fusion.run(modules[i], modules[i + 1], x)
                else:  # the pair's ops are named after the module of the two that has weights
                    owner = modules[i] if any(True for _ in modules[i].parameters()) else modules[i + 1]
                    x = record.call(owner, fusion.run, modules[i], modules[i + 1], x)
                i += 2
            else:
                x = modules[i](x)
                i += 1
        return x


class ModuleList(_Indexed):
    """Holds modules in a list (registered as "0", "1", ...); it has no forward of its own."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """A ModuleList has no forward: raises NotImplementedError (call the modules it holds)."""
        raise NotImplementedError("ModuleList has no forward; call its modules yourself")

    @overload
    def __getitem__(self, idx: slice) -> Self: ...

    @overload
    def __getitem__(self, idx: SupportsIndex) -> Module: ...

    def __getitem__(self, idx: slice | SupportsIndex) -> Self | Module:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return super().__getitem__(idx)

    def __iadd__(self, modules: Iterable[Module]) -> Self:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        """A new ModuleList of these modules followed by `other`'s (the same module objects)."""
        return ModuleList(list(self) + list(other))

    def pop(self, key: SupportsIndex) -> Module:
        """Remove the module at index `key` (children renumbered "0", "1", ...) and return it."""
        module = self[key]
        del self[key]
        return module

    def __repr__(self) -> str:
        # runs of identical children print once, as "(0-2): 3 x Linear(...)", as in PyTorch
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks: list[list[Any]] = []
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2) for a, b, r in blocks]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """Holds modules under string keys, in insertion order, registered as children (a state-dict key reads
    "<key>.weight"); PyTorch's dict methods. It has no forward of its own."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """A ModuleDict has no forward: raises NotImplementedError (call the modules it holds)."""
        raise NotImplementedError("ModuleDict has no forward; call its modules yourself")

    def __getitem__(self, key: str) -> Module:
        if key not in self._modules:
            raise KeyError(key)
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove the module under `key` and return it."""
        module = self[key]
        del self[key]
        return module

    def keys(self) -> KeysView[str]:
        """The keys, in insertion order."""
        return self._modules.keys()

    def items(self) -> ItemsView[str, Module]:
        """(key, module) pairs, in insertion order."""
        return self._modules.items()

    def values(self) -> ValuesView[Module]:
        """The modules, in insertion order."""
        return self._modules.values()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add or replace modules from a mapping (ModuleDict, dict, OrderedDict) or an iterable of
        (key, module) pairs, in their order."""
        pairs: Iterable[Any]
        if isinstance(modules, (ModuleDict, collections.abc.Mapping)):
            pairs = modules.items()
        else:
            try:
                pairs = list(modules)
            except TypeError:
                raise TypeError(f"ModuleDict.update should be called with an iterable of key/value pairs, "
                                f"but got {type(modules).__name__}") from None
        for i, pair in enumerate(pairs):
            if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{i} should be a (key, module) pair, "
                                 f"got {pair!r}")
            self[pair[0]] = pair[1]
