"""Deletion and insertion curves of every map of a store, and the randomisation check on a sample
(`evaluate`, exported as `attribution.evaluate_store`).

The curves of one batch of the store depend on that batch alone: its images, read again as
`pipeline.batch` read them, and its maps. `batch_curves` computes them for some of the store's
batches (the images read ahead on a thread, as in `pipeline.batch`); `evaluate` runs it on every
batch, or takes the curves that ran elsewhere (`curves=`, e.g. on Dask workers), and puts them
in the store's order. Both ways give the same numbers.
"""
import contextlib
from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from ._core import InputError
from . import registry
from .seeds import Seed, parse
from .sources import BatchReader, ImageSource, checked_preprocess
from .evaluation import deletion_insertion, randomisation_check
from .seeds import SeedError
from .store import MapStore, StoreError, open_store
from .store_lock import acquire

# The curves of the maps to evaluate in batch `batch` of a store: `rows`, their images' indices in
# the store; fractions (steps + 1,); deletion, insertion (len(rows), steps + 1); the areas (len(rows),).
BatchCurves = namedtuple("BatchCurves", "batch rows fractions deletion insertion deletion_auc insertion_auc")


@dataclass(repr=False)
class StoreEvaluation:
    """Deletion and insertion curves of every map of a store, and the randomisation check on a sample.

    files: the images evaluated (the store's done images without an error), in the store's order.
    fractions: (steps + 1,); deletion, insertion: (images, steps + 1) seed-weighted outputs;
    deletion_auc, insertion_auc: (images,). layers, correlations: the cascading randomisation
    check on the first `sample` of those images (correlations: (layers, sample)), or [] and None.
    """

    method: str
    seed: str
    files: list
    fractions: np.ndarray
    deletion: np.ndarray
    insertion: np.ndarray
    deletion_auc: np.ndarray
    insertion_auc: np.ndarray
    layers: list
    correlations: object

    def __repr__(self):
        return (f"StoreEvaluation({self.method}, {len(self.files)} images: deletion AUC "
                f"{np.mean(self.deletion_auc):.4f}, insertion AUC {np.mean(self.insertion_auc):.4f})")


# What `_checked` finds: the store opened, the seed its maps were made with, its images and which
# of its maps can be evaluated.
_Checked = namedtuple("_Checked", "store seed source usable")


def _checked(model, store, images, sign, seed):
    """_Checked(store, seed, images, usable): the store opened, the seed its maps were made with, its images
    (`sources.ImageSource`) and which of its maps can be evaluated (done, without an error). A batch
    marked done whose chunks are not whole is a StoreError naming it: its maps are not evaluated
    as if they were missing, nor read as NaN."""
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
    return _Checked(store, seed, source, store.done & np.array([not e for e in store.errors], bool))


def stored_preprocess(store):
    """The `viz.Preprocess` that read the images of `store`'s maps (its attribute "preprocess"), or
    None; a StoreError when the record cannot be read."""
    record = store.attrs.get("preprocess")
    if record is None:
        return None
    try:
        return checked_preprocess(record)
    except ValueError as exc:
        raise StoreError(f"the map store {store.path} records a preprocessing that cannot be read ({exc})") from None


def check(model, store, *, images=None, sign="abs", seed=None):
    """Raise the InputError `evaluate` would raise for these arguments before computing any curve
    (for a caller that computes them elsewhere: the error here, not on every worker)."""
    _checked(model, store, images, sign, seed)


def batch_curves(model, store, batches, *, images=None, steps=16, sign="abs", seed=None, progress=None):
    """The deletion and insertion curves of the maps of `store`'s batches `batches` (indices), as
    `evaluate` computes them: a BatchCurves per batch holding a map to evaluate whose image reads
    again, in the order of `batches`. The other arguments are evaluate's; `progress(done, total)`
    is called after each batch."""
    return _curves(model, _checked(model, store, images, sign, seed), batches, steps, sign, progress)


