"""Backward passes whose ops follow rules instead of their VJPs, chosen at backward time from a context.

One mechanism serves guided backprop, layer-wise relevance propagation and DeepLift: the rule set
active in the calling context (`rules_var`, a `contextvars.ContextVar`) is read by the engine when
the backward pass runs (not when the graph is recorded). With none active every node runs its VJP.
A rule set decides, node by node, from the `rule` each op class declares beside its VJP and its
window rule: what kind of function the op is, for attribution.

    relu_rule("guided")   ReLU's VJP also zeroes negative incoming gradients (guided backprop)
    using(rule_set)        any rule set (saliency.autograd.relevance: LRP's, DeepLift's)

Rules that need what the forward pass saw (LRP's rules read every op's inputs and output) get it from
a `Recording`: inside `recording(model)`, every op that leaves a node keeps its input arrays, its
output and the name of the module that called it (for the rules given by module name, and for
errors that name where an op came from).

Contexts are context-local: they apply to the thread (or asyncio task) that set them, so guided
backprop in one thread leaves a plain gradient in another untouched, and are restored on exit,
also when the block raises.
"""
from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

from .grad_mode import leave

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .tensor import GradNode, Tensor

# the engine's own step for one node: vjp(node, grad, retain_graph) -> one gradient (or None) per input
Vjp = Callable[[Any, Any, bool], Any]


class RuleSet(Protocol):
    """What `using` takes: an object whose `vjp` decides each node's step of a backward pass."""

    def vjp(self, node: GradNode, grad: Any, retain_graph: bool, default: Vjp) -> Any: ...


# The rule set the engine applies (an object with `vjp(node, grad, retain_graph, default)`), or None
rules_var: contextvars.ContextVar[RuleSet | None] = contextvars.ContextVar("saliency.rules", default=None)
# The Recording that Function.apply and Module.__call__ report to, or None
record_var: contextvars.ContextVar[Recording | None] = contextvars.ContextVar("saliency.recording", default=None)


class Kind:
    """What an op is, for attribution rules: declared by each op class as its `rule` (a Kind, or a
    property giving one from the node, for ops whose kind depends on which inputs carry data)."""

    __slots__ = ("name", "doc")

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.doc = name, doc

    def __repr__(self) -> str:
        return f"rules.{self.name}"


PASS = Kind("PASS", "an elementwise function of one data input (activations, and adding or scaling by a "
                    "constant): LRP passes the relevance unchanged; DeepLift rescales (the multiplier "
                    "(f(x) - f(x0)) / (x - x0))")
SPLIT = Kind("SPLIT", "linear in its data inputs, which it sums (additions of two of them, sums, means, average "
                      "pooling, upsampling): LRP splits in proportion to each input's contribution (Zennit's "
                      "Norm); DeepLift: the VJP")
ROUTE = Kind("ROUTE", "moves values without arithmetic (reshape, permute, cat, pad, slice, pixel shuffle): "
                      "every rule routes by the VJP")
WINNER = Kind("WINNER", "selects one input per output (max pooling, max): LRP routes to the winner; DeepLift "
                        "splits the difference between the winners at x and at the baseline")
WEIGHTS = Kind("WEIGHTS", "a product of data with weights plus a bias (convolutions, linear layers): LRP's weight "
                          "rules (Epsilon, ZPlus, Gamma, ...); DeepLift: the VJP")
BATCHNORM = Kind("BATCHNORM", "batch norm with running statistics: LRP merges it into the WEIGHTS op it follows, or "
                              "passes through; DeepLift: the VJP (training mode has no rule)")
NONE = Kind("NONE", "no sound rule (softmax and layer norm inside the network, a product of two data-dependent "
                    "tensors): a rule-based pass raises RuleError unless a rule is given for it")
KINDS = (PASS, SPLIT, ROUTE, WINNER, WEIGHTS, BATCHNORM, NONE)


class RuleError(RuntimeError):
    """A rule-based method met an op it has no sound rule for; the message names the op and its module."""


def kind_of(node: GradNode) -> Kind:
    """The Kind a node declares (NONE for a Function that declares none, such as a user's own)."""
    kind = getattr(node, "rule", None)
    return kind if isinstance(kind, Kind) else NONE


