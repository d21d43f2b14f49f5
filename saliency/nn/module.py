"""`Module`: the base class of layers and models, with PyTorch's registration, traversal and hooks.

Assigning a `Parameter` to an attribute registers it, assigning a `Module` registers a submodule,
and `register_buffer` registers a non-trained tensor (running statistics). Traversals visit them in
registration order with dotted names ("features.3.weight"), which are also the state-dict keys.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from ..autograd.grad_mode import no_grad
from ..autograd.rules import record_var
from ..autograd.tensor import Tensor, check_device, to_arguments
from .hooks import BackwardHook, RemovableHandle
from .parameter import Parameter
from .state import load_state_dict, state_dict

if TYPE_CHECKING:
    from typing import Self

    from numpy.typing import DTypeLike

    from .state import IncompatibleKeys


class Module:
    """Base class of every layer and model: subclasses set attributes in `__init__` and define `forward`."""

    training: bool

    def __init__(self) -> None:
        for name in ("_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks",
                     "_backward_hooks", "_backward_pre_hooks"):
            object.__setattr__(self, name, {})
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "training", True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """What the module computes from its inputs: every layer and model defines it (here it raises
        NotImplementedError), and each layer's class docstring says what its forward computes.

        Call the module, `module(x)`, rather than `forward`: the call runs the forward pre-hooks, then
        forward, then the forward hooks, and sets up the full backward hooks around it."""
        raise NotImplementedError(f'module [{type(self).__name__}] is missing the required "forward" function')

    # ---- calling ----------------------------------------------------------------------------
    def _has_hooks(self) -> bool:
        return bool(self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                    or self._backward_pre_hooks)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        record = record_var.get()  # a rule-based method's forward pass names the ops by their module
        if record is not None:
            return record.call(self, self._call, *args, **kwargs)
        return self._call(*args, **kwargs)

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        if not self._has_hooks():
            return self.forward(*args, **kwargs)
        for hook in list(self._forward_pre_hooks.values()):
            out = hook(self, args)
            if out is not None:
                args = out if isinstance(out, tuple) else (out,)
        bw = None
        if self._backward_hooks or self._backward_pre_hooks:
            bw = BackwardHook(self, list(self._backward_hooks.values()), list(self._backward_pre_hooks.values()))
            args = bw.setup_input_hook(args)
        result = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            out = hook(self, args, result)
            if out is not None:
                result = out
        if bw is not None:
            result = bw.setup_output_hook(result)
        return result

    def _add_hook(self, hooks: dict[int, Callable[..., Any]], hook: Callable[..., Any],
                  prepend: bool) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks_items = list(hooks.items())
            hooks.clear()
            hooks.update([hooks_items[-1]] + hooks_items[:-1])
        return handle

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, args)` before forward; it may return replacement args (a tuple or one value)."""
        return self._add_hook(self._forward_pre_hooks, hook, prepend)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, args, output)` after forward; it may return a replacement output."""
        return self._add_hook(self._forward_hooks, hook, prepend)

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_input, grad_output)` once the gradients with respect to the module's
        inputs are computed (tuples of Tensors, None for inputs that do not require grad; in a batched
        pass each carries the leading seed dimension). It may return a replacement grad_input tuple."""
        return self._add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable[..., Any],
                                        prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_output)` when the gradients with respect to the module's outputs are
        computed; it may return a replacement grad_output tuple."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend)

    # ---- registration -----------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                f"(a Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module {name!r} "
                                f"(a Module or None expected)")
            self._modules[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (a Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        self.__dict__.pop(name, None)
        for registry in (self._parameters, self._buffers, self._modules):
            registry.pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def _check_name(self, name: object, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{kind} name {name!r} must be non-empty and contain no '.'")
        if hasattr(self, name) and name not in getattr(self, f"_{kind}s" if kind != "module" else "_modules"):
            raise KeyError(f"attribute {name!r} already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register `param` (a Parameter, or None for an absent one such as a disabled bias) as `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameters before Module.__init__() call")
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter {name!r} (a Parameter or None "
                            f"expected); wrap it: nn.Parameter(t)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | np.ndarray | None, persistent: bool = True) -> None:
        """Register a tensor that is state but not trained (e.g. running statistics); persistent
        buffers are part of the state dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            if not isinstance(tensor, np.ndarray):
                raise TypeError(f"cannot assign {type(tensor).__name__} as buffer {name!r} (a Tensor, ndarray "
                                f"or None expected)")
            tensor = Tensor(tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register `module` (or None) as the child `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at a dotted path such as "features.3" ("" is the module itself)."""
        mod = self
        for item in target.split(".") if target else ():
            if item not in mod._modules or mod._modules[item] is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule {item!r} (looking up {target!r})")
            mod = mod._modules[item]
        return mod

    # ---- traversal --------------------------------------------------------------------------
    def named_modules(self, memo: set[Module] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module and every descendant, depth first, each once."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """Every module of the tree, this one first, depth first, each once (named_modules without names)."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) of each direct child, in registration order, each module once."""
        seen: set[Module] = set()
        for name, child in self._modules.items():
            if child is not None and child not in seen:
                seen.add(child)
                yield name, child

    def children(self) -> Iterator[Module]:
        """Each direct child module, in registration order (named_children without names)."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        modules: Iterable[tuple[str, Module]]
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, mod in modules:
            for name, value in getattr(mod, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) in registration order; a shared parameter appears once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every Parameter of this module and, with recurse, of its descendants, in registration order; a
        shared one once (named_parameters without names)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, Tensor) of every buffer (such as running statistics) of this module and, with
        recurse, of its descendants, in registration order; a shared one once."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every buffer Tensor, as named_buffers gives them, without names."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Callable[[Module], None]) -> Self:
        """Call fn(m) on every submodule, children first, then on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- mode, gradients, dtype ---------------------------------------------------------------
    def train(self, mode: bool = True) -> Self:
        """Set training mode (True) or evaluation mode (False) on this module and every descendant."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be a bool, got {mode!r}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Self:
        """Set evaluation mode on this module and every descendant: train(False); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Self:
        """Set requires_grad on every parameter (False freezes them); returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default) or to zeros in place."""
        reset_grads(self.parameters(), set_to_none)

    def to(self, *args: Any, dtype: DTypeLike | None = None, device: Any = None,
           non_blocking: bool = False) -> Self:
        """Cast every floating-point parameter, gradient and buffer to `dtype`, in place: the
        Parameter objects stay the same (so optimizers and hooks keep working). As PyTorch's
        to(dtype), to(device), to(device, dtype) or to(tensor); the CPU is the only device, and
        naming another one is an error."""
        dtype, _ = to_arguments(args, dtype, device)
        if dtype is None:
            return self
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"Module.to only accepts floating point dtypes, got {dtype}")
        with no_grad():
            for m in self.modules():
                for t in list(m._parameters.values()) + list(m._buffers.values()):
                    if t is not None and t._array.dtype.kind == "f" and t._array.dtype != dtype:
                        t._array = t._array.astype(dtype)
                        if t._grad is not None:
                            t._grad._array = t._grad._array.astype(dtype)
        return self

    def float(self) -> Self:
        """Cast the floating-point parameters and buffers to float32 in place: to(float32); returns self."""
        return self.to(np.float32)

    def double(self) -> Self:
        """Cast the floating-point parameters and buffers to float64 in place: to(float64); returns self."""
        return self.to(np.float64)

    def cpu(self) -> Self:
        """The module itself: every module is on the CPU."""
        return self

    def cuda(self, device: int | str | None = None) -> Self:
        """Raises UnsupportedError naming the device: saliency computes on the CPU only."""
        check_device("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)
        return self

    # ---- state -------------------------------------------------------------------------------
    def state_dict(self, *, prefix: str = "", keep_vars: bool = False) -> dict[str, Any]:
        """{dotted name: ndarray copy} of every parameter and persistent buffer, PyTorch's keys;
        with keep_vars=True the Parameters and buffer Tensors themselves."""
        return state_dict(self, prefix, keep_vars)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy arrays (or Tensors) into the parameters and buffers of the same names, in place.

        Size mismatches always raise; with strict=True missing and unexpected keys raise too, all in
        one RuntimeError. Returns (missing_keys, unexpected_keys) as a namedtuple."""
        return load_state_dict(self, state_dict, strict)

    # ---- printing ----------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in repr(); layers override it."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _addindent(text: str, spaces: int) -> str:
    first, *rest = text.split("\n")
    if not rest:
        return text
    return first + "\n" + "\n".join(" " * spaces + line for line in rest)


def reset_grads(params: Iterable[Tensor], set_to_none: bool = True) -> None:
    """Set each parameter's .grad to None, or fill it with zeros in place (Module and optimizers)."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad._array[...] = 0
            p.grad._written()
