"""SmoothGrad (Smilkov et al., arXiv:1706.03825) and its squared and VarGrad variants."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ._core import Call, fold, resolve, tile
from .registry import Option, method

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model, Progress
    from .result import Attribution
    from .seeds import Seed

_VARIANTS = ("mean", "squared", "vargrad")
_DEFAULT_RNG_SEED = 0


# the options of the methods on noisy copies of the image (vargrad takes them too)
SAMPLES = Option("n", int, "noisy copies of the image, whose gradients are combined", flag="--samples", minimum=1)
NOISE = Option("noise", float, "standard deviation of the noise, a fraction of the image's range", minimum=0)


@method(options=(SAMPLES, NOISE, Option("variant", str, "mean of the gradients, mean of their squares, or their "
                                        "variance", choices=_VARIANTS)),
        map_channels="input")
def smoothgrad(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, noise: float = 0.15, n: int = 25,
               rng: Optional[np.random.Generator] = None, variant: str = "mean", batch: Optional[int] = None,
               progress: Optional[Progress] = None) -> Attribution:
    """The gradient averaged over `n` noisy copies of x.

    Args:
      noise: standard deviation of the Gaussian noise as a fraction of each image's range
        (max - min over the image); 0 gives exactly the gradient (every copy is x).
      n: number of noisy copies.
      rng: np.random.Generator for the noise; default np.random.default_rng(0), so that
        repeated calls give the same map.
      variant: "mean" (mean of g), "squared" (mean of g**2) or "vargrad" (variance of g).
      batch: most images per forward pass (the n*N copies are run in chunks); default from
        a budget of about 2**17 input elements (times K seeds) per pass.
      progress: optional callable(done, total) called after each chunk, counting copies.
    The seed is resolved on the clean x (predicted() is the class predicted for x) and applied
    unchanged to every copy. The copies of a batch run through one pass, so the model must treat
    images independently (no BatchNorm in training mode).
    """
    if variant not in _VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(map(repr, _VARIANTS))}, got {variant!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int (number of noisy copies), got {n!r}")
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a finite number >= 0 (a fraction of the input range), got {noise!r}")
    rng = np.random.default_rng(_DEFAULT_RNG_SEED) if rng is None else rng
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be an np.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")

    call = Call(model, x)
    y = call.forward(call.x)
    seed, v = resolve(seed, y, model)
    batched = seed.count is not None
    xs = call.x
    lo = xs.reshape(call.n, -1).min(axis=1)
    hi = xs.reshape(call.n, -1).max(axis=1)
    sigma = (noise * (hi - lo)).reshape((call.n,) + (1,) * (xs.ndim - 1))

    per = call.chunk(batch, n, seed.count or 1)
    axis = 1 if batched else 0
    mean: Any = None  # running ndarrays, set by the first chunk
    m2: Any = None
    sq: Any = None
    done = 0
    while done < n:
        m = min(per, n - done)
        eps = rng.standard_normal((m,) + xs.shape)
        noisy = (xs[None] + sigma * eps).astype(xs.dtype).reshape((m * call.n,) + xs.shape[1:])
        g = fold(call.vjp(noisy, tile(v, m, batched), batched), m, batched).astype(np.float64)
        # running mean and sum of squared deviations, merged chunk by chunk (Chan et al.): no
        # cancellation in the variance as E[g^2] - E[g]^2 would have
        cmean = g.mean(axis=axis)
        cm2 = ((g - np.expand_dims(cmean, axis)) ** 2).sum(axis=axis)
        csq = (g * g).sum(axis=axis)
        if mean is None:
            mean, m2, sq = cmean, cm2, csq
        else:
            delta = cmean - mean
            mean = mean + delta * (m / (done + m))
            m2 = m2 + cm2 + delta * delta * (done * m / (done + m))
            sq = sq + csq
        done += m
        if progress is not None:
            progress(done, n)
    amap = {"mean": mean, "squared": sq / n, "vargrad": m2 / n}[variant]
    return call.finish("smoothgrad", amap, seed, y, {"noise": noise, "n": n, "variant": variant})
