"""VarGrad (Adebayo et al., arXiv:1810.03307): the variance of the gradient over noisy copies."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional

from .registry import method
from .smoothgrad import NOISE, SAMPLES, smoothgrad

if TYPE_CHECKING:
    import numpy as np

    from ..autograd.tensor import TensorLike
    from ._core import Model, Progress
    from .result import Attribution
    from .seeds import Seed


@method(options=(SAMPLES, NOISE), map_channels="input")
def vargrad(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, noise: float = 0.15, n: int = 25,
            rng: Optional[np.random.Generator] = None, batch: Optional[int] = None,
            progress: Optional[Progress] = None) -> Attribution:
    """The variance of the gradient over `n` noisy copies of x: smoothgrad's "vargrad" variant
    (its arguments and noise draws), under a name of its own."""
    attr = smoothgrad(model, x, seed, noise=noise, n=n, rng=rng, variant="vargrad", batch=batch, progress=progress)
    return replace(attr, method="vargrad")
