"""Rule-based backward passes on the engine's own ops: layer-wise relevance propagation and DeepLift.

Each op class declares its `rule` (a `rules.Kind`) beside its VJP and window rule; the rule sets here
read it, node by node, when the backward pass runs (`rules.using(rule_set)`), so functional code,
residual additions, concatenations, reused modules and upsampling decoders are covered the same way
as layer modules. Both need what the forward pass saw: run it inside `rules.recording(model)`.

LRP (`Relevance`): the gradient that flows is the relevance itself, and the pass starts from v * y.
Ops with weights take a rule object (`Epsilon`, `ZPlus`, `AlphaBeta`, `Gamma`, `ZBox`, `Flat`,
`WSquare`, with Zennit's formulas and stabiliser, z + eps * sign(z) with sign(0) = +1); linear ops
split in proportion to their inputs' contributions (`Norm`), elementwise activations pass the
relevance on (`Pass`), routing and max-selection ops route it by their VJP, and a batch norm after a
weights op is merged into it (as Zennit's canonizer does). Local seeds stay cropped windows.

DeepLift (`Rescale`): the gradient that flows is the multiplier, on a batch holding x and its
baseline (rows :N and N:); elementwise nonlinearities use (f(x) - f(x0)) / (x - x0) (their own
derivative where |x - x0| < eps), max-selection ops split f(x) - f(x0) between the winners at x
and at the baseline, and linear ops keep their VJP.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Union

import numpy as np

from ..kernels import versions
from ..kernels.relevance import stabilized_reciprocal, value_range
from . import rules
from .engine import _count_dependencies
from .patch import Patch
from .tensor import AccumulateGrad
from .rules import BATCHNORM, NONE, PASS, ROUTE, SPLIT, WEIGHTS, WINNER, RuleError, kind_of

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .._typing import Float64
    from .rules import Kind, Recording, Vjp
    from .tensor import GradNode

    # what flows backward: a relevance or multiplier with leading seed dimensions (an array), or a Patch of
    # windows of one; Any, as the `type(g) is Patch` tests that tell them apart do not narrow a union
    Grad = Any
    # a weight rule's modification of the weight, fn(w) (Layer.weight, Layer.parts)
    WeightFn = Callable[[NDArray[Any]], NDArray[Any]]
    # one of Layer.parts: (input, modified weight, channels of x when two stacked halves are summed, else None)
    Part = tuple[NDArray[Any], NDArray[Any], Union[int, None]]

    # choose(kind, node, module, first) -> the node's Rule, or None for the kind's default (see Relevance)
    Choose = Callable[[Kind, GradNode, Callable[..., str | None], bool], "Rule | None"]


def _times(g: Grad, a: NDArray[Any]) -> Grad:
    """g (an array with leading seed dimensions, or a Patch) times `a` (an array of g's shape without
    them)."""
    return g.times(a) if type(g) is Patch else g * a


def _add(a: Grad | None, b: Grad | None) -> Grad | None:
    return b if a is None else a if b is None else a + b


def _per_image(g: Grad, seed_ndim: int) -> Float64:
    """The sums of g (dense or Patch) over everything but its seed and batch dimensions: (seeds..., N)."""
    if type(g) is Patch:
        d = g.data
        return _sums(d.reshape(d.shape[:2] + (-1,))).reshape(g.seed_shape + d.shape[1:2])
    return _sums(g.reshape(g.shape[:seed_ndim + 1] + (-1,)))


def _sums(a: NDArray[Any]) -> Float64:
    """a summed over its last axis, in float64 (NumPy's pairwise sum in a's dtype, then widened: a
    float32 sum with dtype=float64 goes through a slow casting loop)."""
    return a.sum(axis=-1).astype(np.float64) if a.dtype == np.float32 else a.sum(axis=-1)


def _bias_total(s: Grad, b: ArrayLike | None, seed_ndim: int) -> Float64 | float:
    """sum(s * b) per seed and image for s of an output (N, O, ...) and b of shape (O,)."""
    if b is None:
        return 0.0
    b = np.asarray(b, np.float64)
    if type(s) is Patch:
        d = s.data
        per = _sums(d.reshape(d.shape[:3] + (-1,))) @ b
        return per.reshape(s.seed_shape + d.shape[1:2])
    return _sums(s.reshape(s.shape[:seed_ndim + 2] + (-1,))) @ b


def _passes_to(node: GradNode, record: Recording) -> int | None:
    """The input of `node` that Pass gives the relevance to: its one data input, or among several, the one
    of the output's shape (None if that is not one input)."""
    shapes = [a.shape if hasattr(a, "shape") else () for a in record.nodes[node][0]]
    data = [i for i, n in enumerate(node.needs_input_grad) if n]
    if len(data) > 1:
        data = [i for i in data if shapes[i] == node.out_shape]
    return data[0] if len(data) == 1 and shapes[data[0]] == node.out_shape else None


