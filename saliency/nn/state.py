"""State dicts: a module's parameters and persistent buffers under PyTorch's dotted key names."""
from __future__ import annotations

import collections
import collections.abc
from typing import Any, Mapping

import numpy as np

from ..autograd.grad_mode import no_grad
from ..autograd.tensor import Tensor

# the functions take a Module, which they do not name: module.py imports this one
_Module = Any


class IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict(strict=False)` could not match, as PyTorch's `_IncompatibleKeys`."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _local_state(module: _Module) -> list[tuple[str, Tensor]]:
    """This module's own (name, tensor) pairs that belong in a state dict, in registration order."""
    items = [(n, p) for n, p in module._parameters.items() if p is not None]
    items += [(n, b) for n, b in module._buffers.items()
              if b is not None and n not in module._non_persistent_buffers]
    return items


def state_dict(module: _Module, prefix: str = "", keep_vars: bool = False) -> dict[str, Any]:
    """Module by module, depth first: own parameters, own buffers, then children (PyTorch's order).
    A parameter shared by two modules appears under both names, as in PyTorch."""
    out: dict[str, Any] = {}
    stack = [(prefix, module)]
    while stack:
        pre, mod = stack.pop()
        for name, t in _local_state(mod):
            out[pre + name] = t if keep_vars else np.array(t._array, copy=True)
        stack.extend(reversed([(pre + name + ".", child) for name, child in mod._modules.items()
                               if child is not None]))
    return out


def _as_array(value: Any, key: str, target: np.ndarray) -> np.ndarray:
    """`value` as an ndarray for `target`; TypeError for anything but numbers, and for integer or bool
    values meant for a floating-point tensor (weights stored as integers are a mistake, not data)."""
    if isinstance(value, Tensor):
        arr = value._array
    elif hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor, if one slips through
        arr = value.detach().cpu().numpy()
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"state_dict[{key!r}] is {type(value).__name__}, not an array or Tensor: {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"state_dict[{key!r}] has dtype {arr.dtype}; expected a numeric array or Tensor")
    if arr.dtype.kind in "biu" and target.dtype.kind == "f":
        raise TypeError(f"state_dict[{key!r}] has dtype {arr.dtype} but the model's {key} is {target.dtype}; "
                        f"integer weights are refused (convert them to float if they are meant as values)")
    return arr


def load_state_dict(module: _Module, state: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
    if not isinstance(state, collections.abc.Mapping):
        raise TypeError(f"expected a mapping from key to array for state_dict, got {type(state).__name__}")
    odd = next((k for k in state if not isinstance(k, str)), None)
    if odd is not None:
        raise TypeError(f"state_dict keys must be strings, got {type(odd).__name__} {odd!r}")
    missing: list[str] = []
    unexpected: list[str] = []
    errors: list[str] = []
    stack = [("", module)]
    with no_grad():
        while stack:
            prefix, mod = stack.pop()
            local = dict(_local_state(mod))
            for name, target in local.items():
                key = prefix + name
                if key not in state:
                    missing.append(key)
                    continue
                value = _as_array(state[key], key, target._array)
                if value.shape != target._array.shape:
                    errors.append(f"size mismatch for {key}: copying a param with shape {value.shape} from "
                                  f"checkpoint, the shape in current model is {target._array.shape}.")
                    continue
                _copy_into(target, value)
            for key in state:
                if key.startswith(prefix):
                    head, *rest = key[len(prefix):].split(".", 1)
                    if (rest and head not in mod._modules) or (not rest and head not in local):
                        unexpected.append(key)
            stack.extend(reversed([(prefix + name + ".", child) for name, child in mod._modules.items()
                                   if child is not None]))
    if strict:
        if unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if missing:
            errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(module).__name__}:\n\t" + "\n\t".join(errors))
    return IncompatibleKeys(missing, unexpected)


def _copy_into(target: Tensor, value: np.ndarray) -> None:
    """Copy `value` into `target`'s array in place (cast to its dtype), keeping the Tensor object."""
    if target._array.flags.writeable:
        target._array[...] = value
        target._written()
    else:
        target._array = np.array(value, dtype=target._array.dtype)
