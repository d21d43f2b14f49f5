"""The metrics the field judges attribution maps by, beside deletion/insertion and the randomisation
check (`evaluation`): ROAD, max-sensitivity, infidelity, pointing game, relevance mass, random
logit and sparseness.

Each is a function of arrays (a map given as an array (N, C', H, W) or an `Attribution`; x (N, C,
H, W) or (C, H, W)) returning one number per image, or curves per image. Where a metric orders
or sums pixels, a pixel's importance is the map summed over its channels, as given: pass
np.abs(map) to judge magnitudes. The score of a model output is the seed-weighted output
sum(v * f(x)) (a classifier's logit of the class the map was made for), the seed resolved at x
and kept for every changed copy of x. Random draws come from `rng` (an np.random.Generator;
default np.random.default_rng(0)); each function also takes its perturbations explicitly, for
comparisons with other implementations.

`METRICS` declares each metric once for `saliency evaluate --metrics` and the store's evaluation:
what it needs (a method, masks, a classifier), its numbers per image and which way is better,
its options (with the function's defaults) and two lines on what it says. `run` computes one
for a batch of a store's images.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..autograd.tensor import Tensor
from ..kernels.impute import linear_impute
from . import seeds as _seeds
from ._core import Call, InputError, resolve, tile, weighted
from .evaluation import _map_of, deletion_insertion, randomisation_check
from .registry import Option, OptionError
from .result import Attribution

ROAD_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)

# A model: a saliency.nn.Module or any function from a Tensor (N, C, H, W) to a Tensor (N, ...).
Model = Callable[[Tensor], Tensor]
# A map: an array (N, C', H, W) or (C', H, W), a Tensor, or a method's Attribution.
MapLike = Union[np.ndarray, Tensor, Attribution]
# A method: (model, x, seed) -> its Attribution (or the map itself), e.g. attribution.gradient.
MethodLike = Callable[[Model, np.ndarray, Any], Union[Attribution, np.ndarray]]
Array = np.ndarray


def _rng(rng: Optional[np.random.Generator]) -> np.random.Generator:
    rng = np.random.default_rng(0) if rng is None else rng
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be an np.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    return rng


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _one_seed(seed: Any, call: Call, model: Model, attribution: Optional[MapLike] = None) -> tuple[Any, Array, Array]:
    """(seed resolved at x, its v, the output at x) for a metric taking one seed."""
    if seed is None and isinstance(attribution, Attribution):
        seed = attribution.seed
    y = call.forward(call.x)
    seed, v = resolve(seed, y, model)
    if seed.count is not None:
        raise ValueError(f"the metrics take one seed, got {seed.count} batched seeds; pass one of them and its map")
    return seed, v, y


def _importance(amap: Array) -> Array:
    """The map summed over channels, flattened per image: (N, H*W) float64."""
    return amap.sum(axis=1, dtype=np.float64).reshape(len(amap), -1)


def _scores(call: Call, images: Array, v: Array, batch: Optional[int]) -> Array:
    """The seed-weighted outputs of the stacked copies `images` (copies*N, C, H, W), copy-major:
    (copies, N)."""
    n = call.n
    copies = len(images) // n
    per = call.chunk(batch, copies)
    out = np.empty((copies, n))
    for j0 in range(0, copies, per):
        j1 = min(j0 + per, copies)
        y = call.forward(images[j0 * n:j1 * n])
        out[j0:j1] = weighted(y, tile(v, j1 - j0, False), False).reshape(j1 - j0, n)
    return out


def _unbatch(call: Call, *values: Any) -> tuple[Any, ...]:
    if not call.unbatched:
        return values
    return tuple(v[0] if isinstance(v, np.ndarray) and v.ndim else v for v in values)


# --- ROAD -----------------------------------------------------------------------------------------

@dataclass(repr=False)
class Road:
    """ROAD's curves: the score after imputing each fraction of the pixels, most relevant first
    (`morf`, a good map falls fast: lower is better) and least relevant first (`lerf`, a good map
    keeps the score: higher is better), ([N,] fractions); their means over the fractions."""

    fractions: np.ndarray
    morf: np.ndarray
    lerf: np.ndarray
    morf_mean: np.ndarray
    lerf_mean: np.ndarray
    seed: object
    seconds: float

    def __repr__(self) -> str:
        return (f"Road({len(self.fractions)} fractions, seed='{self.seed}', morf_mean={np.round(self.morf_mean, 4)}, "
                f"lerf_mean={np.round(self.lerf_mean, 4)})")


def impute(x: Array, keep: Array, *, noise: float = 0.01, rng: Optional[np.random.Generator] = None,
           draws: Optional[Array] = None) -> Array:
    """ROAD's noisy linear imputation (Rong et al. 2022): each removed pixel (keep False) becomes the
    mean of its 8 neighbours weighted 1/6 (edges) and 1/12 (diagonals), removed neighbours being
    unknowns of the same linear system and neighbours outside the image dropped, solved exactly
    per image for all channels at once; then Gaussian noise of standard deviation `noise` is added
    to the removed pixels. x (N, C, H, W), keep (N, H, W) bool; returns float64 (N, C, H, W).
    `draws`: the standard normal draws themselves, of x's shape (default: drawn from `rng`)."""
    x = np.asarray(x)
    keep = np.asarray(keep, bool)
    out = linear_impute(x, keep)
    if noise:
        if draws is None:
            draws = _rng(rng).standard_normal(x.shape)
        elif np.shape(draws) != x.shape:
            raise ValueError(f"draws of shape {np.shape(draws)} do not fit the images of shape {x.shape}")
        out += np.where(keep[:, None], 0.0, noise * np.asarray(draws, np.float64))
    return out