def _data_index(node: GradNode) -> int | None:
    needs = node.needs_input_grad
    data = [i for i, n in enumerate(needs) if n]
    return data[0] if len(data) == 1 else None


def _slots(node: GradNode, index: int, value: Grad | None) -> tuple[Grad | None, ...]:
    """One entry per input: `value` at `index`, None elsewhere."""
    out: list[Grad | None] = [None] * len(node.needs_input_grad)
    out[index] = value
    return tuple(out)


def _free(node: GradNode, retain_graph: bool) -> None:
    if not retain_graph and node.saved:
        node.saved = None


# ---------------------------------------------------------------------------------------------------
# The rules of LRP: public objects, with Zennit's names, parameters and formulas


class Rule:
    """A relevance rule. Weight rules (`weights = True`) apply to ops with weights (convolutions,
    linear layers); `Norm` and `Pass` to any op."""

    weights = True

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        """`layer` (a `Layer`: the op's input x, weight w, bias b, output z, relevance r) -> (the
        relevance of x, the relevance the bias absorbed per seed and image)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Layer:
    """What a weight rule works on: the data input x, the weight w and bias b (None: none) as the op
    used them (a following batch norm merged in), the output z, the relevance r arriving at the output
    (an array with seed dimensions, or a Patch), and the op (its `affine` and `affine_vjp`)."""

    op: GradNode
    x: np.ndarray
    w: np.ndarray
    b: np.ndarray | None
    z: np.ndarray
    r: Any  # an array, or a Patch
    seed_ndim: int
    dropped: list[Float64]  # per seed and image, the relevance at outputs the rule gives no share to (see `over`)

    def forward(self, x: NDArray[Any], w: NDArray[Any], b: ArrayLike | None = None) -> NDArray[Any]:
        """The op on x, w (and b): its output where the relevance may be non-zero (the windows of a
        Patch, when the op computes windows: one more dimension than z), else the whole output."""
        r = self.r
        if type(r) is Patch and hasattr(self.op, "affine_window"):
            z = self.op.affine_window(r, x, w)
            if z is not None:
                return z if b is None else z + self.channels(b)
        return self.op.affine(x, w, b)

    def channels(self, b: ArrayLike) -> NDArray[Any]:
        """b (one value per output channel) shaped to broadcast over z (or its windows)."""
        return np.asarray(b, self.z.dtype).reshape((-1,) + (1,) * (self.z.ndim - 2))

    def vjp(self, s: Grad, w: NDArray[Any]) -> Grad:
        """The op's VJP for the weight w: s (at the output) back to its data input."""
        return self.op.affine_vjp(s, w)

    def parts(self, *items: tuple[NDArray[Any] | None, str, WeightFn]) -> list[Part]:
        """[(input, modified weight, channels)] of (input, name, fn) items whose input is not None (absent:
        a part of x that is zero everywhere), each weight `weight(name, fn)`: only the weights used are
        made. Two items on an op that `stacks` become one, inputs and weights with their channels side
        by side (one product instead of two; `channels` is then x's, where the halves are summed)."""
        present = [(x, name, fn) for x, name, fn in items if x is not None]
        if len(present) == 2 and getattr(self.op, "stacks", False):
            (x1, n1, f1), (x2, n2, f2) = present
            w = self.weight(f"{n1}|{n2}", lambda w: np.concatenate([f1(w), f2(w)], axis=1))
            return [(np.concatenate([x1, x2], axis=1), w, x1.shape[1])]
        return [(xm, self.weight(name, fn), None) for xm, name, fn in present]

    def weight(self, name: str, fn: WeightFn) -> NDArray[Any]:
        """fn(w), computed once per version of the weight (a parameter's, or its batch-norm merge,
        itself kept while the arrays it is made of are unchanged): Winograd's weight tiles of the
        result are then kept too."""
        return versions.derived("lrp." + name, fn, self.w)

    def over(self, z: NDArray[Any], epsilon: float, mask: NDArray[Any] | None = None, share: float = 1.0) -> Grad:
        """r / (z + epsilon * sign(z)) (sign(0) = +1; times `mask`), dense or cropped as r is. Where z is exactly 0 the
        stabiliser makes the quotient finite but no input has a share of it: `share` times that
        relevance is counted in `dropped`."""
        r = self.r
        windows = type(r) is Patch
        if windows and z.ndim != r.data.ndim:  # a whole output: only r's windows of it are read
            z = r.window(z)
        scale, some_zero = stabilized_reciprocal(z, epsilon)
        if mask is not None:
            if windows:
                mask = r.window(mask)
            scale *= mask
        if some_zero:  # some output exactly 0
            zero = (z == 0) if mask is None else (z == 0) & (mask != 0)
            if zero.any():
                part = r.like_data(r.data * zero) if windows else _times(r, zero.astype(z.dtype))
                self.dropped.append(share * _per_image(part, self.seed_ndim))
        return r.like_data(r.data * scale) if windows else _times(r, scale)

    def bias(self, s: Grad, b: ArrayLike | None) -> Float64 | float:
        """sum(s * b) per seed and image (0.0 without a bias): the relevance the bias absorbed."""
        return _bias_total(s, b, self.seed_ndim)


