"""VarGrad (Adebayo et al., arXiv:1810.03307): the variance of the gradient over noisy copies."""
from dataclasses import replace

from .registry import method
from .smoothgrad import NOISE, SAMPLES, smoothgrad


@method(options=(SAMPLES, NOISE), map_channels="input")
def vargrad(model, x, seed=None, *, noise=0.15, n=25, rng=None, batch=None, progress=None):
    """The variance of the gradient over `n` noisy copies of x: smoothgrad's "vargrad" variant
    (its arguments and noise draws), under a name of its own."""
    attr = smoothgrad(model, x, seed, noise=noise, n=n, rng=rng, variant="vargrad", batch=batch, progress=progress)
    return replace(attr, method="vargrad")
