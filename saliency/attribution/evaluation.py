"""Checks of an attribution: deletion/insertion curves (Petsiuk et al. 2018, RISE) and the cascading
model-parameter randomisation test (Adebayo et al. 2018, "Sanity checks for saliency maps")."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from ..autograd.tensor import Tensor
from ..kernels.memory import available_bytes, format_bytes
from ._core import Call, baseline_like, resolve, tile, weighted
from .result import Attribution

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ..nn.module import Module
    from ._core import Model, Progress
    from .seeds import Seed

# A map: an array (N, C', H, W) or (C', H, W), a Tensor, or a method's Attribution.
MapLike = Union[np.ndarray, Tensor, Attribution]


@dataclass(repr=False)
class DeletionInsertion:
    """Deletion and insertion curves of one attribution map per image.

    fractions: (steps + 1,) fraction of the pixels removed (deletion) or inserted (insertion).
    deletion, insertion: ([N,] steps + 1) seed-weighted output sum(v * f(x')) at each fraction.
    deletion_auc, insertion_auc: ([N,]) areas under the curves (trapezoid over fractions 0..1);
        a good map has a low deletion and a high insertion area.
    """

    fractions: np.ndarray
    deletion: np.ndarray
    insertion: np.ndarray
    deletion_auc: np.ndarray
    insertion_auc: np.ndarray
    seed: Any  # the resolved Seed
    seconds: float

    def __repr__(self) -> str:
        return (f"DeletionInsertion({len(self.fractions) - 1} steps, seed='{self.seed}', "
                f"deletion_auc={np.round(self.deletion_auc, 4)}, insertion_auc={np.round(self.insertion_auc, 4)})")


@dataclass(repr=False)
class RandomisationCheck:
    """The cascading randomisation test: one map per step, each step randomising one more layer.

    layers: names of the parametrised layers (named_modules), top (output side) first, in the order
        they were randomised.
    correlations: (len(layers), ...) Spearman rank correlation between the original map and the map
        after each step, of |map| summed over channels, per image (and seed).
    original: the Attribution of the unchanged model; maps: the map after each step.
    """

    layers: list[str]
    correlations: np.ndarray
    original: Attribution
    maps: list[np.ndarray] = field(default_factory=list)

    def __repr__(self) -> str:
        steps = ", ".join(f"{n}: {np.round(c, 3)}" for n, c in zip(self.layers, self.correlations))
        return f"RandomisationCheck({steps})"


def deletion_insertion(model: Model, x: TensorLike, attribution: MapLike, seed: Optional[Seed] = None, *,
                       steps: int = 32, baseline: Any = 0.0, batch: Optional[int] = None,
                       progress: Optional[Progress] = None) -> DeletionInsertion:
    """Remove (deletion) or insert (insertion) pixels in order of importance and follow the output.

    A pixel's importance is the sum over channels of the attribution map (signed: pass
    np.abs(map) to order by magnitude); the most important come first, ties in row-major order. A
    removed pixel takes the baseline's values in all channels (a number, or an array broadcasting
    to x); deletion starts at x, insertion at the baseline. At fraction j/steps, round(j*H*W/steps)
    pixels are changed. The score is sum(v * model(x')) with v the seed resolved at x (default:
    the attribution's seed, else the method's default). More steps than the H*W pixels only repeat
    fractions. `batch`: images per forward pass (default: the methods' input budget). `progress(done, total)`
    is called after each forward pass, counting the 2 * (steps + 1) changed copies of x.
    """
    call = Call(model, x)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    amap = _map_of(attribution, call)
    need = 8 * (steps + 1) * (3 + 2 * call.n)  # the step counts, fractions and scores
    available = available_bytes()
    if available is not None and need > available:
        raise ValueError(f"steps {steps} needs {format_bytes(need)} for its curves, more than the "
                         f"{format_bytes(available)} available; more steps than pixels add nothing")
    if seed is None and isinstance(attribution, Attribution):
        seed = attribution.seed
    seed, v = resolve(seed, call.forward(call.x), model)
    if seed.count is not None:
        raise ValueError(f"deletion_insertion takes one seed, got {seed.count} batched seeds; "
                         f"pass one of them and its map")
    xs, base = call.x, baseline_like(baseline, call.x)
    n, pixels = xs.shape[0], xs.shape[2] * xs.shape[3]
    importance = amap.sum(axis=1, dtype=np.float64).reshape(n, pixels)
    rank = np.empty((n, pixels), dtype=np.int64)
    np.put_along_axis(rank, np.argsort(-importance, axis=1, kind="stable"), np.arange(pixels)[None], axis=1)
    counts = np.rint(np.arange(steps + 1) * pixels / steps).astype(np.int64)

    def image(j: int) -> np.ndarray:  # copy j: deletion steps 0..steps, then insertion steps 0..steps
        changed = (rank < counts[j % (steps + 1)]).reshape(n, 1, *xs.shape[2:])
        return np.where(changed, base, xs) if j <= steps else np.where(changed, xs, base)

    copies = 2 * (steps + 1)
    per = call.chunk(batch, copies)
    scores = np.empty((copies, n))
    for j0 in range(0, copies, per):
        js = range(j0, min(j0 + per, copies))
        y = call.forward(np.concatenate([image(j) for j in js]))
        scores[js.start:js.stop] = weighted(y, tile(v, len(js), False), False).reshape(len(js), n)
        if progress is not None:
            progress(js.stop, copies)
    fractions = counts / pixels
    deletion, insertion = scores[:steps + 1].T, scores[steps + 1:].T
    areas: list[Any] = [np.trapezoid(c, fractions, axis=-1) for c in (deletion, insertion)]
    if call.unbatched:
        deletion, insertion, areas = deletion[0], insertion[0], [float(a[0]) for a in areas]
    return DeletionInsertion(fractions, deletion, insertion, areas[0], areas[1], seed,
                             time.perf_counter() - call.t0)


def _map_of(attribution: MapLike, call: Call) -> np.ndarray:
    """The map as (N, C', H, W) float64 with x's batch and spatial size (C' may differ from x's C)."""
    a = attribution.map if isinstance(attribution, Attribution) else attribution
    a = np.asarray(a._array if isinstance(a, Tensor) else a, dtype=np.float64)
    given, want = a.shape, call.x.shape[2:]
    if a.ndim == call.x.ndim - call.unbatched + 1:
        raise ValueError(f"attribution map of shape {a.shape} holds several seeds' maps; pass one of them "
                         f"(map[k]) and its seed")
    a = a[None] if call.unbatched and a.ndim == 3 else a
    if a.ndim != 4 or a.shape[0] != call.n or a.shape[2:] != want:
        raise ValueError(f"attribution map of shape {given} does not fit the input of shape "
                         f"{call.x.shape[call.unbatched:]}; it needs the input's batch size and map size {want}")
    return a


def randomisation_check(model: Module, x: TensorLike, method: Callable[..., Attribution], seed: Optional[Seed] = None,
                        *, rng: Optional[np.random.Generator] = None) -> RandomisationCheck:
    """Cascading randomisation (Adebayo et al. 2018): from the top layer down, re-draw one more
    parametrised layer and recompute `method(model, x, seed)`; a map that depends on the model
    decorrelates. Each parameter of a layer is re-drawn from N(0, rms^2), rms its root mean square.

    Layers are the modules holding parameters of their own, ordered by when their forward finishes
    in one pass over x (last = top); modules the pass does not call are left alone. The seed is
    fixed at the original model's (e.g. its predicted class). `rng`: np.random.Generator (default
    np.random.default_rng(0)). The original weights, and the buffers (batch-norm statistics, which a
    model in training mode updates), are put back afterwards, also when `method` raises. The
    weights are changed in place meanwhile: do not use `model` in another thread during the check
    (run it on a copy, e.g. a model built again with the same state dict).
    """
    if not callable(getattr(model, "named_modules", None)):
        raise TypeError(f"model must be a saliency.nn.Module (its layers are randomised), got {type(model).__name__}")
    rng = np.random.default_rng(0) if rng is None else rng
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be an np.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    saved = [(p, p._array) for p in model.parameters()]
    stats = [(b, b._array.copy()) for b in model.buffers()]  # a model in training mode updates them
    maps: list[np.ndarray] = []
    correlations: list[np.ndarray] = []
    try:
        layers = _layers_top_down(model, x)
        if not layers:
            raise ValueError("model has no layer with parameters that its forward pass calls; nothing to randomise")
        original = _run(method, model, x, seed)
        reference = _reduce(original.map)
        for _, layer in layers:
            for p in layer.parameters(recurse=False):
                rms = np.sqrt(np.mean(np.square(p._array, dtype=np.float64)))
                p._array = (rms * rng.standard_normal(p.shape)).astype(p.dtype)
            m = _run(method, model, x, original.seed).map
            maps.append(m)
            correlations.append(spearman(reference, _reduce(m)))
    finally:
        for p, data in saved:
            p._array = data
        for b, data in stats:
            b._array[...] = data
            b._written()
    return RandomisationCheck([name for name, _ in layers], np.array(correlations), original, maps)


def _run(method: Callable[..., Any], model: Model, x: TensorLike, seed: Optional[Seed]) -> Attribution:
    out = method(model, x, seed)
    if not isinstance(out, Attribution):
        raise TypeError(f"method must return an Attribution (a saliency.attribution method), got {type(out).__name__}")
    return out


def _layers_top_down(model: Module, x: TensorLike) -> list[tuple[str, Module]]:
    """(name, module) of each parametrised module in the order a forward pass calls them, reversed."""
    names = {id(m): name or type(m).__name__ for name, m in model.named_modules()}
    owners = [m for _, m in model.named_modules() if next(iter(m.parameters(recurse=False)), None) is not None]
    called: list[Module] = []
    handles: list[Any] = []
    here = threading.get_ident()  # calls of the model from other threads are not this pass's
    for m in owners:
        handles.append(m.register_forward_hook(
            lambda mod, inputs, output: called.append(mod) if threading.get_ident() == here else None))
    try:
        call = Call(model, x)
        call.forward(call.x)
    finally:
        for h in handles:
            h.remove()
    order = list({id(m): m for m in called}.values())  # first call of each, in order
    return [(names[id(m)], m) for m in reversed(order)]


def _reduce(amap: Any) -> np.ndarray:
    """|map| summed over channels, flattened per map: (..., H*W)."""
    a = np.abs(np.asarray(amap, dtype=np.float64)).sum(axis=-3)
    return a.reshape(a.shape[:-2] + (-1,))


def ranks(a: Any) -> np.ndarray:
    """Ranks 1..n along the last axis, ties given their average rank."""
    a = np.asarray(a)
    flat = a.reshape(-1, a.shape[-1])
    out = np.empty(flat.shape)
    for row, dst in zip(flat, out):
        order = np.argsort(row, kind="stable")
        s = row[order]
        new = np.r_[True, s[1:] != s[:-1]]
        starts = np.flatnonzero(new)
        ends = np.r_[starts[1:], len(s)]
        dst[order] = ((starts + ends + 1) / 2)[np.cumsum(new) - 1]
    return out.reshape(a.shape)


def spearman(a: Any, b: Any) -> np.ndarray:
    """Spearman's rank correlation of a and b along the last axis (average ranks for ties); NaN where
    either is constant."""
    ra, rb = ranks(a), ranks(b)
    ra = ra - ra.mean(axis=-1, keepdims=True)
    rb = rb - rb.mean(axis=-1, keepdims=True)
    den = np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ra * rb).sum(axis=-1) / np.where(den > 0, den, 1), np.nan)