def _positive(w: NDArray[Any]) -> NDArray[Any]:
    return np.maximum(w, 0)


def _negative(w: NDArray[Any]) -> NDArray[Any]:
    return np.minimum(w, 0)


def _split(x: NDArray[Any]) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
    """(x+, x-) with None for a part that is zero everywhere (x itself where it has one sign: the
    input of a layer after a ReLU is its own positive part)."""
    lo, hi = value_range(x)
    pos = None if hi <= 0 else x if lo >= 0 else np.maximum(x, 0)
    neg = None if lo >= 0 else x if hi <= 0 else np.minimum(x, 0)
    return pos, neg


def _weighted(layer: Layer, s: Grad, parts: list[Part]) -> Grad | None:
    """sum over the parts (Layer.parts) of input * vjp(s, weight), stacked halves summed."""
    out: Grad | None = None
    for xm, wm, channels in parts:
        r = _times(layer.vjp(s, wm), xm)
        out = _add(out, r if channels is None else _halves(r, channels, layer.seed_ndim))
    return out


def _halves(r: Grad, c: int, seed_ndim: int) -> Grad:
    """The two halves of r's channels (c each) summed: r of stacked inputs back to x's channels."""
    if type(r) is Patch:
        return r.like_data(r.data[:, :, :c] + r.data[:, :, c:])
    lead = (slice(None),) * (seed_ndim + 1)
    return r[lead + (slice(0, c),)] + r[lead + (slice(c, None),)]


def _affine_sum(layer: Layer, parts: list[Part], b: NDArray[Any] | None) -> NDArray[Any]:
    """sum over the parts (Layer.parts) of forward(input, weight), plus b per output channel."""
    out: NDArray[Any] | None = None
    for xm, wm, _ in parts:
        z = layer.forward(xm, wm)  # a new array: summed into in place
        if out is None:
            out = z
        else:
            out += z
    if out is None:
        out = np.zeros_like(layer.z)
    if b is not None:
        out += layer.channels(b)
    return out


@dataclass(frozen=True)
class Epsilon(Rule):
    """R_i = x_i sum_k w_ik R_k / stab(z_k), z the layer's output (LRP-epsilon)."""

    epsilon: float = 1e-6
    zero_bias: bool = False

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        b = None if self.zero_bias else layer.b
        z = layer.z if b is layer.b or layer.b is None else layer.forward(layer.x, layer.w, None)
        s = layer.over(z, self.epsilon)
        return _times(layer.vjp(s, layer.w), layer.x), layer.bias(s, b)


