"""Optimizers with PyTorch's update rules: `SGD` (momentum, dampening, Nesterov, weight decay),
`Adam` and `AdamW`.

`step()` updates each parameter's array in place from its `.grad` (parameters without a gradient
are skipped); `zero_grad()` resets the gradients. Parameters may be given as an iterable of
Tensors or as parameter groups, `[{"params": [...], "lr": 0.1}, ...]`, as in PyTorch.
"""
from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

import numpy as np

from .autograd.grad_mode import enable_grad, no_grad
from .autograd.tensor import Tensor
from .nn.module import reset_grads

if TYPE_CHECKING:
    from numpy.typing import NDArray

ParamGroup = dict[str, Any]   # {"params": [Tensor, ...], "lr": ..., ...}
Params = Union[Iterable[Tensor], Iterable[ParamGroup]]


class Optimizer:
    """Base class: parameter groups, per-parameter state, zero_grad, state_dict."""

    def __init__(self, params: Params, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[ParamGroup] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a Tensor; pass [t] or model.parameters()")
        groups: list[Any] = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: ParamGroup) -> None:
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor (one computed from others); optimize the "
                                 "leaves it was computed from")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
            raise ValueError("some parameters appear more than once (in one group or in several groups)")
        new = {**self.defaults, **group, "params": params}
        self.param_groups.append(new)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to None (default) or to zeros in place."""
        for group in self.param_groups:
            reset_grads(group["params"], set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; `closure` re-evaluates the loss first."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, p.grad._array, self.state.setdefault(p, {}), group)
                        p._written()
        return loss

    def _update(self, p: Tensor, grad: NDArray[Any], state: dict[str, Any], group: ParamGroup) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: {name: array}}, "param_groups": [{..., "params": [indices]}]}, as PyTorch's."""
        index: dict[int, int] = {}
        groups: list[ParamGroup] = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: copy.deepcopy(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(groups)} parameter groups, the optimizer has "
                             f"{len(self.param_groups)}")
        params: dict[int, Tensor] = {}
        for mine, saved in zip(self.param_groups, groups):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError(f"loaded state dict contains a parameter group of {len(saved['params'])} "
                                 f"parameters, the optimizer's group has {len(mine['params'])}")
            params.update(zip(saved["params"], mine["params"]))
            mine.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, s in state_dict["state"].items():
            p = params[i]
            self.state[p] = {k: (np.array(v, dtype=p.dtype) if isinstance(v, np.ndarray) else v)
                             for k, v in copy.deepcopy(s).items()}

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"


def _check(name: str, value: float, low: float = 0.0) -> None:
    if not value >= low:
        raise ValueError(f"invalid {name}: {value!r}; it must be >= {low}")


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's rule:
    g += weight_decay * p; buf = momentum * buf + (1 - dampening) * g (buf = g at the first step);
    g = g + momentum * buf (nesterov) or buf; p -= lr * g."""

    def __init__(self, params: Params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False) -> None:
        _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum > 0 and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def _update(self, p: Tensor, grad: NDArray[Any], state: dict[str, Any], group: ParamGroup) -> None:
        g = -grad if group["maximize"] else grad
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p._array
        momentum = group["momentum"]
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = np.array(g, copy=True)
            else:
                buf *= momentum
                buf += (1 - group["dampening"]) * g
            g = g + momentum * buf if group["nesterov"] else buf
        p._array -= group["lr"] * g


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015), PyTorch's rule: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). weight_decay adds weight_decay * p
    to g (L2); AdamW decays p directly instead."""

    _decoupled = False

    def __init__(self, params: Params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"invalid beta parameter at index {i}: {b!r}; it must be in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))

    def _update(self, p: Tensor, grad: NDArray[Any], state: dict[str, Any], group: ParamGroup) -> None:
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        g = -grad if group["maximize"] else grad
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p._array)
            state["exp_avg_sq"] = np.zeros_like(p._array)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(p._array)
        state["step"] += 1
        if wd:
            if self._decoupled:
                p._array *= 1 - lr * wd
            else:
                g = g + wd * p._array
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += (1 - beta1) * (g - m)  # torch: exp_avg.lerp_(grad, 1 - beta1)
        v *= beta2
        v += (1 - beta2) * g * g
        if group["amsgrad"]:
            np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
            v = state["max_exp_avg_sq"]
        step = state["step"]
        step_size = lr / (1 - beta1 ** step)
        denom = np.sqrt(v) / math.sqrt(1 - beta2 ** step) + group["eps"]
        p._array -= step_size * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019): p *= 1 - lr * weight_decay."""

    _decoupled = True

    def __init__(self, params: Params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
