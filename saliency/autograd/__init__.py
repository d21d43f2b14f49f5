"""The autograd engine: Tensor, graph nodes, the backward pass, and tools that show its work."""
from . import api  # sets the op methods on Tensor
from .backward import backward, grad
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, jacobian
from .node import Function, unbroadcast
from .rules import relu_rule
from .tensor import AccumulateGrad, Tensor
from .trace import Trace, render_graph, trace

__all__ = ["AccumulateGrad", "Function", "GradcheckError", "Tensor", "Trace", "backward", "enable_grad", "grad",
           "gradcheck", "is_grad_enabled", "jacobian", "no_grad", "relu_rule", "render_graph", "set_grad_enabled",
           "trace", "unbroadcast"]