@dataclass(frozen=True)
class ZPlus(Rule):
    """Positive contributions only: R_i = x+_i (w+ s)_i + x-_i (w- s)_i with s = R / stab(x+ w+ + x- w- +
    b+) (LRP-z+, Zennit's; the bias's negative part and the x- term's bias are dropped)."""

    stabilizer: float = 1e-6
    zero_bias: bool = False

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        pos, neg = _split(layer.x)
        b = None if self.zero_bias or layer.b is None else np.maximum(layer.b, 0)
        parts = layer.parts((pos, "plus", _positive), (neg, "minus", _negative))
        s = layer.over(_affine_sum(layer, parts, b), self.stabilizer)
        return _weighted(layer, s, parts), layer.bias(s, b)


@dataclass(frozen=True)
class AlphaBeta(Rule):
    """alpha times the positive contributions' share minus beta times the negative ones' (alpha - beta
    = 1): Zennit's AlphaBeta, its biases b+ and b- on the x+ terms."""

    alpha: float = 2.0
    beta: float = 1.0
    stabilizer: float = 1e-6
    zero_bias: bool = False

    def __post_init__(self) -> None:
        if self.alpha < 0 or self.beta < 0 or self.alpha - self.beta != 1:
            raise ValueError(f"AlphaBeta needs alpha >= 0, beta >= 0 and alpha - beta = 1, got alpha={self.alpha}, "
                             f"beta={self.beta}")

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        pos, neg = _split(layer.x)
        bp = bn = None
        if not self.zero_bias and layer.b is not None:
            bp, bn = np.maximum(layer.b, 0), np.minimum(layer.b, 0)
        up = layer.parts((pos, "plus", _positive), (neg, "minus", _negative))
        down = layer.parts((pos, "minus", _negative), (neg, "plus", _positive))
        s_up = layer.over(_affine_sum(layer, up, bp), self.stabilizer, share=self.alpha)
        s_down = layer.over(_affine_sum(layer, down, bn), self.stabilizer, share=-self.beta)
        r = _add(_scaled(_weighted(layer, s_up, up), self.alpha), _scaled(_weighted(layer, s_down, down), -self.beta))
        return r, self.alpha * layer.bias(s_up, bp) - self.beta * layer.bias(s_down, bn)


def _scaled(g: Grad | None, c: float) -> Grad | None:
    if g is None or c == 1:
        return g
    return Patch(g.data * c, g.origins, g.map_size, g.seed_shape) if type(g) is Patch else g * c


@dataclass(frozen=True)
class Gamma(Rule):
    """Positive contributions boosted by gamma: weights w + gamma w+ for outputs z > 0 and w + gamma w-
    for z < 0 (Zennit's generalised Gamma: inputs split by sign, biases b + gamma b+- on the x+ terms;
    outputs exactly 0 pass nothing)."""

    gamma: float = 0.25
    stabilizer: float = 1e-6
    zero_bias: bool = False

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        g = self.gamma
        pos, neg = _split(layer.x)
        b_up = b_down = None
        if not self.zero_bias and layer.b is not None:
            b_up, b_down = layer.b + g * np.maximum(layer.b, 0), layer.b + g * np.minimum(layer.b, 0)
        boost = (f"gamma+{g!r}", lambda w: w + g * np.maximum(w, 0))
        damp = (f"gamma-{g!r}", lambda w: w + g * np.minimum(w, 0))
        up = layer.parts((pos,) + boost, (neg,) + damp)
        down = layer.parts((pos,) + damp, (neg,) + boost)
        z = layer.z
        if (z == 0).any():  # outputs exactly 0 pass nothing on
            layer.dropped.append(_per_image(_times(layer.r, (z == 0).astype(z.dtype)), layer.seed_ndim))
        s_up = layer.over(_affine_sum(layer, up, b_up), self.stabilizer, (z > 0).astype(z.dtype))
        s_down = layer.over(_affine_sum(layer, down, b_down), self.stabilizer, (z < 0).astype(z.dtype))
        r = _add(_weighted(layer, s_up, up), _weighted(layer, s_down, down))
        return r, layer.bias(s_up, b_up) + layer.bias(s_down, b_down)


