"""The metrics of every map of a store (`metrics.METRICS`: by default the deletion and insertion
curves), and the randomisation check on a sample (`evaluate`, exported as
`attribution.evaluate_store`).

The numbers of one batch of the store depend on that batch alone: its images, read again as
`pipeline.batch` read them, its maps, its masks, and random draws seeded by the batch's index and
the metric. `batch_scores` computes them for some of the store's batches (the images read ahead on
a thread, as in `pipeline.batch`); `evaluate` runs it on every batch, or takes the scores that ran
elsewhere (`curves=`, e.g. on Dask workers), and puts them in the store's order. Both ways give
the same numbers.
"""
from __future__ import annotations

import contextlib
from collections import namedtuple
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import numpy as np

from ._core import InputError
from . import metrics as _metrics
from . import registry
from .masks import Masks
from .seeds import Seed, parse
from .sources import BatchReader, ImageSource, checked_preprocess
from .evaluation import randomisation_check
from .seeds import SeedError
from .store import MapStore, StoreError, open_store
from .store_lock import acquire

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Iterator

    from ..nn.module import Module
    from ._core import Model, Progress

# The numbers of the maps to evaluate in batch `batch` of a store: `rows`, their images' indices in
# the store; `values`, each metric's fields (metrics.Metric: columns and curves), one row per image.
BatchScores = namedtuple("BatchScores", "batch rows values")


