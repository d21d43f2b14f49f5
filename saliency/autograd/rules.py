"""Backward rules that change an op's VJP inside a `with` block: `relu_rule("guided")`.

Read by `Relu.backward` when the backward pass runs (not when the graph is recorded), so the
rule must be active around `backward()` / `autograd.grad()`. The rule is context-local (a
`contextvars.ContextVar`): it applies to the backward passes of the thread (or asyncio task)
that set it, so guided backprop in one thread leaves a plain gradient in another untouched.
A new thread starts with "gradient". The rule is restored on exit, also when the block raises.
"""
import contextvars

from .grad_mode import leave

# The rule Relu's VJP applies: "gradient" (the true VJP, g * [x > 0]) or "guided"
# (Springenberg et al. guided backprop: also zero the negative incoming gradients, relu(g) * [x > 0]).
relu_var = contextvars.ContextVar("saliency.relu_rule", default="gradient")

_RELU_RULES = ("gradient", "guided")


class relu_rule:
    """Inside the block, every ReLU VJP (sl.relu, Tensor.relu, nn.ReLU) follows `rule`.

    "gradient": the true VJP g * [x > 0]. "guided": relu(g) * [x > 0] (guided backprop).
    The nodes keep their names (ReluBackward0). Blocks nest, and one instance may be entered
    again while it is active (nested, or in several threads at once).
    """

    def __init__(self, rule):
        if rule not in _RELU_RULES:
            raise ValueError(f"relu_rule must be one of {', '.join(map(repr, _RELU_RULES))}, got {rule!r}")
        self.rule = rule
        self._tokens = []

    def __enter__(self):
        self._tokens.append(relu_var.set(self.rule))
        return self

    def __exit__(self, *exc):
        leave(relu_var, self._tokens)
        return False