@dataclass(frozen=True)
class ZBox(Rule):
    """For an input bounded by [low, high] (an image): R_i = x_i (w s)_i - low_i (w+ s)_i - high_i (w- s)_i,
    s = R / stab(x w - low w+ - high w-) (LRP-z^B; the biases cancel)."""

    low: object = 0.0
    high: object = 1.0
    stabilizer: float = 1e-6
    zero_bias: bool = False

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        x = layer.x
        low = np.ascontiguousarray(np.broadcast_to(np.asarray(self.low, x.dtype), x.shape))
        high = np.ascontiguousarray(np.broadcast_to(np.asarray(self.high, x.dtype), x.shape))
        wp, wn = layer.weight("plus", _positive), layer.weight("minus", _negative)
        z = layer.forward(x, layer.w) - layer.forward(low, wp) - layer.forward(high, wn)
        s = layer.over(z, self.stabilizer)
        r = _add(_times(layer.vjp(s, layer.w), x), _scaled(_add(_times(layer.vjp(s, wp), low),
                                                                _times(layer.vjp(s, wn), high)), -1))
        return r, 0.0


@dataclass(frozen=True)
class Flat(Rule):
    """Every input of an output's window gets an equal share: R_i = sum_k R_k / stab(n_k), n_k the
    number of (non-padding) inputs output k reads (the bias is not counted)."""

    stabilizer: float = 1e-6
    zero_bias: bool = False

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        ones_w = layer.weight("ones", np.ones_like)
        s = layer.over(layer.forward(np.ones_like(layer.x), ones_w), self.stabilizer)
        return layer.vjp(s, ones_w), 0.0


@dataclass(frozen=True)
class WSquare(Rule):
    """Shares by squared weights: R_i = sum_k w_ik^2 R_k / stab(sum_i' w_i'k^2 + b_k^2) (Zennit squares the
    bias too, unless it is zeroed)."""

    stabilizer: float = 1e-6
    zero_bias: bool = False

    def __call__(self, layer: Layer) -> tuple[Any, Any]:
        w2 = layer.weight("square", np.square)
        b2 = None if self.zero_bias or layer.b is None else np.square(layer.b)
        s = layer.over(layer.forward(np.ones_like(layer.x), w2, b2), self.stabilizer)
        return layer.vjp(s, w2), layer.bias(s, b2)


@dataclass(frozen=True)
class Norm(Rule):
    """For any op linear in its inputs: R_i = x_i (J^T (R / stab(y)))_i, each input's share of the output
    (sums, means, average pooling, upsampling; on an op with weights it equals Epsilon)."""

    stabilizer: float = 1e-6
    weights = False


@dataclass(frozen=True)
class Pass(Rule):
    """The relevance at the output is the relevance at the input: of an elementwise op's one data input,
    or, where two data inputs meet (a gate x * sigmoid(g(x)), a squeeze-and-excitation block's scaling),
    of the one with the output's shape, the other taken as a constant weight (LRP's usual rule for
    gates: the relevance follows the signal)."""

    weights = False


# ---------------------------------------------------------------------------------------------------
# The LRP pass


def _walk(root: GradNode) -> tuple[list[GradNode], dict[GradNode, int]]:
    """Every node reachable from `root` (graph nodes and leaf accumulators), parents before children,
    and each node's number of consumers."""
    consumers = _count_dependencies([root])
    order, left, ready = [], dict(consumers), [root]
    while ready:
        node = ready.pop()
        order.append(node)
        for child, _ in getattr(node, "next_functions", ()):
            if child is None:
                continue
            left[child] -= 1
            if left[child] == 0:
                ready.append(child)
    return order, consumers


def describe(node: GradNode, record: Recording | None) -> str:
    """'Softmax (SoftmaxBackward0) in module classifier.2' for messages."""
    module = record.module(node) if record is not None else None
    where = f" in module {module!r}" if module else " (outside any module)" if module == "" else ""
    return f"{type(node).__name__} ({node.name()}){where}"


def _why_none(node: GradNode) -> str:
    """Why an op of kind NONE has no rule, for messages."""
    if not isinstance(getattr(node, "rule", None), rules.Kind):
        return f"{type(node).__name__} declares no attribution rule"
    return "no rule is sound for it (its output is not a sum of contributions of its inputs)"