@dataclass(repr=False)
class StoreEvaluation:
    """The metrics of every map of a store, and the randomisation check on a sample.

    files: the images evaluated (the store's done images without an error), in the store's order.
    metrics: the names evaluated (`metrics.METRICS`); options: each one's options. values: each
    metric's fields (its columns (images,) and curves (images, points)); points: the fraction of
    the pixels changed at each point of a curve field. layers, correlations: the cascading
    randomisation check on the first `sample` of those images (correlations: (layers, sample)),
    or [] and None. The deletion and insertion fields are attributes too (`fractions`,
    `deletion`, `insertion`, `deletion_auc`, `insertion_auc`; None when not evaluated).
    """

    method: str
    seed: str
    files: list[str]
    metrics: tuple[str, ...]
    options: dict[str, dict[str, Any]]
    values: dict[str, np.ndarray]
    points: dict[str, np.ndarray]
    layers: list[str]
    correlations: Optional[np.ndarray]

    @property
    def fractions(self) -> Optional[np.ndarray]:
        """The fraction of the pixels changed at each point of the deletion and insertion curves, or None."""
        return self.points.get("deletion")

    def __getattr__(self, name: str) -> Any:
        if name in ("deletion", "insertion", "deletion_auc", "insertion_auc"):
            return self.__dict__.get("values", {}).get(name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        shown = [f"{label} {np.nanmean(self.values[field]):.4f}" for m in self.metrics
                 for field, label, _ in _metrics.METRICS[m].columns if len(self.files)]
        return f"StoreEvaluation({self.method}, {len(self.files)} images" + "".join(": " + ", ".join(shown)) + ")"


# What `_checked` finds: the store opened, the seed its maps were made with, its images, which of
# its maps can be evaluated, the metrics (names, options), the store's method and the masks.
_Checked = namedtuple("_Checked", "store seed source usable metrics options method masks")


def _checked(model: Model, store: MapStore | str | os.PathLike[str], images: Any, sign: str, seed: Seed | str | None,
             metrics: str | Iterable[str] = _metrics.DEFAULT,
             metric_options: Optional[dict[str, dict[str, Any]]] = None, masks: Any = None,
             steps: int = 16) -> _Checked:
    """_Checked(store, seed, images, usable, ...): the store opened, the seed its maps were made with, its
    images (`sources.ImageSource`), which of its maps can be evaluated (done, without an error), the
    metrics with their checked options, the store's method (for the metrics that make maps) and
    the masks (`masks.Masks`, for the metrics that need them). A batch marked done whose chunks are
    not whole is a StoreError naming it: its maps are not evaluated as if they were missing, nor
    read as NaN."""
    store = open_store(store) if not isinstance(store, MapStore) else store
    damaged = store.damaged
    if damaged:
        raise StoreError(store.damage_message(damaged))
    if len(store.map_shape) != 3:
        raise InputError(f"evaluate takes one map per image; the maps of {store.path} are "
                         f"{store.map_shape} per image (K seeds at once)")
    if sign not in ("abs", "all"):
        raise InputError(f"sign must be 'abs' or 'all', got {sign!r}")
    if seed is None and store.attrs.get("seed") != "default":
        if not store.attrs.get("seed_spec"):
            raise InputError(f"the maps of {store.path} were made with seed {store.attrs.get('seed')!r}; "
                             f"pass the seed they were made with (seed=)")
        try:
            seed = parse(store.attrs["seed_spec"])
        except SeedError as exc:  # not a seed this version reads: a damaged store (or a newer one)
            raise StoreError(f"the map store {store.path} records its seed as {store.attrs['seed_spec']!r}, which "
                             f"cannot be read ({exc}); pass the seed the maps were made with (seed=)") from None
    preprocess = None if isinstance(images, np.ndarray) else stored_preprocess(store)
    source = ImageSource(model, store.files if images is None else images, preprocess)
    if len(source) != len(store):
        raise InputError(f"{len(source)} images given for the {len(store)} maps of {store.path}")
    if tuple(store.map_shape[1:]) != tuple(source.shape[1:]):
        raise InputError(f"the maps of {store.path} are {store.map_shape} per image, the images {source.shape}; "
                         f"evaluate them with the model (and images) that made them")
    seed = parse(seed) if isinstance(seed, str) else seed
    if seed is not None and not isinstance(seed, Seed):
        raise TypeError(f"seed must be a seed object or its command-line form, got {type(seed).__name__}")
    names, options = _metric_plan(metrics, metric_options, steps)
    needs = {need: [m for m in names if need in _metrics.METRICS[m].needs] for need in ("method", "masks")}
    method: Optional[Callable[..., Any]] = None
    per_batch = [m for m in needs["method"] if not _metrics.METRICS[m].sample]
    if per_batch:
        method = _store_method(store, per_batch[0])
    if needs["masks"] and masks is None:
        raise InputError(f"{' and '.join(needs['masks'])} need{'s' if len(needs['masks']) == 1 else ''} "
                         f"ground-truth masks: a folder of mask images named after the images (--masks FOLDER)")
    usable = store.done & np.array([not e for e in store.errors], bool)
    found = None
    if needs["masks"]:
        found = Masks(masks, store.files, store.map_shape[1:], source.preprocess, needed=usable)
    return _Checked(store, seed, source, usable, names, options, method, found)


def _metric_plan(metrics: str | Iterable[str], metric_options: Optional[dict[str, dict[str, Any]]],
                 steps: int) -> tuple[tuple[str, ...], dict[str, dict[str, Any]]]:
    """(the metric names in METRICS's order, {name: its checked options}); deletion and insertion
    take `steps`."""
    names = _metrics.parse_names(metrics) if isinstance(metrics, str) else tuple(metrics)
    unknown = [m for m in names if m not in _metrics.METRICS]
    if unknown or not names:
        raise InputError(f"metrics must name some of {', '.join(_metrics.METRICS)}, got {list(names)!r}")
    given = dict(metric_options or {})
    for name in given:
        if name not in names:
            raise InputError(f"options given for the metric {name}, which is not evaluated "
                             f"(metrics: {', '.join(names)})")
    options = {m: _metrics.METRICS[m].check(given.get(m)) for m in names}
    if "deletion_insertion" in options:  # its one option is evaluate's own keyword (--steps)
        options["deletion_insertion"]["steps"] = steps
    return tuple(m for m in _metrics.METRICS if m in names), options


def _store_method(store: MapStore, metric: str) -> Callable[..., Any]:
    """`method(model, x, seed)`: the store's method with the options its run recorded (for a metric
    that makes maps), or InputError."""
    name = store.attrs.get("method")
    if name not in registry.METHODS:
        raise InputError(f"{metric} makes maps with the store's method, and {store.path} records "
                         f"{name!r}, which is not a method of this version")
    method = registry.get(name)
    options = method.restore(store.attrs.get("options"))
    return lambda m, x, s: method.function(m, x, s, **options)


def stored_preprocess(store: MapStore) -> Any:
    """The `viz.Preprocess` that read the images of `store`'s maps (its attribute "preprocess"), or
    None; a StoreError when the record cannot be read."""
    record = store.attrs.get("preprocess")
    if record is None:
        return None
    try:
        return checked_preprocess(record)
    except ValueError as exc:
        raise StoreError(f"the map store {store.path} records a preprocessing that cannot be read ({exc})") from None


def check(model: Model, store: MapStore | str | os.PathLike[str], *, images: Any = None, sign: str = "abs",
          seed: Seed | str | None = None, metrics: str | Iterable[str] = _metrics.DEFAULT,
          metric_options: Optional[dict[str, dict[str, Any]]] = None,
          masks: Any = None, steps: int = 16) -> None:
    """Raise the InputError `evaluate` would raise for these arguments before computing any curve
    (for a caller that computes them elsewhere: the error here, not on every worker)."""
    _checked(model, store, images, sign, seed, metrics, metric_options, masks, steps)


def batch_scores(model: Model, store: MapStore | str | os.PathLike[str], batches: Iterable[int], *,
                 images: Any = None, steps: int = 16, sign: str = "abs", seed: Seed | str | None = None,
                 metrics: str | Iterable[str] = _metrics.DEFAULT,
                 metric_options: Optional[dict[str, dict[str, Any]]] = None, masks: Any = None, random_seed: int = 0,
                 progress: Optional[Progress] = None) -> list[BatchScores]:
    """The metrics of the maps of `store`'s batches `batches` (indices), as `evaluate` computes
    them: a BatchScores per batch holding a map to evaluate whose image reads again, in the order
    of `batches`. The other arguments are evaluate's; `progress(done, total)` is called after each
    batch."""
    checked = _checked(model, store, images, sign, seed, metrics, metric_options, masks, steps)
    return _scores(model, checked, batches, sign, random_seed, progress)


def _scores(model: Model, checked: _Checked, batches: Iterable[int], sign: str, random_seed: int,
            progress: Optional[Progress]) -> list[BatchScores]:
    """`batch_scores` on what `_checked` found."""
    store, seed, source, usable = checked[:4]
    batch_size, n = store.batch_size, len(store)
    todo = [k for k in batches if usable[k * batch_size:(k + 1) * batch_size].any()]
    out: list[BatchScores] = []
    reader = BatchReader(source, todo, batch_size)
    reader.start()
    try:
        for k, x, read_errors in reader.batches():
            a = k * batch_size
            keep = usable[a:a + len(x)] & np.array([not e for e in read_errors], bool)
            if keep.any():
                maps = np.asarray(store.batch_maps(k), np.float64)[keep]
                bad = ~np.isfinite(maps.reshape(len(maps), -1)).all(axis=1)
                if bad.any():
                    name = store.files[a + np.flatnonzero(keep)[np.argmax(bad)]]
                    raise StoreError(f"the map store {store.path} is damaged: the map of {name} (batch {k}) holds "
                                     f"NaN or infinite values, though its batch is done without an error; make "
                                     f"the store again (saliency batch without --resume)")
                rows = np.flatnonzero(keep) + a
                out.append(BatchScores(k, rows, _batch_values(k, rows, model, x[keep], maps, sign, checked,
                                                              random_seed)))
            if progress is not None:
                progress(min(n, a + len(x)), n)
    finally:
        reader.stop.set()
    return out


def _batch_values(k: int, rows: np.ndarray, model: Model, x: np.ndarray, maps: np.ndarray, sign: str, checked: _Checked,
                  random_seed: int) -> dict[str, np.ndarray]:
    """Each metric's fields for batch k (its images x and maps at the store's `rows`), the random
    draws of metric j from np.random.default_rng([random_seed, k, j])."""
    masks = checked.masks.read(rows) if checked.masks is not None else None
    values: dict[str, np.ndarray] = {}
    for name in checked.metrics:
        metric = _metrics.METRICS[name]
        if metric.sample:
            continue
        j = list(_metrics.METRICS).index(name)
        batch = _metrics.MetricBatch(model, x, maps, sign, checked.seed, checked.method, masks,
                                     np.random.default_rng([random_seed, k, j]))
        computed = metric.compute(batch, checked.options[name])  # type: ignore[misc]  # a per-batch metric has one
        values.update({f: np.asarray(v) for f, v in computed.items()})
    return values


def evaluate(model: Model, store: MapStore | str | os.PathLike[str], *, images: Any = None, steps: int = 16,
             sample: int = 8, sign: str = "abs", seed: Seed | str | None = None, progress: Optional[Progress] = None,
             curves: Optional[Iterable[BatchScores]] = None, metrics: str | Iterable[str] = _metrics.DEFAULT,
             metric_options: Optional[dict[str, dict[str, Any]]] = None, masks: Any = None, random_seed: int = 0,
             **options: Any) -> StoreEvaluation:
    """The metrics `metrics` (names of `metrics.METRICS`, or their --metrics text; by default the
    deletion and insertion curves, `evaluation.deletion_insertion`, and the randomisation check)
    of every map of `store` (a MapStore or its path), its images read again a batch at a time as
    `batch` read them: pixels ordered by |map| with sign="abs", by the signed map with "all". The
    cascading randomisation check (`evaluation.randomisation_check`) runs the store's method on
    the first `sample` images. `metric_options`: {metric: {option: value}} over each metric's
    defaults (deletion and insertion take `steps`). `masks`: ground truth for the localisation
    metrics, a folder of mask images named after the images or a bool array (images, H, W)
    (`masks.Masks`). `random_seed`: the seed of every random draw (noise, perturbations, the
    random logit's class), per batch and metric. `seed`: the seed the maps were made with
    (default: the store's, from its command-line form; needed for a store made with a seed
    object). `images`: the images themselves (files or an array), for a store made from an array
    (default: its files). `options`: the method's options for the check (default: those the
    store records). `progress(done, total)` is called after each batch. `curves`: the
    `batch_scores` of every batch of the store, computed elsewhere with the same arguments, in
    any order (default: computed here).

    The store is read under its shared lock (`store_lock`): a store a run is writing is refused
    (StoreError naming the run), and no run replaces it meanwhile."""
    with _reading(store) as store:
        checked = _checked(model, store, images, sign, seed, metrics, metric_options, masks, steps)
        if curves is None:
            curves = _scores(model, checked, range(checked.store.batches), sign, random_seed, progress)
        return _evaluate(model, checked, curves, sample, options)


@contextlib.contextmanager
def _reading(store: MapStore | str | os.PathLike[str]) -> Iterator[MapStore]:
    """The store (a MapStore or its path) under a shared lock for the block, unless it holds one."""
    if not isinstance(store, MapStore):
        with open_store(store, lock="read") as opened:
            yield opened
    elif store.lock is not None:
        yield store
    else:
        with acquire(store.path, shared=True):
            yield store


def _evaluate(model: Model, checked: _Checked, curves: Iterable[BatchScores], sample: int,
              options: dict[str, Any]) -> StoreEvaluation:
    """`evaluate` of an open store, under its lock, with the scores of its batches."""
    store, seed, source, usable = checked[:4]
    curves = sorted(curves, key=lambda c: c.batch)
    for c, before in zip(curves[1:], curves):
        if c.batch == before.batch:
            raise InputError(f"curves holds batch {c.batch} twice; pass each batch's curves once")
    pixels = store.map_shape[-1] * store.map_shape[-2]
    points: dict[str, np.ndarray] = {}
    fields: dict[str, tuple[int, ...]] = {}
    for name in checked.metrics:
        metric = _metrics.METRICS[name]
        for field, _ in metric.curves:
            points[field] = metric.points(checked.options[name], pixels)  # type: ignore[misc]  # a curve's
            fields[field] = (len(points[field]),)
        fields.update({field: () for field, _, _ in metric.columns})
    for c in curves:
        if set(c.values) != set(fields):
            raise InputError(f"curves of batch {c.batch} hold {', '.join(sorted(c.values)) or 'nothing'}, not the "
                             f"fields of the metrics {', '.join(checked.metrics)}; compute them with the same metrics")
        for field, tail in fields.items():
            if c.values[field].shape[1:] != tail:
                raise InputError(f"curves of batch {c.batch} have {c.values[field].shape[1]} points of {field}, not "
                                 f"{tail[0]}; compute them with the same steps and options")
    rows = np.concatenate([c.rows for c in curves]) if curves else np.zeros(0, np.int64)
    values = {f: np.concatenate([c.values[f] for c in curves]) if curves else np.zeros((0,) + tail)
              for f, tail in fields.items()}
    layers: list[str] = []
    correlations: Optional[np.ndarray] = None
    name = store.attrs.get("method")
    if usable.any() and not curves:
        raise InputError(f"none of the images of {store.path} can be read again ({source.names[0]}, ...); "
                         f"pass them (images=)")
    if "randomisation" in checked.metrics and sample and len(rows) and name in registry.METHODS:
        method = registry.get(name)
        options = method.check(options) if options else method.restore(store.attrs.get("options"))
        x = np.stack([source.read(i, i + 1)[0][0] for i in rows[:sample]])
        check = randomisation_check(cast("Module", model), x,
                                    lambda m, xs, s: method.function(m, xs, s, **options), seed)
        layers, correlations = check.layers, check.correlations
    return StoreEvaluation(name, store.attrs.get("seed"), [store.files[i] for i in rows], checked.metrics,
                           checked.options, values, points, layers, correlations)
