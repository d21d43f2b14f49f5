"""GradientShap (Lundberg and Lee 2017, as Captum computes it): expected gradients times the input's
difference from baselines drawn at random, at random points between the two."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ._core import Call, resolve
from .baselines import baselines_like, baselines_text, parse_baselines
from .registry import Option, method

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model, Progress
    from .result import Attribution
    from .seeds import Seed


@method(options=(Option("baselines", parse_baselines, "the reference inputs drawn from: uniform:COUNT (noise "
                        "images) or a comma-separated list of numbers and blur", text=baselines_text),
                 Option("samples", int, "random draws per image", flag="--draws", minimum=1),
                 Option("stdev", float, "the standard deviation of Gaussian noise added to the image at each draw",
                        minimum=0.0)),
        map_channels="input")
def gradient_shap(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, baselines: Any, samples: int = 50,
                  stdev: float = 0.0, rng: Any = None, batch: Optional[int] = None,
                  progress: Optional[Progress] = None) -> Attribution:
    """The mean over `samples` draws of (x' - b) times v^T dy/dx at b + a (x' - b): for each draw, a
    baseline b from `baselines` (uniformly, with replacement), x' = x plus Gaussian noise of standard
    deviation `stdev`, and a uniform in [0, 1).

    Args:
      baselines: an array (B, C, H, W) of reference images, a callable of x giving one
        (`baselines.Uniform(16)`), or a list of numbers and images.
      samples: draws per image.
      stdev: the noise added to x at each draw (0: none).
      rng: a numpy Generator or a seed (default: fresh entropy). The draws are taken from it in
        Captum's order, row r = i * samples + s for image i: `rng.integers(0, B, samples * N)` (the
        baselines), then, if stdev > 0, `rng.normal(0, stdev, (samples * N, C, H, W))`, then
        `rng.uniform(0, 1, samples * N)` (the points); an object with these three methods can
        replay given draws.
      batch: most draws per forward pass (default from a memory budget); progress: optional
        callable(done, total) after each pass, counting draws.
    The map sums, in expectation over the draws, to about sum(v * (f(x) - E f(b))) (exactly for a
    model linear between x and the baselines, and without noise).
    """
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be a positive int, got {samples!r}")
    if not np.isfinite(stdev) or stdev < 0:
        raise ValueError(f"stdev must be a finite number >= 0, got {stdev!r}")
    if rng is None or isinstance(rng, (int, np.integer)):
        rng = np.random.default_rng(rng)
    call = Call(model, x)
    bs = baselines_like(baselines, call.x)
    n, count = call.n, int(samples)
    y = call.forward(call.x)
    seed, v = resolve(seed, y, model)
    batched = seed.count is not None
    lead = int(batched)
    total = count * n
    pick = np.asarray(rng.integers(0, len(bs), total))
    noise = np.asarray(rng.normal(0.0, stdev, (total,) + call.x.shape[1:]), call.x.dtype) if stdev > 0 else None
    alpha = np.asarray(rng.uniform(0.0, 1.0, total), call.x.dtype)
    per = call.chunk(batch, count, seed.count or 1) * n   # rows per pass
    amap = np.zeros(v.shape[:lead] + call.x.shape, np.float64)
    for start in range(0, total, per):
        rows = np.arange(start, min(start + per, total))
        image = rows // count
        xs = call.x[image] if noise is None else call.x[image] + noise[rows]
        b = bs[pick[rows]]
        a = alpha[rows].reshape(-1, 1, 1, 1)
        points = (b + a * (xs - b)).astype(call.x.dtype)
        vs = np.take(v, image, axis=lead)
        g = call.vjp(points, vs, batched)
        contrib = (xs - b) * g
        np.add.at(amap, (slice(None),) * lead + (image,), contrib)  # type: ignore[arg-type]  # numpy's stub: no slices
        if progress is not None:
            progress(int(rows[-1]) + 1, total)
    amap /= count
    extras = {"samples": count, "stdev": float(stdev), "baselines": len(bs)}
    return call.finish("gradient_shap", amap.astype(call.x.dtype), seed, y, extras)