def _give_one(node: GradNode, record: Recording | None) -> str:
    """How to give an op a rule, naming its module and its class."""
    module = record.module(node) if record is not None else None
    by = f"rules={{{module!r}: Pass()}} for this one, or " if module else ""
    return (f"give it one with {by}rules={{{type(node).__name__!r}: ...}} for every {type(node).__name__} (Pass() "
            f"or Norm()), or attribute an output before it")


class Relevance:
    """The LRP rule set of one backward pass from `root` over a graph recorded in `record`.

    `choose(kind, node, module, first)` gives each node's rule (a Rule, or None for the kind's default:
    `module()` gives the name of the module the node came from;
    Pass for PASS and BATCHNORM, Norm for SPLIT, the VJP for ROUTE and WINNER; WEIGHTS and NONE need
    one); `first` is True for the weights ops that see the input (no weights op between them and it).
    The plan is made, and every op checked, before anything runs: an op without a rule raises
    RuleError naming it. `bias` sums, per seed and image, the relevance the biases (and constant
    inputs) absorbed; `dropped` the relevance that reached outputs a rule gives no share to (ZPlus's
    outputs without positive contributions, Gamma's outputs exactly 0, ...).
    """

    def __init__(self, root: GradNode, record: Recording, choose: Choose, seed_ndim: int = 0) -> None:
        self.record, self.seed_ndim = record, seed_ndim
        self.bias: Float64 | float = 0.0
        self.dropped: Float64 | float = 0.0
        self.plan: dict[GradNode, Rule | None] = {}  # node -> its rule (None: its kind's default)
        self.merge: dict[GradNode, GradNode] = {}  # weights op -> the batch norm after it, merged into it
        order, consumers = _walk(root)
        below: dict[GradNode, bool] = {}  # node -> whether a weights op lies between it and the leaves
        for node in reversed(order):
            below[node] = any(c is not None and (kind_of(c) is WEIGHTS or below.get(c, False))
                              for c, _ in getattr(node, "next_functions", ()))
        for node in order:
            if type(node) is AccumulateGrad:
                continue
            kind = kind_of(node)
            if node not in record.nodes:
                raise RuleError(f"{describe(node, record)} was not recorded: run the forward pass inside "
                                f"saliency.autograd.rules.recording()")
            rule = choose(kind, node, lambda node=node: record.module(node), kind is WEIGHTS and not below[node])
            self._check(node, kind, rule)
            self.plan[node] = rule
            if kind is BATCHNORM and rule is None:
                child = node.next_functions[0][0]
                if child is not None and kind_of(child) is WEIGHTS and consumers.get(child) == 1 \
                        and hasattr(child, "merged") and _data_index(child) is not None:
                    self.merge[child] = node

    def _check(self, node: GradNode, kind: Kind, rule: Rule | None) -> None:
        """RuleError (or TypeError) when `rule` (None: the kind's default) cannot apply to the node."""
        one_data = _data_index(node) is not None
        if rule is None:
            if kind in (ROUTE, WINNER, BATCHNORM, SPLIT) or (kind is PASS and one_data):
                return
            what = describe(node, self.record)
            if kind is PASS:
                raise RuleError(f"LRP cannot pass relevance through {what}: more than one of its inputs depends "
                                f"on the input image; give it a rule with rules={{...}} (Norm() splits it)")
            if kind is WEIGHTS:
                raise RuleError(f"the composite gives no rule for {what}")
            raise RuleError(f"LRP has no rule for {what}: {_why_none(node)}; {_give_one(node, self.record)}")
        if not isinstance(rule, Rule):
            raise TypeError(f"the rule for {describe(node, self.record)} must be a rule object (Epsilon(), ZPlus(), "
                            f"Pass(), ...), got {rule!r}")
        if rule.weights and kind is not WEIGHTS:
            raise RuleError(f"{type(rule).__name__} is a rule for layers with weights; {describe(node, self.record)} "
                            f"has none (use Norm() or Pass())")
        if not one_data and kind is WEIGHTS:
            raise RuleError(f"{type(rule).__name__}() needs exactly one input of {describe(node, self.record)} to "
                            f"depend on the input image (its weights constants)")
        if isinstance(rule, Pass) and _passes_to(node, self.record) is None:
            raise RuleError(f"Pass() cannot choose the input of {describe(node, self.record)} that takes the "
                            f"relevance: it needs one input that depends on the image with the output's shape")

    def vjp(self, node: GradNode, r: Any, retain_graph: bool, default: Vjp) -> Any:
        rule = self.plan.get(node)
        kind = kind_of(node)
        if rule is None and kind is PASS and _passes_to(node, self.record) is None:
            return self._norm(node, r, retain_graph, default, 1e-6)  # its data input is broadcast: split
        if isinstance(rule, Pass) or (rule is None and kind in (PASS, BATCHNORM)):
            d = 0 if kind is BATCHNORM else _passes_to(node, self.record)
            if d is None:
                raise RuleError(f"relevance cannot pass through {describe(node, self.record)} unchanged: no one of "
                                f"its inputs that depend on the image has its output's shape; give it Norm()")
            _free(node, retain_graph)
            return _slots(node, d, r)
        if rule is None and kind in (ROUTE, WINNER):
            return default(node, r, retain_graph)
        if isinstance(rule, Norm) or rule is None or (isinstance(rule, Epsilon) and kind is not WEIGHTS):
            eps = rule.stabilizer if isinstance(rule, Norm) else rule.epsilon if rule is not None else 1e-6
            return self._norm(node, r, retain_graph, default, eps)
        return self._weights(node, r, rule, retain_graph)

    def _norm(self, node: GradNode, r: Grad, retain_graph: bool, default: Vjp,
              epsilon: float) -> tuple[Grad | None, ...]:
        arrays, y = self.record.nodes[node][:2]
        if type(r) is Patch:  # only the windows of y are read
            yw = r.window(y)
            inv, some_zero = stabilized_reciprocal(yw, epsilon)
            if some_zero:
                self.dropped = self.dropped + _per_image(r.like_data(r.data * (yw == 0)), self.seed_ndim)
            s = r.like_data(r.data * inv)
            total = _per_image(s.like_data(s.data * yw), self.seed_ndim)
        else:
            inv, some_zero = stabilized_reciprocal(y, epsilon)
            if some_zero:
                self.dropped = self.dropped + _per_image(r * (y == 0), self.seed_ndim)
            s = r * inv
            total = _per_image(s * y, self.seed_ndim)
        grads = default(node, s, retain_graph)
        out: list[Grad | None] = []
        for g, a in zip(grads, arrays):
            if g is None:
                out.append(None)
                continue
            rel = _times(g, a)
            total = total - _per_image(rel, self.seed_ndim)
            out.append(rel)
        self.bias = self.bias + total  # the shares of inputs that are not data (constants, parameters)
        return tuple(out)

    def _weights(self, node: GradNode, r: Grad, rule: Rule, retain_graph: bool) -> tuple[Grad | None, ...]:
        arrays, z = self.record.nodes[node][:2]
        d = _data_index(node)
        assert d is not None  # _check made sure a weights op has one data input
        x, w = arrays[d], arrays[1 - d]
        b = arrays[2] if len(arrays) > 2 else None
        bn = self.merge.get(node)
        if bn is not None:  # the batch norm after it, folded into w and b (once per version of them all)
            bn_arrays, z, _, params = self.record.nodes[bn]
            stats = (params["running_mean"], params["running_var"]) + tuple(bn_arrays[1:3])
            w, b = versions.derived(f"lrp.merge:{bn.eps!r}", lambda w, b, *stats: _merged(node, bn, w, b, *stats),
                                    w, b, *stats)
        layer = Layer(node, x, w, b, z, r, self.seed_ndim, [])
        rel, bias = rule(layer)
        self.bias = self.bias + bias
        for part in layer.dropped:
            self.dropped = self.dropped + part
        _free(node, retain_graph)
        return _slots(node, d, rel)