class _Guided:
    """The rule set of guided backprop: every node runs its VJP; Relu's reads `guided()`."""

    def vjp(self, node: GradNode, grad: Any, retain_graph: bool, default: Vjp) -> Any:
        return default(node, grad, retain_graph)


GUIDED = _Guided()


def guided() -> bool:
    """True inside `relu_rule("guided")`: read by Relu's VJP."""
    return rules_var.get() is GUIDED


class using:
    """Inside the block, the backward passes of this context apply `rule_set` (None: plain VJPs).
    Blocks nest, and one instance may be entered again while it is active."""

    def __init__(self, rule_set: RuleSet | None) -> None:
        self.rule_set = rule_set
        self._tokens: list[contextvars.Token[RuleSet | None]] = []

    def __enter__(self) -> using:
        self._tokens.append(rules_var.set(self.rule_set))
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        leave(rules_var, self._tokens)
        return False


_RELU_RULES = ("gradient", "guided")


class relu_rule(using):
    """Inside the block, every ReLU VJP (sl.relu, Tensor.relu, nn.ReLU) follows `rule`.

    "gradient": the true VJP g * [x > 0]. "guided": relu(g) * [x > 0] (guided backprop).
    The nodes keep their names (ReluBackward0). Blocks nest, and one instance may be entered
    again while it is active (nested, or in several threads at once).
    """

    def __init__(self, rule: str) -> None:
        if rule not in _RELU_RULES:
            raise ValueError(f"relu_rule must be one of {', '.join(map(repr, _RELU_RULES))}, got {rule!r}")
        self.rule = rule
        super().__init__(GUIDED if rule == "guided" else None)


class Recording:
    """What the ops of one forward pass saw: for each node, (its input arrays, its output array, the
    innermost module that was running (None outside any), its keyword parameters). `module(node)`
    names that module as `model.named_modules()` does (a module that is not one of the model's is
    named by its class). When `source` is set (the input Tensor), every other leaf is a constant to
    the recorded ops, as a frozen parameter is: the ops' inputs that take gradients are then
    exactly those that depend on it."""

    __slots__ = ("model", "nodes", "stack", "source", "_names")

    model: Any
    # node -> (input arrays, output array, running module or None, keyword parameters)
    nodes: dict[GradNode, tuple[tuple[Any, ...], NDArray[Any], Any, dict[str, Any]]]
    stack: list[Any]
    source: Tensor | None
    _names: dict[int, str] | None

    def __init__(self, model: Any = None) -> None:
        self.model = model
        self.nodes = {}
        self.stack = []
        self.source = None
        self._names = None

    def keep(self, node: GradNode, arrays: list[Any], out: NDArray[Any], params: dict[str, Any]) -> None:
        self.nodes[node] = (tuple(arrays), out, self.stack[-1] if self.stack else None, params)

    def call(self, module: Any, run: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """run(*args, **kwargs) with `module` as the running module."""
        self.stack.append(module)
        try:
            return run(*args, **kwargs)
        finally:
            self.stack.pop()

    def module(self, node: GradNode) -> str | None:
        """The name of the module a node was recorded in ("" if none, None if not recorded)."""
        entry = self.nodes.get(node)
        if entry is None:
            return None
        module = entry[2]
        if module is None:
            return ""
        if self._names is None:  # made once, when a name is first asked for
            named = getattr(self.model, "named_modules", None)
            self._names = {id(m): name for name, m in named()} if callable(named) else {}
        return self._names.get(id(module), type(module).__name__)


class recording:
    """Inside the block, the ops of this context keep what rules need (a `Recording`, the block's
    value). `model`'s submodules are named as `model.named_modules()` names them."""

    def __init__(self, model: Any = None) -> None:
        self.record = Recording(model)
        self._tokens: list[contextvars.Token[Recording | None]] = []

    def __enter__(self) -> Recording:
        self._tokens.append(record_var.set(self.record))
        return self.record

    def __exit__(self, *exc: object) -> Literal[False]:
        leave(record_var, self._tokens)
        return False