def road(model: Model, x: Array, attribution: MapLike, seed: Any = None, *,
         fractions: Sequence[float] = ROAD_FRACTIONS, noise: float = 0.01, rng: Optional[np.random.Generator] = None,
         batch: Optional[int] = None, progress: Optional[Callable[[int, int], Any]] = None) -> Road:
    """ROAD (Rong et al. 2022, "A consistent and efficient evaluation strategy for attribution
    methods"): for each fraction, remove that fraction of the pixels most relevant first (MoRF)
    and least relevant first (LeRF), fill them by `impute` (which removes the removal's shape
    from what the model sees), and score the model output. Pixels are ordered by importance,
    ties in row-major order; round(f * H * W) pixels are removed at fraction f, each fraction in
    [0, 1). `progress(done, total)` follows the forward passes (2 * len(fractions) copies)."""
    call = Call(model, x)
    amap = _map_of(attribution, call)
    shares = np.asarray(fractions, np.float64).reshape(-1)
    if shares.size == 0 or not np.all((shares >= 0) & (shares < 1)):
        raise ValueError(f"fractions must be numbers in [0, 1) (at 1 no pixel is left to impute from), "
                         f"got {shares.tolist()}")
    seed, v, _ = _one_seed(seed, call, model, attribution)
    rng = _rng(rng)
    xs = call.x
    n, pixels = xs.shape[0], xs.shape[2] * xs.shape[3]
    rank = np.empty((n, pixels), np.int64)
    np.put_along_axis(rank, np.argsort(-_importance(amap), axis=1, kind="stable"), np.arange(pixels)[None], axis=1)
    counts = np.rint(shares * pixels).astype(np.int64)
    keeps = np.concatenate([rank >= counts[:, None, None], rank < pixels - counts[:, None, None]])  # (2F, N, P)
    copies = len(keeps)
    per = call.chunk(batch, copies)
    scores = np.empty((copies, n))
    for j0 in range(0, copies, per):
        j1 = min(j0 + per, copies)
        keep = keeps[j0:j1].reshape(-1, *xs.shape[2:])
        images = impute(np.tile(xs, (j1 - j0, 1, 1, 1)), keep, noise=noise, rng=rng).astype(xs.dtype)
        scores[j0:j1] = _scores(call, images, v, None)
        if progress is not None:
            progress(j1, copies)
    f = len(shares)
    morf, lerf = scores[:f].T, scores[f:].T
    morf_mean, lerf_mean = morf.mean(axis=1), lerf.mean(axis=1)
    morf, lerf, morf_mean, lerf_mean = _unbatch(call, morf, lerf, morf_mean, lerf_mean)
    return Road(shares, morf, lerf, morf_mean, lerf_mean, seed, time.perf_counter() - call.t0)