def _merged(op: GradNode, bn: GradNode, w: NDArray[Any], b: NDArray[Any] | None, mean: NDArray[Any],
            var: NDArray[Any], gamma: NDArray[Any] | None = None,
            beta: NDArray[Any] | None = None) -> tuple[NDArray[Any], NDArray[Any]]:
    """(w, b) of `op` with the batch norm `bn` after it folded in (Zennit's canonizer's merge)."""
    scale, shift = bn.channel_affine(mean, var, gamma, beta)
    w, b = op.merged(w, b, scale.astype(w.dtype), shift.astype(w.dtype))
    return np.ascontiguousarray(w), np.ascontiguousarray(b)


# ---------------------------------------------------------------------------------------------------
# DeepLift's rescale rule


class Rescale:
    """DeepLift's rule set (the rescale rule) for a graph recorded on the batch [x; x0] (rows :N the
    inputs, N: their baselines). The seed is zero on the baseline rows, and stays so."""

    def __init__(self, root: GradNode, record: Recording, epsilon: float = 1e-10) -> None:
        self.record, self.epsilon = record, epsilon
        order, _ = _walk(root)
        for node in order:
            if type(node) is AccumulateGrad:
                continue
            kind = kind_of(node)
            if kind is NONE or (kind in (PASS, WINNER) and _data_index(node) is None):
                raise RuleError(f"DeepLift has no rule for {describe(node, record)}: {_why_none(node)}; attribute "
                                f"an output before it")

    def vjp(self, node: GradNode, g: Any, retain_graph: bool, default: Vjp) -> Any:
        kind = kind_of(node)
        if kind is PASS:
            return self._rescale(node, g, retain_graph, default)
        if kind is WINNER:
            return self._winner(node, g, retain_graph, default)
        return default(node, g, retain_graph)

    def _halves(self, a: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
        n = a.shape[0] // 2
        return a[:n], a[n:]

    def _rescale(self, node: GradNode, g: Grad, retain_graph: bool, default: Vjp) -> tuple[Grad | None, ...]:
        arrays, y = self.record.nodes[node][:2]
        d = _data_index(node)
        assert d is not None  # __init__ refused PASS and WINNER ops without one data input
        x = arrays[d]
        if x.shape != y.shape:
            raise RuleError(f"DeepLift cannot rescale {describe(node, self.record)}: it broadcasts its input "
                            f"{x.shape} to {y.shape}")
        xi, x0 = self._halves(x)
        yi, y0 = self._halves(y)
        dx, dy = xi - x0, yi - y0
        near = np.abs(dx) < self.epsilon
        ones = np.zeros(y.shape, y.dtype)
        ones[:len(xi)] = 1
        slope = np.zeros_like(ones)
        if near.any():  # the op's own derivative where x and x0 (nearly) coincide
            own = node.backward(ones)[d]
            slope[:len(xi)] = np.where(near, own[:len(xi)], 0)
        np.divide(dy, dx, out=slope[:len(xi)], where=~near)
        _free(node, retain_graph)
        return _slots(node, d, _times(g, slope))

    def _winner(self, node: GradNode, g: Grad, retain_graph: bool, default: Vjp) -> tuple[Grad | None, ...]:
        """Captum's max-pooling rule for any selection: at x the winners get (max(y, y0) - y0) g, at the
        baseline's winners (y - max(y, y0)) g; divided by x - x0 (the op's own VJP where they coincide)."""
        arrays, y = self.record.nodes[node][:2]
        d = _data_index(node)
        assert d is not None  # __init__ refused PASS and WINNER ops without one data input
        g = g.dense() if type(g) is Patch else g
        nb = g.ndim - y.ndim
        n = y.shape[0] // 2
        yi, y0 = y[:n], y[n:]
        top = np.maximum(yi, y0)
        gi = g[(slice(None),) * nb + (slice(0, n),)]
        split = np.concatenate([gi * (top - y0), gi * (yi - top)], axis=nb)
        spread = node.backward(split)[d]
        sl_top, sl_bottom = (slice(None),) * nb + (slice(0, n),), (slice(None),) * nb + (slice(n, None),)
        moved = spread[sl_top] + spread[sl_bottom]
        plain = node.backward(np.concatenate([gi, np.zeros_like(gi)], axis=nb))[d][sl_top]
        x = arrays[d]
        dx = x[:n] - x[n:]
        near = np.abs(dx) < self.epsilon
        m = np.where(near, plain, moved / np.where(near, 1, dx))
        out = np.zeros(g.shape[:nb] + x.shape, m.dtype)
        out[sl_top] = m
        _free(node, retain_graph)
        return _slots(node, d, out)


__all__ = ["AlphaBeta", "Epsilon", "Flat", "Gamma", "Norm", "Pass", "Relevance", "Rescale", "Rule", "RuleError",
           "WSquare", "ZBox", "ZPlus"]
