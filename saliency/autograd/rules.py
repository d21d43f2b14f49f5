"""Backward rules that change an op's VJP inside a `with` block: `relu_rule("guided")`.

Read by `Relu.backward` when the backward pass runs (not when the graph is recorded), so the
rule must be active around `backward()` / `autograd.grad()`. A module-level setting: not
thread-safe, restored on exit (also when the block raises).
"""

# The rule Relu's VJP applies: "gradient" (the true VJP, g * [x > 0]) or "guided"
# (Springenberg et al. guided backprop: also zero the negative incoming gradients, relu(g) * [x > 0]).
relu = "gradient"

_RELU_RULES = ("gradient", "guided")


class relu_rule:
    """Inside the block, every ReLU VJP (sl.relu, Tensor.relu, nn.ReLU) follows `rule`.

    "gradient": the true VJP g * [x > 0]. "guided": relu(g) * [x > 0] (guided backprop).
    The nodes keep their names (ReluBackward0).
    """

    def __init__(self, rule):
        if rule not in _RELU_RULES:
            raise ValueError(f"relu_rule must be one of {', '.join(map(repr, _RELU_RULES))}, got {rule!r}")
        self.rule = rule
        self.prev = None

    def __enter__(self):
        global relu
        self.prev = relu
        relu = self.rule
        return self

    def __exit__(self, *exc):
        global relu
        relu = self.prev
        return False