# --- robustness and fidelity -------------------------------------------------------------------------

def _maps_of(method: MethodLike, model: Model, x: Array, seed: Any) -> Array:
    out = method(model, x, seed)
    a = out.map if isinstance(out, Attribution) else out
    return np.asarray(a._array if isinstance(a, Tensor) else a, np.float64)


def max_sensitivity(model: Model, x: Array, method: MethodLike, seed: Any = None, *,
                    attribution: Optional[MapLike] = None, radius: float = 0.2, samples: int = 10,
                    perturbations: Optional[Array] = None, rng: Optional[np.random.Generator] = None,
                    batch: Optional[int] = None) -> Array:
    """Max-sensitivity (Yeh et al. 2019, "On the (in)fidelity and sensitivity of explanations"):
    max over samples s of ||a(x + d_s) - a(x)|| / ||a(x)|| (Frobenius norms of the maps), d_s
    uniform in [-radius, radius] per input value; a map that changes little under noise the
    model hardly notices scores low (lower is better). `method(model, x, seed)` makes the maps
    (an Attribution or an array), the perturbed ones `samples` copies of the batch at a time in
    batched passes; `attribution`: the map at x (default: the method's). The seed is resolved at
    x and kept for the perturbed inputs. `perturbations`: the d_s themselves, (samples, [N,] C, H,
    W). An image whose map is all zero scores NaN."""
    call = Call(model, x)
    if not callable(method):
        raise TypeError(f"method must be a callable (model, x, seed) -> Attribution, got {type(method).__name__}")
    seed, v, _ = _one_seed(seed, call, model, attribution)
    xs = call.x
    if perturbations is None:
        samples = _positive_int(samples, "samples")
        if not radius >= 0:
            raise ValueError(f"radius must be a number >= 0, got {radius!r}")
        perturbations = _rng(rng).uniform(-radius, radius, (samples,) + xs.shape)
    d = np.asarray(perturbations, np.float64)
    d = d[:, None] if call.unbatched and d.ndim == 4 else d
    if d.ndim != 5 or d.shape[1:] != xs.shape:
        raise ValueError(f"perturbations of shape {np.shape(perturbations)} do not fit the input of shape "
                         f"{xs.shape[call.unbatched:]}; pass (samples, *x.shape)")
    a0 = _map_of(attribution, call) if attribution is not None else _maps_of(method, model, xs, seed)
    base = np.linalg.norm(a0.reshape(call.n, -1), axis=1)
    samples = len(d)
    per = call.chunk(batch, samples)
    worst = np.full(call.n, -np.inf)
    for s0 in range(0, samples, per):
        s1 = min(s0 + per, samples)
        moved = (xs[None] + d[s0:s1]).astype(xs.dtype).reshape(-1, *xs.shape[1:])
        maps = _maps_of(method, model, moved, _seeds.weights(tile(v, s1 - s0, False)))
        change = np.linalg.norm((maps.reshape(s1 - s0, call.n, -1) - a0.reshape(1, call.n, -1)), axis=2)
        worst = np.maximum(worst, change.max(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(base > 0, worst / np.where(base > 0, base, 1), np.nan)
    return _unbatch(call, out)[0]


INFIDELITY_PERTURBATIONS = ("gaussian", "square")


def perturb(x: Array, kind: str = "gaussian", *, scale: float = 0.1, size: Optional[int] = None, samples: int = 10,
            baseline: float = 0.0, rng: Optional[np.random.Generator] = None) -> Array:
    """Infidelity's perturbations I_s, (samples, N, C, H, W), for x (N, C, H, W): "gaussian":
    I ~ N(0, scale^2) per value (the perturbed input x - I is x with noise); "square": a square of
    side `size` pixels (default H // 4, at least 1) at a random place of each image, where I =
    x - baseline, 0 elsewhere (the perturbed input has the square removed; Yeh et al.'s square
    removal)."""
    x = np.asarray(x, np.float64)
    rng = _rng(rng)
    samples = _positive_int(samples, "samples")
    if kind == "gaussian":
        return scale * rng.standard_normal((samples,) + x.shape)
    if kind == "square":
        h, w = x.shape[2:]
        size = max(1, h // 4) if size is None else _positive_int(size, "size")
        size = min(size, h, w)
        out = np.zeros((samples,) + x.shape)
        rows = rng.integers(0, h - size + 1, (samples, len(x)))
        cols = rng.integers(0, w - size + 1, (samples, len(x)))
        for s in range(samples):
            for i in range(len(x)):
                r, c = rows[s, i], cols[s, i]
                out[s, i, :, r:r + size, c:c + size] = x[i, :, r:r + size, c:c + size] - baseline
        return out
    raise ValueError(f"perturbation must be one of {', '.join(INFIDELITY_PERTURBATIONS)}, got {kind!r}")


def infidelity(model: Model, x: Array, attribution: MapLike, seed: Any = None, *, perturbation: str = "gaussian",
               scale: float = 0.1, samples: int = 10, normalize: bool = True, perturbations: Optional[Array] = None,
               rng: Optional[np.random.Generator] = None, batch: Optional[int] = None) -> Array:
    """Infidelity (Yeh et al. 2019) as Captum defines it: the mean over perturbations I_s of
    (beta * sum(I_s * a) - (f(x) - f(x - I_s)))^2, f the seed-weighted output; how far the map's
    linear prediction of the output's change is from the change itself (lower is better). With
    `normalize`, beta = sum_s(sum(I_s * a) * change_s) / sum_s(sum(I_s * a)^2) (the best scale,
    so that maps are judged up to scale), else 1. I_s: `perturb(x, perturbation, scale=scale,
    samples=samples)`, or `perturbations` (samples, [N,] C, H, W) given. The map must have the
    input's channels."""
    call = Call(model, x)
    amap = _map_of(attribution, call)
    if amap.shape != call.x.shape:
        raise ValueError(f"infidelity needs a map with the input's channels ({call.x.shape[1]}), got "
                         f"{amap.shape[1]}; a map of another channel count (Grad-CAM's) has no value per input value")
    seed, v, y = _one_seed(seed, call, model, attribution)
    xs = call.x
    if perturbations is None:
        perturbations = perturb(xs, perturbation, scale=scale, samples=samples, rng=rng)
    d = np.asarray(perturbations, np.float64)
    d = d[:, None] if call.unbatched and d.ndim == 4 else d
    if d.ndim != 5 or d.shape[1:] != xs.shape:
        raise ValueError(f"perturbations of shape {np.shape(perturbations)} do not fit the input of shape "
                         f"{xs.shape[call.unbatched:]}; pass (samples, *x.shape)")
    samples = len(d)
    f0 = weighted(y, v, False)
    moved = (xs[None] - d).astype(xs.dtype).reshape(-1, *xs.shape[1:])
    change = f0[None] - _scores(call, moved, v, batch)                      # (samples, N)
    predicted = (d * amap[None]).reshape(samples, call.n, -1).sum(axis=2)   # (samples, N)
    beta = np.ones(call.n)
    if normalize:
        num, den = (predicted * change).sum(axis=0), (predicted ** 2).sum(axis=0)
        beta = np.where(den != 0, num / np.where(den != 0, den, 1), 0.0)
    out = ((beta * predicted - change) ** 2).mean(axis=0)
    return _unbatch(call, out)[0]


# --- localisation, against ground-truth masks ---------------------------------------------------------

def _masks_for(mask: Array, amap: Array) -> Array:
    m = np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"mask must be a bool array (True on the object), got dtype {m.dtype}")
    m = m[None] if m.ndim == 2 else m
    if m.ndim == 4 and m.shape[1] == 1:
        m = m[:, 0]
    if m.shape != (amap.shape[0],) + amap.shape[2:]:
        raise ValueError(f"mask of shape {np.shape(mask)} does not fit maps of shape {amap.shape}; "
                         f"pass one (H, W) mask per image, (N, H, W)")
    return m.reshape(len(m), -1)


def _plain_map(attribution: MapLike) -> tuple[Array, bool]:
    """(the map as float64 (N, C', H, W), whether it had no batch dimension)."""
    a = attribution.map if isinstance(attribution, Attribution) else attribution
    a = np.asarray(a._array if isinstance(a, Tensor) else a, np.float64)
    if a.ndim == 3:
        return a[None], True
    if a.ndim != 4:
        raise ValueError(f"attribution map must have shape (N, C, H, W) or (C, H, W), got shape {a.shape}")
    return a, False


def pointing_game(attribution: MapLike, mask: Array) -> Union[Array, float]:
    """Pointing game (Zhang et al. 2018): 1.0 where a pixel of largest importance lies on the
    object (`mask` True), else 0.0; NaN for an empty mask. (N,) or a number."""
    a, single = _plain_map(attribution)
    m = _masks_for(mask, a)
    imp = _importance(a)
    top = imp == imp.max(axis=1, keepdims=True)
    out = np.where(m.any(axis=1), (top & m).any(axis=1).astype(np.float64), np.nan)
    return float(out[0]) if single else out


def relevance_mass(attribution: MapLike, mask: Array) -> Union[Array, float]:
    """Relevance mass accuracy (Arras et al. 2022): the share of the total importance that lies on
    the object (`mask` True); 1 is all of it. NaN for an empty mask or a map summing to 0."""
    a, single = _plain_map(attribution)
    m = _masks_for(mask, a)
    imp = _importance(a)
    total, inside = imp.sum(axis=1), np.where(m, imp, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(m.any(axis=1) & (total != 0), inside / np.where(total != 0, total, 1), np.nan)
    return float(out[0]) if single else out


def sparseness(attribution: MapLike) -> Union[Array, float]:
    """Sparseness (Chalasani et al. 2020): the Gini index of |importance| over the pixels, 0 for a
    map spread evenly, towards 1 for one that is all on a few pixels; NaN for an all-zero map."""
    a, single = _plain_map(attribution)
    out = gini(np.abs(_importance(a)))
    return float(out[0]) if single else out


def gini(values: Array) -> Array:
    """The Gini index of non-negative values along the last axis: sum_i (2i - n - 1) v_(i) / (n sum v)
    with v_(1) <= ... <= v_(n); NaN where they sum to 0."""
    v = np.sort(np.asarray(values, np.float64), axis=-1)
    n = v.shape[-1]
    weights = 2 * np.arange(1, n + 1) - n - 1
    total = v.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (v * weights).sum(axis=-1) / (n * np.where(total > 0, total, 1)), np.nan)


# --- random logit -------------------------------------------------------------------------------------

def ssim(a: Array, b: Array, *, window: int = 7) -> Array:
    """The structural similarity (Wang et al. 2004) of the 2-D maps a and b (..., H, W): the mean
    over every window x window patch inside the maps of its SSIM, with the patches' sample
    (co)variances, K1 = 0.01, K2 = 0.03 and the data range of the two maps together (as
    scikit-image's structural_similarity with a uniform window). 1 for equal maps; 1.0 for two
    constant equal maps. A map smaller than the window uses its whole extent as one window."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    h, w = a.shape[-2:]
    k = min(window, h, w)
    lo = np.minimum(a.min(axis=(-2, -1)), b.min(axis=(-2, -1)))
    hi = np.maximum(a.max(axis=(-2, -1)), b.max(axis=(-2, -1)))
    span = (hi - lo)[..., None, None]
    c1, c2 = (0.01 * span) ** 2, (0.03 * span) ** 2

    def mean(z: Array) -> Array:  # the mean over every k x k window, by cumulative sums
        c = np.cumsum(np.cumsum(z, axis=-2), axis=-1)
        c = np.pad(c, [(0, 0)] * (c.ndim - 2) + [(1, 0), (1, 0)])
        return (c[..., k:, k:] - c[..., :-k, k:] - c[..., k:, :-k] + c[..., :-k, :-k]) / (k * k)

    ma, mb = mean(a), mean(b)
    unbias = k * k / (k * k - 1) if k > 1 else 1.0
    va, vb = unbias * (mean(a * a) - ma ** 2), unbias * (mean(b * b) - mb ** 2)
    cov = unbias * (mean(a * b) - ma * mb)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = ((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma ** 2 + mb ** 2 + c1) * (va + vb + c2))
    s = np.where(span > 0, s, 1.0)  # two equal constant maps
    return s.mean(axis=(-2, -1))


def random_logit(model: Model, x: Array, method: MethodLike, seed: Any = None, *,
                 others: Optional[Sequence[int]] = None, rng: Optional[np.random.Generator] = None,
                 absolute: bool = True) -> Array:
    """Random logit (Sixt et al. 2020, "When explanations lie"): the SSIM (`ssim`) of the importance
    of the map of the seed's class (default: the predicted one) and of a random other class, both
    maps from one backward pass (K = 2 batched seeds); a map that explains the class, not the
    image, differs between the two (lower is better). Needs a classifier. `others`: the other
    class per image (default: drawn uniformly among the other classes). `absolute`: compare
    |map| summed over channels (else the signed sum)."""
    call = Call(model, x)
    y = call.forward(call.x)
    if y.ndim != 2:
        raise InputError(f"random_logit needs a classifier's output (N, classes); the model's output has shape "
                         f"{y.shape}")
    seed, v = resolve(seed, y, model)
    if seed.count is not None or not np.all(np.isclose(v.sum(axis=1), 1)) or not np.all((v == 0) | (v == 1)):
        raise InputError("random_logit needs one class per image (a one_hot() or predicted() seed)")
    k, n_classes = v.argmax(axis=1), y.shape[1]
    if n_classes < 2:
        raise InputError("random_logit needs a classifier of at least 2 classes")
    if others is None:
        draw = _rng(rng).integers(0, n_classes - 1, len(k))
        other = draw + (draw >= k)
    else:
        other = np.asarray(others, np.int64).reshape(-1)
    if other.shape != k.shape or np.any(other == k) or np.any((other < 0) | (other >= n_classes)):
        raise ValueError(f"others must hold one class per image, each in 0..{n_classes - 1} and not the "
                         f"seed's, got {np.asarray(other).tolist()}")
    maps = _maps_of(method, model, call.x, _seeds.classes([tuple(k.tolist()), tuple(other.tolist())]))
    maps = np.abs(maps) if absolute else maps
    imp = maps.sum(axis=2)  # (2, N, H, W)
    out = ssim(imp[0], imp[1])
    return _unbatch(call, out)[0]


# --- the declarations ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metric:
    """One metric as `saliency evaluate` runs it on a batch of a store's images.

    name: its --metrics name. about: two lines on what it says. function: the function whose
    keywords `options` (registry.Option) name, and whose defaults are the options' defaults.
    needs: what it needs beyond the model, the images and their maps: "method" (the store's
    method makes more maps), "masks" (ground truth), "classifier". columns: (field, label, better)
    of its numbers per image, better "lower" or "higher". curves: (field, label) of its curves
    per image, over `points(options, pixels)`. sample: runs on the first images only, not per batch
    (the randomisation check, which evaluate runs itself). compute(batch, options): the fields
    (columns and curves) of a `MetricBatch`, one row per image.
    """

    name: str
    about: str
    function: Callable[..., Any]
    options: tuple[Option, ...]
    needs: tuple[str, ...]
    columns: tuple[tuple[str, str, str], ...]
    compute: Optional[Callable[[MetricBatch, dict[str, Any]], dict[str, Array]]] = None
    curves: tuple[tuple[str, str], ...] = ()
    points: Optional[Callable[[dict[str, Any], int], Array]] = None
    sample: bool = False

    def defaults(self) -> dict[str, Any]:
        """{option name: its default}: the defaults of `function`'s keywords that `options` name."""
        signature = inspect.signature(self.function).parameters
        return {o.name: signature[o.name].default for o in self.options}

    def options_text(self, name: str, value: Any) -> Any:
        """An option's value as its command line and a report show it (a number or a text)."""
        text = next((o.text for o in self.options if o.name == name), None)
        return text(value) if callable(text) else value

    def check(self, given: Optional[dict[str, Any]]) -> dict[str, Any]:
        """The options with `given` (name -> value) over the defaults; OptionError naming one it does not have."""
        known = {o.name: o for o in self.options}
        out = self.defaults()
        for name, value in (given or {}).items():
            if name not in known:
                have = ", ".join(known) or "none"
                raise OptionError(f"metric {self.name} has no option {name!r} (its options: {have})")
            out[name] = known[name].check(value)
        return out


@dataclass
class MetricBatch:
    """What a metric sees of one batch of a store: the model, the images x (n, C, H, W), their maps
    (n, C', H, W) as stored, `sign` ("abs": importance from |map|), the seed, `method(model, x,
    seed)` (the store's method with its options, or None), masks (n, H, W) bool or None, and the
    batch's random generator."""

    model: Model
    x: Array
    maps: Array
    sign: str
    seed: Any
    method: Optional[MethodLike]
    masks: Optional[Array]
    rng: np.random.Generator

    @property
    def judged(self) -> Array:
        """The maps whose importance the metrics order and sum: |map| with sign "abs"."""
        return np.abs(self.maps) if self.sign == "abs" else self.maps

    def needs_method(self) -> MethodLike:
        """The store's method, for a metric that makes more maps; InputError when it was not given."""
        if self.method is None:
            raise InputError("this metric makes maps with the store's method, which was not given")
        return self.method

    def needs_masks(self) -> Array:
        """The ground-truth masks (n, H, W), for a metric that needs them; InputError when none were given."""
        if self.masks is None:
            raise InputError("this metric needs ground-truth masks (masks=)")
        return self.masks


def _deletion_insertion(b: MetricBatch, o: dict[str, Any]) -> dict[str, Array]:
    c = deletion_insertion(b.model, b.x, b.judged, b.seed, steps=o["steps"])
    return {"deletion_auc": c.deletion_auc, "insertion_auc": c.insertion_auc, "deletion": c.deletion,
            "insertion": c.insertion}


def _road(b: MetricBatch, o: dict[str, Any]) -> dict[str, Array]:
    r = road(b.model, b.x, b.judged, b.seed, fractions=o["fractions"], noise=o["noise"], rng=b.rng)
    return {"road_morf": r.morf_mean, "road_lerf": r.lerf_mean, "road_morf_curve": r.morf, "road_lerf_curve": r.lerf}


def _max_sensitivity(b: MetricBatch, o: dict[str, Any]) -> dict[str, Array]:
    return {"max_sensitivity": max_sensitivity(b.model, b.x, b.needs_method(), b.seed, attribution=b.maps,
                                               radius=o["radius"], samples=o["samples"], rng=b.rng)}


def _infidelity(b: MetricBatch, o: dict[str, Any]) -> dict[str, Array]:
    return {"infidelity": infidelity(b.model, b.x, b.maps, b.seed, perturbation=o["perturbation"], scale=o["scale"],
                                     samples=o["samples"], normalize=o["normalize"], rng=b.rng)}


def _random_logit(b: MetricBatch, o: dict[str, Any]) -> dict[str, Array]:
    return {"random_logit": random_logit(b.model, b.x, b.needs_method(), b.seed, rng=b.rng, absolute=b.sign == "abs")}


def _fractions(text: Union[str, Sequence[float]]) -> tuple[float, ...]:
    """ROAD's fractions from their command-line text, e.g. "0.1,0.5,0.9"."""
    if isinstance(text, (tuple, list)):
        values = tuple(float(t) for t in text)
    else:
        values = tuple(float(t) for t in str(text).split(",") if t.strip())
    if not values or not all(0 <= f < 1 for f in values):
        raise ValueError("fractions in [0, 1), comma-separated")
    return values


def _fractions_text(values: Sequence[float]) -> str:
    return ",".join(f"{f:g}" for f in values)


def _steps_points(options: dict[str, Any], pixels: int) -> Array:
    return np.rint(np.arange(options["steps"] + 1) * pixels / options["steps"]) / pixels


def _road_points(options: dict[str, Any], pixels: int) -> Array:
    return np.rint(np.asarray(options["fractions"]) * pixels) / pixels


_SAMPLES = Option("samples", int, "perturbed copies of each image", minimum=1)

METRICS = {m.name: m for m in (
    Metric("deletion_insertion",
           "The seed's output as the most important pixels are removed (deletion: lower is better) or inserted into\n"
           "a blank image (insertion: higher is better), as areas under the curves (Petsiuk et al. 2018).",
           deletion_insertion, (),
           (), (("deletion_auc", "deletion AUC", "lower"), ("insertion_auc", "insertion AUC", "higher")),
           _deletion_insertion, (("deletion", "deletion"), ("insertion", "insertion")), _steps_points),
    Metric("randomisation",
           "Spearman correlation of the map with the maps after randomising the layers top down, on the first\n"
           "images (Adebayo et al. 2018): a map that depends on the model falls towards 0.",
           randomisation_check, (), ("method",), (),
           sample=True),
    Metric("road",
           "ROAD (Rong et al. 2022): the seed's output with the most (MoRF, lower is better) or least (LeRF, higher\n"
           "is better) relevant pixels removed and filled by noisy linear imputation, over the fractions removed.",
           road, (Option("fractions", _fractions, "fractions of the pixels removed", text=_fractions_text),
                  Option("noise", float, "standard deviation of the imputation's noise", minimum=0)),
           (), (("road_morf", "ROAD MoRF", "lower"), ("road_lerf", "ROAD LeRF", "higher")), _road,
           (("road_morf_curve", "ROAD MoRF"), ("road_lerf_curve", "ROAD LeRF")), _road_points),
    Metric("max_sensitivity",
           "Max-sensitivity (Yeh et al. 2019): the largest relative change of the map under uniform input noise\n"
           "of radius r; lower is better (a map stable where the model is).",
           max_sensitivity, (Option("radius", float, "the noise's radius", minimum=0), _SAMPLES),
           ("method",), (("max_sensitivity", "max-sensitivity", "lower"),), _max_sensitivity),
    Metric("infidelity",
           "Infidelity (Yeh et al. 2019, as Captum defines it): the mean squared error of the map's linear\n"
           "prediction of the output's change under perturbations; lower is better.",
           infidelity, (Option("perturbation", str, "gaussian noise or square removal",
                               choices=INFIDELITY_PERTURBATIONS),
                        Option("scale", float, "the gaussian noise's standard deviation", minimum=0), _SAMPLES,
                        Option("normalize", bool, "judge the map up to its best scale")),
           (), (("infidelity", "infidelity", "lower"),), _infidelity),
    Metric("pointing_game",
           "Pointing game (Zhang et al. 2018): whether the map's largest pixel lies on the object of the\n"
           "ground-truth mask; its mean is the share of hits (higher is better).",
           pointing_game, (), ("masks",), (("pointing_game", "pointing game", "higher"),),
           lambda b, o: {"pointing_game": np.asarray(pointing_game(b.judged, b.needs_masks()))}),
    Metric("relevance_mass",
           "Relevance mass accuracy (Arras et al. 2022): the share of the map's total that lies on the object\n"
           "of the ground-truth mask (higher is better).",
           relevance_mass, (), ("masks",), (("relevance_mass", "relevance mass", "higher"),),
           lambda b, o: {"relevance_mass": np.asarray(relevance_mass(b.judged, b.needs_masks()))}),
    Metric("random_logit",
           "Random logit (Sixt et al. 2020): SSIM of the map of the class and that of a random other class; a map\n"
           "that tells classes apart scores low (lower is better).",
           random_logit, (), ("method", "classifier"), (("random_logit", "random logit", "lower"),), _random_logit),
    Metric("sparseness",
           "Sparseness (Chalasani et al. 2020): the Gini index of |map|, towards 1 when the map is on a few\n"
           "pixels, 0 when spread evenly (higher: a more concentrated map).",
           sparseness, (), (), (("sparseness", "sparseness", "higher"),),
           lambda b, o: {"sparseness": np.asarray(sparseness(b.judged))}),
)}

DEFAULT = ("deletion_insertion", "randomisation")  # what `saliency evaluate` computes without --metrics


def parse_names(text: str) -> tuple[str, ...]:
    """The metric names of a --metrics value ("road,sparseness", "all"), in METRICS's order; an
    InputError naming an unknown one."""
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    if names == ["all"]:
        return tuple(METRICS)
    unknown = [t for t in names if t not in METRICS]
    if unknown or not names:
        raise InputError(f"--metrics takes names from: {', '.join(METRICS)} (or all), comma-separated; "
                         f"got {text!r}")
    return tuple(m for m in METRICS if m in names)
