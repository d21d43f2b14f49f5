"""Integrated Gradients (Sundararajan et al., arXiv:1703.01365), with its completeness check."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ._core import Call, baseline_like, fold, resolve, tile, weighted
from .baselines import baseline_text, parse_baseline
from .registry import Option, method

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model, Progress
    from .result import Attribution
    from .seeds import Seed

_RULES = ("gauss-legendre", "midpoint", "trapezoid")


def _nodes(steps: int, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Points alpha in [0, 1] and weights summing to 1 for the integral over the path."""
    if rule == "trapezoid":
        if steps < 2:
            raise ValueError(f"the trapezoid rule needs steps >= 2 (both ends of the path), got {steps}")
        alphas = np.linspace(0.0, 1.0, steps)
        w = np.full(steps, 1.0 / (steps - 1))
        w[[0, -1]] /= 2
        return alphas, w
    if rule == "gauss-legendre":
        t, w = np.polynomial.legendre.leggauss(steps)
        return (t + 1) / 2, w / 2
    return (np.arange(steps) + 0.5) / steps, np.full(steps, 1.0 / steps)


@method(options=(Option("steps", int, "points on the path from the baseline to the image", minimum=1),
                 Option("baseline", parse_baseline, "the path's start: a number (0: black) or blur (the image "
                        "blurred)", text=baseline_text),
                 Option("rule", str, "the quadrature along the path", choices=_RULES)),
        map_channels="input")
def integrated_gradients(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, baseline: Any = 0.0,
                         steps: int = 64, batch: Optional[int] = None, rule: str = "gauss-legendre",
                         progress: Optional[Progress] = None) -> Attribution:
    """(x - baseline) * the mean gradient along the straight path baseline -> x.

    Args:
      baseline: a number (0.0: black; None is zeros too), an array broadcastable to x, or a callable of x
        (`baselines.Blur()`: the image blurred).
      steps: number of points on the path where the gradient is taken.
      batch: most images per forward pass (path points of all N images run in chunks); default
        from a budget of about 2**17 input elements (times K seeds) per pass.
      rule: the quadrature over the path: "gauss-legendre" (default: `steps` Gauss-Legendre
        nodes), "midpoint" (the Riemann midpoint sum) or "trapezoid" (`steps` equally spaced
        points, both ends included). Gauss-Legendre is the default: for the same number of
        gradients it has the highest order of the three on the smooth stretches of the path.
      progress: optional callable(done, total) called after each chunk, counting path points.
    On ReLU and max-pool networks the gradient along the path jumps wherever a unit switches, so
    every rule's error falls only like 1/steps, and a dense output's pixels (a depth map) can
    need more steps than a classifier's scores. Check `completeness_error` against `delta` and
    raise `steps` when it matters.
    The result's `extras["completeness_error"]` is sum(map) - (F(x) - F(baseline)) per image,
    where F is the seed-weighted output sum(v * y) (shape (N,), (K, N) for K seeds, without N when
    x had no batch dimension); `extras["delta"]` is F(x) - F(baseline), to make it relative.
    The seed is resolved at x (predicted() is the class predicted for x) and used along the path.
    """
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {', '.join(map(repr, _RULES))}, got {rule!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    alphas, weights = _nodes(int(steps), rule)

    call = Call(model, x)
    xs = call.x
    y = call.forward(xs)
    seed, v = resolve(seed, y, model)
    batched = seed.count is not None
    b = baseline_like(baseline, xs)
    diff = xs.astype(np.float64) - b
    per = call.chunk(batch, len(alphas), seed.count or 1)
    acc: Any = 0.0
    for start in range(0, len(alphas), per):
        a = alphas[start:start + per]
        m = len(a)
        points = (b + a.reshape(-1, 1, 1, 1, 1) * diff).astype(xs.dtype).reshape((m * call.n,) + xs.shape[1:])
        g = fold(call.vjp(points, tile(v, m, batched), batched), m, batched)
        # weighted sum over the m path points (axis 0, or 1 after K seeds), elementwise: a BLAS
        # product here would wake NumPy's BLAS threads, whose spinning slows the next batch
        for weight, gi in zip(weights[start:start + m], np.moveaxis(g, int(batched), 0)):
            acc = acc + weight * gi
        if progress is not None:
            progress(start + m, len(alphas))
    amap = acc * diff
    delta = weighted(y, v, batched) - weighted(call.forward(b), v, batched)
    lead = amap.shape[:1 + batched]
    error = amap.reshape(lead + (-1,)).sum(axis=-1) - delta
    extras = {"completeness_error": call.unbatch(error, seed), "delta": call.unbatch(delta, seed),
              "steps": int(steps), "rule": rule}
    return call.finish("integrated_gradients", amap, seed, y, extras)