def _curves(model, checked, batches, steps, sign, progress):
    """`batch_curves` on what `_checked` found."""
    store, seed, source, usable = checked
    batch_size, n = store.batch_size, len(store)
    todo = [k for k in batches if usable[k * batch_size:(k + 1) * batch_size].any()]
    out = []
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
                within = None if progress is None else (  # a batch of many steps takes long: its share too
                    lambda done, total, a=a, size=len(x): progress(min(n, a + size * done // total), n))
                out.append(_batch_curves(k, np.flatnonzero(keep) + a, model, x[keep],
                                         np.abs(maps) if sign == "abs" else maps, seed, steps, within))
            if progress is not None:
                progress(min(n, a + len(x)), n)
    finally:
        reader.stop.set()
    return out


def _batch_curves(k, rows, model, x, maps, seed, steps, progress=None):
    """The BatchCurves of batch k (its images x and maps at the store's `rows`): deletion_insertion
    of the batch; `progress(done, total)` follows its forward passes."""
    c = deletion_insertion(model, x, maps, seed, steps=steps, progress=progress)
    return BatchCurves(k, rows, c.fractions, c.deletion, c.insertion, c.deletion_auc, c.insertion_auc)


def evaluate(model, store, *, images=None, steps=16, sample=8, sign="abs", seed=None, progress=None, curves=None,
             **options):
    """Deletion and insertion curves (`evaluation.deletion_insertion`, pixels ordered by |map| with
    sign="abs", by the signed map with "all") of every map of `store` (a MapStore or its path),
    its images read again a batch at a time as `batch` read them; and the cascading randomisation
    check (`evaluation.randomisation_check`) of its method on the first `sample` images. `seed`:
    the seed the maps were made with (default: the store's, from its command-line form; needed
    for a store made with a seed object). `images`: the images themselves (files or an array),
    for a store made from an array (default: its files). `options`: the method's options for the
    check (default: those the store records). `progress(done, total)` is called after each batch. `curves`: the
    `batch_curves` of every batch of the store, computed elsewhere, in any order (default:
    computed here).

    The store is read under its shared lock (`store_lock`): a store a run is writing is refused
    (StoreError naming the run), and no run replaces it meanwhile."""
    with _reading(store) as store:
        checked = _checked(model, store, images, sign, seed)
        if curves is None:
            curves = _curves(model, checked, range(checked.store.batches), steps, sign, progress)
        return _evaluate(model, checked, curves, steps, sample, options)


@contextlib.contextmanager
def _reading(store):
    """The store (a MapStore or its path) under a shared lock for the block, unless it holds one."""
    if not isinstance(store, MapStore):
        with open_store(store, lock="read") as opened:
            yield opened
    elif store.lock is not None:
        yield store
    else:
        with acquire(store.path, shared=True):
            yield store


def _evaluate(model, checked, curves, steps, sample, options):
    """`evaluate` of an open store, under its lock, with the curves of its batches."""
    store, seed, source, usable = checked
    curves = sorted(curves, key=lambda c: c.batch)
    for c, before in zip(curves[1:], curves):
        if c.batch == before.batch:
            raise InputError(f"curves holds batch {c.batch} twice; pass each batch's curves once")
    for c in curves:
        if len(c.fractions) != steps + 1:
            raise InputError(f"curves of batch {c.batch} have {len(c.fractions)} points, not steps + 1 = "
                             f"{steps + 1}; compute them with the same steps")
    rows = np.concatenate([c.rows for c in curves]) if curves else np.zeros(0, np.int64)
    empty = {"deletion": np.zeros((0, steps + 1)), "insertion": np.zeros((0, steps + 1)),
             "deletion_auc": np.zeros(0), "insertion_auc": np.zeros(0)}
    got = {f: np.concatenate([getattr(c, f) for c in curves]) if curves else e for f, e in empty.items()}
    layers, correlations = [], None
    name = store.attrs.get("method")
    if usable.any() and not curves:
        raise InputError(f"none of the images of {store.path} can be read again ({source.names[0]}, ...); "
                         f"pass them (images=)")
    if sample and len(rows) and name in registry.METHODS:
        method = registry.get(name)
        options = method.check(options) if options else method.restore(store.attrs.get("options"))
        x = np.stack([source.read(i, i + 1)[0][0] for i in rows[:sample]])
        check = randomisation_check(model, x, lambda m, xs, s: method.function(m, xs, s, **options), seed)
        layers, correlations = check.layers, check.correlations
    fractions = curves[0].fractions if curves else np.linspace(0, 1, steps + 1)
    return StoreEvaluation(name, store.attrs.get("seed"), [store.files[i] for i in rows], fractions,
                           got["deletion"], got["insertion"], got["deletion_auc"], got["insertion_auc"], layers,
                           correlations)
