"""Layer-wise relevance propagation (Bach et al. 2015) with Zennit's composites, on the engine's own ops.

The relevance starts from v * y (v the seed) and is passed down op by op by the rule each op's
class declares (saliency.autograd.relevance): weight rules on convolutions and linear layers, the
proportional split on additions, means, average pooling and upsampling, pass-through on
activations, routing on reshapes, concatenations and max pooling, and batch norm merged into the
layer before it. Functional code, residual additions, reused modules and decoders are covered the
same way as modules, and an op without a sound rule is a RuleError naming it, never a silent map.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..autograd.relevance import (AlphaBeta, Epsilon, Flat, Gamma, Norm, Pass, Relevance, Rule, WSquare, ZBox,
                                  ZPlus)
from ..autograd.rules import SPLIT, WEIGHTS, RuleError, recording
from ._core import Call, resolve, seeds_per_pass, weighted
from .registry import Option, method

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ..autograd.rules import Kind
    from ._core import Model
    from .result import Attribution
    from .seeds import Seed


@dataclass(frozen=True)
class Composite:
    """Which rule each op with weights takes: `conv` for convolutions (transposed and sub-pixel too),
    `linear` for linear layers and products with a constant matrix, `first` (if any) for the layers
    that see the input, among the families `first_of`. (The ops that sum data inputs, additions,
    means, pooling and upsampling, take Norm: `lrp` gives it the stabiliser.)"""

    conv: Rule
    linear: Rule
    first: Rule | None = None
    first_of: tuple[str, ...] = ("conv", "linear")


# Zennit's composites by name (the first: lrp's default), each made from the parameters p of `composite_rules`
_COMPOSITES: dict[str, Callable[[Any], Composite]] = {
    "epsilon_plus_flat": lambda p: Composite(ZPlus(p.stabilizer), Epsilon(p.epsilon), Flat(p.stabilizer)),
    "epsilon_plus": lambda p: Composite(ZPlus(p.stabilizer), Epsilon(p.epsilon)),
    "epsilon_alpha2_beta1": lambda p: Composite(AlphaBeta(2.0, 1.0, p.stabilizer), Epsilon(p.epsilon)),
    "epsilon_alpha2_beta1_flat": lambda p: Composite(AlphaBeta(2.0, 1.0, p.stabilizer), Epsilon(p.epsilon),
                                                     Flat(p.stabilizer)),
    "epsilon_gamma_box": lambda p: Composite(Gamma(p.gamma, p.stabilizer), Epsilon(p.epsilon),
                                             ZBox(p.low, p.high, p.stabilizer), ("conv",)),
    "epsilon": lambda p: Composite(Epsilon(p.epsilon), Epsilon(p.epsilon)),
}
COMPOSITES = tuple(_COMPOSITES)


def composite_rules(name: str, *, epsilon: float = 1e-6, gamma: float = 0.25, low: Any = 0.0, high: Any = 1.0,
                    stabilizer: float = 1e-6) -> Composite:
    """Zennit's composite `name` with these parameters (and `epsilon`: Epsilon everywhere, Captum's LRP)."""
    if name not in _COMPOSITES:
        raise ValueError(f"unknown composite {name!r}; choose one of: {', '.join(COMPOSITES)}")
    return _COMPOSITES[name](SimpleNamespace(epsilon=epsilon, gamma=gamma, low=low, high=high, stabilizer=stabilizer))


def _chooser(comp: Composite, split: Rule, overrides: dict[str, Rule],
             zero_bias: bool) -> Callable[[Kind, Any, Callable[[], str | None], bool], Optional[Rule]]:
    """choose(kind, node, module, first) for saliency.autograd.relevance.Relevance (`module()` gives the
    name of the node's module): the rule of the longest module name in `overrides` that is the
    node's module or contains it (a weight rule there applies to the ops with weights only), else
    the rule of the op's class name, else of "first" for a first layer, else the composite's; with
    `zero_bias`, weight rules leave the biases out."""
    by_module = sorted(((k, r) for k, r in overrides.items() if k not in ("first",)), key=lambda kr: -len(kr[0]))

    def fits(rule: Rule, kind: Kind) -> bool:
        return not rule.weights or kind is WEIGHTS

    def finish(rule: Any) -> Rule:  # a Rule dataclass (each rule class is one)
        return replace(rule, zero_bias=True) if zero_bias and rule.weights and not rule.zero_bias else rule

    def choose(kind: Kind, node: Any, module: Callable[[], str | None], first: bool) -> Optional[Rule]:
        name = (module() or "") if by_module else ""  # None for a node the recording missed: no module
        for key, rule in by_module:
            if (name == key or name.startswith(key + ".")) and fits(rule, kind):
                return finish(rule)
        named = overrides.get(type(node).__name__)
        if named is not None:  # named for this op: a rule that cannot apply to it is an error
            return finish(named)
        if first and "first" in overrides:
            return finish(overrides["first"])
        if kind is WEIGHTS:
            family = getattr(node, "family", "linear")
            if first and comp.first is not None and family in comp.first_of:
                return finish(comp.first)
            return finish(comp.conv if family == "conv" else comp.linear)
        if kind is SPLIT:
            return split
        return None

    return choose


def _check_rules(given: Optional[dict[str, Rule]]) -> dict[str, Rule]:
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise TypeError(f"rules must be a dict {{module or op name (or 'first'): rule}}, got {type(given).__name__}")
    for key, rule in given.items():
        if not isinstance(key, str):
            raise TypeError(f"rules keys are module names, op class names or 'first', got {key!r}")
        if not isinstance(rule, Rule):
            raise TypeError(f"rules[{key!r}] must be a rule object (Epsilon(), ZPlus(), Gamma(), Flat(), Norm(), "
                            f"Pass(), ...), got {rule!r}")
    return dict(given)


@method(options=(Option("composite", str, "which rule each layer takes (Zennit's composites; epsilon: Captum's LRP)",
                        choices=COMPOSITES),
                 Option("epsilon", float, "the Epsilon rule's stabiliser (linear layers)", minimum=0.0),
                 Option("gamma", float, "the Gamma rule's boost of positive weights (epsilon_gamma_box)",
                        minimum=0.0),
                 Option("low", float, "the lowest input value, for the first layer's ZBox rule (epsilon_gamma_box)"),
                 Option("high", float, "the highest input value, for ZBox (epsilon_gamma_box)"),
                 Option("stabilizer", float, "the other rules' stabiliser (ZPlus, Gamma, Flat, Norm, ...)",
                        minimum=0.0),
                 Option("zero_bias", bool, "leave the biases out of every weight rule (relevance is then conserved "
                        "up to the stabilisers)")),
        map_channels="input")
def lrp(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, composite: str = "epsilon_plus_flat",
        epsilon: float = 1e-6, gamma: float = 0.25, low: Any = 0.0, high: Any = 1.0, stabilizer: float = 1e-6,
        zero_bias: bool = False, rules: Optional[dict[str, Rule]] = None, chunk: Optional[int] = None) -> Attribution:
    """Layer-wise relevance propagation: v * y passed down to the input by each op's rule.

    Args:
      composite: Zennit's composite names and definitions: "epsilon_plus_flat" (ZPlus on
        convolutions, Epsilon on linear layers, Flat on the first layer), "epsilon_plus",
        "epsilon_alpha2_beta1" (AlphaBeta(2, 1) on convolutions), "epsilon_alpha2_beta1_flat",
        "epsilon_gamma_box" (Gamma on convolutions, ZBox(low, high) on the first convolution), and
        "epsilon" (Epsilon on every layer, additions and pooling too: Captum's default LRP).
      epsilon, gamma, low, high: the parameters of the composite's Epsilon, Gamma and ZBox rules
        (low and high: numbers, or arrays broadcasting to x such as per-channel bounds (1, C, 1, 1)).
      stabilizer: the stabiliser of the composite's other rules (Zennit's `stabilizer`).
      zero_bias: every weight rule leaves the biases out (Zennit's zero_params="bias").
      rules: {name: rule} overriding the composite: a module's name (as model.named_modules() names
        it: a weight rule there applies to the layers with weights inside it, Norm() and Pass() to
        every op in it), an op's class name as RuleError prints it ("Softmax", "Convolution"), or
        "first" for the layers that see the input. The rules are the objects of
        saliency.attribution.lrp: Epsilon, ZPlus, AlphaBeta, Gamma, ZBox, Flat, WSquare, Norm, Pass.
      chunk: batched seeds per backward pass (default from a memory budget).

    The map sums to the seeded score sum(v * y) up to what the biases absorb and the rules cannot
    pass on; `extras["conservation"]` gives, per image (and seed), "score", "input" (the map's sum),
    "biases" (absorbed by the biases, and by constants added inside the network), "dropped" (what
    reached outputs a rule gives no share to: ZPlus's outputs without a positive contribution,
    which a branch added before its ReLU or a sigmoid output can send relevance to; AlphaBeta's
    without a positive or negative one, Gamma's and Norm's outputs exactly 0) and "stabilisers"
    (the rest: what the stabilisers' epsilon takes), which add up to the score.
    An op with no sound rule in the graph (softmax or layer norm inside the network, a product of
    two data-dependent tensors) raises RuleError naming it and its module, before anything runs.
    """
    overrides = _check_rules(rules)
    comp = composite_rules(composite, epsilon=epsilon, gamma=gamma, low=low, high=high, stabilizer=stabilizer)
    split = Norm(epsilon) if composite == "epsilon" else Norm(stabilizer)
    choose = _chooser(comp, split, overrides, bool(zero_bias))
    call = Call(model, x)
    with recording(model) as record:
        xt, y = call.forward(call.x, grad=True, record=record)
    ya = y._array
    seed, v = resolve(seed, ya, model)
    batched = seed.count is not None
    if not y.requires_grad:
        call.grad(y, xt, v, batched)  # the model's error: its output does not depend on x
    plan = Relevance(y.grad_fn, record, choose, seed_ndim=int(batched))
    r = v * ya
    bias: Any
    dropped: Any
    if not batched:
        amap = call.grad(y, xt, r, False, rule=plan)
        bias, dropped = plan.bias, plan.dropped
    else:
        per = seeds_per_pass(chunk, len(r), xt._array.size)
        amap, parts = np.empty(r.shape[:1] + call.x.shape, ya.dtype), []
        for start in range(0, len(r), per):
            stop = min(start + per, len(r))
            plan.bias = plan.dropped = 0.0
            amap[start:stop] = call._backward(y, xt, r[start:stop], True, plan, retain_graph=stop < len(r))
            parts.append([np.broadcast_to(a, (stop - start, call.n)) for a in (plan.bias, plan.dropped)])
        bias, dropped = (np.concatenate(p) for p in zip(*parts))
    score = weighted(ya, v, batched)
    total = amap.reshape(amap.shape[:1 + batched] + (-1,)).sum(axis=-1, dtype=np.float64)
    bias, dropped = (np.broadcast_to(np.asarray(a, np.float64), score.shape) for a in (bias, dropped))
    conservation = {"score": score, "input": total, "biases": bias, "dropped": dropped,
                    "stabilisers": score - total - bias - dropped}
    extras = {"conservation": {k: call.unbatch(np.array(a), seed) for k, a in conservation.items()},
              "composite": composite}
    return call.finish("lrp", amap, seed, ya, extras)


__all__ = ["AlphaBeta", "COMPOSITES", "Composite", "Epsilon", "Flat", "Gamma", "Norm", "Pass", "Rule", "RuleError",
           "WSquare", "ZBox", "ZPlus", "composite_rules", "lrp"]
