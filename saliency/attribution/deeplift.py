"""DeepLift (Shrikumar et al. 2017, the rescale rule) and DeepLiftShap, on the engine's own ops.

The model runs once on the batch [x; baseline]; the backward pass then carries DeepLift's
multipliers instead of gradients: every elementwise nonlinearity, called as a module or as a
function, reused or not, uses (f(x) - f(x0)) / (x - x0), and max pooling (any max selection)
splits f(x) - f(x0) between its winners at x and at the baseline (Captum's rule), so the map sums
to the seeded f(x) - f(baseline) through them all. An op without a sound rule (softmax or a
normalisation inside the network, a product of two data-dependent tensors, batch norm in training
mode) is a RuleError naming it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..autograd.relevance import Rescale
from ..autograd.rules import recording
from ._core import Call, baseline_like, fold, resolve, tile, weighted
from .baselines import baseline_text, baselines_like, baselines_text, parse_baseline, parse_baselines
from .registry import Option, method

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model
    from .result import Attribution
    from .seeds import Seed

# |x - x0| below this counts as no difference: the op's own derivative is used there (Captum's eps)
EPSILON = 1e-10


class _Pass:
    """The model run on the rows [xs; bs] (M each), recorded for DeepLift's rules: `y` its output."""

    def __init__(self, call: Call, xs: np.ndarray, bs: np.ndarray) -> None:
        self.call, self.m = call, len(xs)
        with recording(call.model) as record:
            self.xt, y = call.forward(np.concatenate([xs, bs]), grad=True, record=record)
        self.y = y
        if not y.requires_grad:
            call.grad(y, self.xt, np.zeros_like(y._array), False)  # the model's error: its output ignores x
        self.plan = Rescale(y.grad_fn, record, EPSILON)

    def multipliers(self, v: np.ndarray, batched: bool) -> np.ndarray:
        """DeepLift's multipliers ([K,] M, C, H, W) of the seeds v ([K,] M, ...) at the rows xs."""
        both = np.concatenate([v, np.zeros_like(v)], axis=int(batched))
        g = self.call.grad(self.y, self.xt, both, batched, rule=self.plan)
        return g[:, :self.m] if batched else g[:self.m]


@method(options=(Option("baseline", parse_baseline, "the reference input: a number (0: black) or blur (the image "
                        "blurred)", text=baseline_text),),
        map_channels="input")
def deeplift(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, baseline: Any = 0.0) -> Attribution:
    """DeepLift's rescale rule: (x - baseline) times the multipliers of v * (f(x) - f(baseline)).

    Args:
      baseline: a number (0.0: black; None is zeros too), an array broadcastable to x, or a callable
        of x (`baselines.Blur()`).
    The map sums to sum(v * (f(x) - f(baseline))) per image: `extras["delta"]` is that difference and
    `extras["completeness_error"]` the map's sum minus it (rounding, and where |x - x0| < 1e-10 at
    a nonlinearity its derivative stands in for the finite difference). The model must treat the
    images of a batch independently (eval mode: batch norm in training mode is a RuleError).
    """
    call = Call(model, x)
    b = baseline_like(baseline, call.x)
    run = _Pass(call, call.x, b)
    n, ya = call.n, run.y._array
    seed, v = resolve(seed, ya[:n], model)
    batched = seed.count is not None
    amap = (call.x - b) * run.multipliers(v, batched)
    delta = weighted(ya[:n], v, batched) - weighted(ya[n:], v, batched)
    error = amap.reshape(amap.shape[:1 + batched] + (-1,)).sum(axis=-1, dtype=np.float64) - delta
    extras = {"delta": call.unbatch(delta, seed), "completeness_error": call.unbatch(error, seed)}
    return call.finish("deeplift", amap, seed, ya[:n], extras)


@method(options=(Option("baselines", parse_baselines, "the reference inputs averaged over: uniform:COUNT (noise "
                        "images) or a comma-separated list of numbers and blur", text=baselines_text),),
        map_channels="input")
def deeplift_shap(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, baselines: Any,
                  batch: Optional[int] = None) -> Attribution:
    """DeepLift against each of a set of baselines, averaged (Lundberg and Lee 2017, Captum's
    DeepLiftShap): an estimate of SHAP values with the baselines as the background distribution.

    Args:
      baselines: an array (B, C, H, W) of reference images, a callable of x giving one
        (`baselines.Uniform(16)`: noise images), or a list of numbers and images.
      batch: most input-baseline pairs per forward pass (default from a memory budget).
    The map sums to sum(v * (f(x) - mean over the baselines of f(baseline))) per image
    (`extras["delta"]`; `extras["completeness_error"]` is the map's sum minus it).
    """
    call = Call(model, x)
    bs = baselines_like(baselines, call.x)
    n, count = call.n, len(bs)
    ya = call.forward(call.x)
    seed, v = resolve(seed, ya, model)
    batched = seed.count is not None
    per = call.chunk(batch, count, seed.count or 1)
    total: Any = 0.0
    reference: Any = 0.0
    for start in range(0, count, per):
        part = bs[start:start + per]
        k = len(part)
        xs = np.tile(call.x, (k, 1, 1, 1))          # copy j of image i at row j * N + i
        rows = np.repeat(part, n, axis=0)
        run = _Pass(call, xs, rows)
        vs = tile(v, k, batched)
        total = total + fold((xs - rows) * run.multipliers(vs, batched), k, batched).sum(axis=int(batched))
        reference = reference + fold(vs * run.y._array[len(xs):], k, batched).sum(axis=int(batched))
    amap = total / count
    lead = 1 + batched
    delta = weighted(ya, v, batched) - reference.reshape(reference.shape[:lead] + (-1,)).sum(
        axis=-1, dtype=np.float64) / count
    error = amap.reshape(amap.shape[:lead] + (-1,)).sum(axis=-1, dtype=np.float64) - delta
    extras = {"delta": call.unbatch(delta, seed), "completeness_error": call.unbatch(error, seed),
              "baselines": count}
    return call.finish("deeplift_shap", amap, seed, ya, extras)


__all__ = ["deeplift", "deeplift_shap"]
