"""Maps for a whole dataset: images streamed in batches through a model, raw maps into a store.

`batch(model, images, method, seed, out=FOLDER)` reads the images (`sources`: paths, decoded and
resized on a reader thread while the model works), computes each batch of `batch_size` images in
one method call, and writes each batch's maps into the store of `out` (`store.py`: maps.zarr, or
a folder of .npy chunks without Zarr) on a writer thread, with heatmap PNGs if
asked (`naming`). At most two batches wait on each side, so memory stays bounded whatever the
number of images. What a run computes is one value, a `Run` (`run.py`).

Batch k is always images k*B .. k*B + B - 1, computed together: a run that is interrupted and
continued (`resume=True`) computes every batch exactly as an uninterrupted run does, so the
stored maps are bit for bit the same. An image that cannot be read is recorded with its error
(its map is NaN) and the others go on; a batch on which the model fails is computed again one
image at a time, so that only the images it fails on are lost.
"""
from __future__ import annotations

import errno
import math
import queue
import threading
from collections import namedtuple
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..kernels.memory import available_bytes, format_bytes
from ._core import InputError, ModelError
from .naming import output_names, write_pngs
from .resume import prepared_store
from .run import Run
from .sources import QUEUED_BATCHES, BatchReader, ImageSource
from .store import MapStore, StoreError

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable

    from ._core import Model, Progress
    from .seeds import Seed

# The arrays `batch` returns when it writes no store.
BatchMaps = namedtuple("BatchMaps", "maps predicted errors")

# What a run computes on its images: the run, the images, one image's maps' shape, the store's
# attributes and the batch size (bounded by the images and the memory).
_Plan = namedtuple("_Plan", "run source map_shape attrs batch_size")


def _run_of(method: Any, seed: Seed | str | None, out: str | os.PathLike[str] | None, run: Optional[Run],
            parts: dict[str, Any]) -> Run:
    """The Run of a call: `run` as given, or built from the other arguments."""
    if run is None:
        return Run.build(method, seed, out=out, **parts)
    if method != "gradient" or seed is not None or out is not None or parts:
        raise TypeError("pass either run= or the method, seed, out and other parts of a run, not both")
    return run


def _plan(model: Model, images: Any, run: Run) -> _Plan:
    """What `run` computes on `images` with `model` (its preprocessing: the run's, or the model's)."""
    source = ImageSource(model, images, run.preprocess)
    if source.preprocess is not run.preprocess:
        run = replace(run, preprocess=source.preprocess)
    map_shape = run.map_shape(source.shape)
    batch_size = _bounded_batch(int(run.batch_size), len(source), source.shape, map_shape)
    return _Plan(run, source, map_shape, run.attrs(getattr(model, "classes", None)), batch_size)


def _bounded_batch(batch_size: int, n: int, image_shape: tuple[int, ...], map_shape: tuple[int, ...]) -> int:
    """`batch_size`, at most the number of images `n`; an InputError when the batches the pipeline
    holds at once (read ahead, computed, written) would not fit the memory available, images and
    maps alone (the model's activations come on top)."""
    batch_size = min(batch_size, max(n, 1))
    held = 2 * QUEUED_BATCHES + 2
    need = held * batch_size * 4 * (math.prod(image_shape) + math.prod(map_shape))
    available = available_bytes()
    if available is not None and need > available:
        fits = max(1, batch_size * available // need // 2)
        raise InputError(f"batch_size {batch_size} needs {format_bytes(need)} for the images and maps of the "
                         f"{held} batches held at once, and {format_bytes(available)} are available; use a batch "
                         f"size of at most {fits}")
    return batch_size


def batch(model: Model, images: Any, method: Any = "gradient", seed: Seed | str | None = None,
          out: str | os.PathLike[str] | None = None, *, run: Optional[Run] = None, progress: Optional[Progress] = None,
          **parts: Any) -> MapStore | BatchMaps:
    """Maps of every image, a batch of `batch_size` at a time.

    `images`: image files (read by the run's `preprocess`, else the model's `.preprocess`, else at
    the model's `input_shape`, or at the first image's size for a model without one), or an array
    (N, C, H, W), the model's input as it is. What to compute is a `Run`: `run=`, or its parts
    here: `method` (a name, a method function), `seed` (a seed or its command-line form; K seeds
    at once, e.g. seeds.classes([...]), make K maps per image, stored as an axis after the
    image's), `out`, and by name `batch_size`, `png`, `style`, `resume`, `use_zarr`, `record`,
    `preprocess` (a `viz.Preprocess`) and the method's options (`steps=`, `n=`, `layer=`, ...), all
    checked before any work.

    With `out` (a folder), the maps go into its store (out/maps.zarr, or out/maps without Zarr;
    `use_zarr` forces either) and the store is returned (`MapStore`: .maps, .predicted, .errors,
    .done, .files); with `png` (a folder), a heatmap PNG per map, drawn in `style` (a
    `viz.Style`). `resume=True` continues the store of an earlier run with the same images and
    options, computing only the batches not done. Without `out`, returns BatchMaps(maps,
    predicted, errors) as arrays. `record` (JSON values) is kept in the store's attributes;
    `progress(done, total)` is called after each batch.

    The store is locked while the run writes it (`store_lock`: another run, or an evaluation, is
    refused with a StoreError naming this process), a store already at its place is replaced only
    when this tool wrote it (`create_store`), and the store returned has been read back whole: a
    StoreError says which batches are not, and that `resume=True` computes them again."""
    run = _run_of(method, seed, out, run, parts)
    plan = _plan(model, images, run)
    n = len(plan.source)
    if run.out is None:
        result = BatchMaps(np.full((n,) + plan.map_shape, np.nan, np.float32), np.full(n, -1, np.int64), [""] * n)
        _run(model, plan, result, range(-(-n // plan.batch_size)), progress)
        return result
    store = prepared_store(run.out, plan.source.names, plan.map_shape, plan.batch_size, plan.attrs, run.resume,
                           run.use_zarr)
    with store:  # its lock: no other run writes it, no evaluation reads it meanwhile
        _run(model, plan, store, range(store.batches), progress)
        return store.check_whole()


def prepare(model: Model, images: Any, method: Any = "gradient", seed: Seed | str | None = None,
            out: str | os.PathLike[str] | None = None, *, run: Optional[Run] = None, **parts: Any) -> MapStore:
    """The store of a run (`run=` or its parts, as for `batch`), created empty (or with `resume`,
    the earlier run's, checked to be the same run), for runs whose batches are computed
    elsewhere (`fill`, e.g. on Dask workers). The store holds its lock (no other run can write it)
    until `store.close()` or the end of a `with store:` block; `store.check_whole()` at the end
    reads it back."""
    run = _run_of(method, seed, out, run, parts)
    if run.out is None:
        raise InputError("prepare makes the store of a run: give out= (a folder)")
    plan = _plan(model, images, run)
    return prepared_store(run.out, plan.source.names, plan.map_shape, plan.batch_size, plan.attrs, run.resume,
                          run.use_zarr)


def fill(model: Model, images: Any, run: Run, store: MapStore, batches: Iterable[int], *,
         progress: Optional[Progress] = None) -> int:
    """Compute the batches `batches` (indices) of `run` into its `store` (made by `prepare` with
    the same images and run), skipping those already done (and whole); returns how many images it
    computed. Writers of different batches never touch each other's chunks, so any number of
    processes can fill one store at once, inside the lock `prepare` took."""
    plan = _plan(model, images, run)
    if plan.map_shape != store.map_shape or len(plan.source) != len(store):
        raise StoreError(f"the store {store.path} holds maps {(len(store),) + store.map_shape}, not the "
                         f"{(len(plan.source),) + plan.map_shape} of this run")
    return _run(model, plan._replace(batch_size=store.batch_size), store, batches, progress)


class _WriteFailed(Exception):
    """An OSError of writing a batch into the store (raised on the writer thread)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


def _run(model: Model, plan: _Plan, target: MapStore | BatchMaps, batches: Iterable[int],
         progress: Optional[Progress]) -> int:
    """The pipeline: the batches of `batches` not yet done in `target` (a store, or BatchMaps),
    read ahead on one thread, computed here, written (and rendered) on another. Returns the
    number of images computed. A store that cannot be written (a full disk) is a StoreError
    naming the file, how many images are done and that a resumed run continues."""
    run, source = plan.run, plan.source
    n, batch_size = len(source), plan.batch_size
    done = target.done if isinstance(target, MapStore) else np.zeros(n, bool)
    todo = [k for k in batches if not done[k * batch_size:(k + 1) * batch_size].all()]
    names: Optional[dict[Path, Any]] = None
    style: Any = None
    if run.png is not None:
        from .. import viz

        Path(run.png).mkdir(parents=True, exist_ok=True)
        names = output_names(source.names, run.name, None if run.seed is None else run.seed.count)
        style = run.style or viz.Style()

    def write(k: int, x: np.ndarray, maps: np.ndarray, predicted: np.ndarray, errors: list[str]) -> None:
        a, b = k * batch_size, min(n, (k + 1) * batch_size)
        if names is not None:  # over the crop the model saw, unnormalised
            pictures = x if source.preprocess is None else source.preprocess.denormalize(x)
            write_pngs(run.png, [names[Path(p)] for p in source.names[a:b]], pictures, maps, errors, style)
        if isinstance(target, MapStore):
            try:
                target.write_batch(k, maps, predicted, errors)
            except OSError as exc:
                raise _WriteFailed(exc) from exc
        else:
            target.maps[a:b], target.predicted[a:b], target.errors[a:b] = maps, predicted, errors

    reader, writer = BatchReader(source, todo, batch_size), _Writer(write)
    reader.start()
    writer.start()
    finished = before = n - sum(min(n, (k + 1) * batch_size) - k * batch_size for k in todo)
    try:
        try:
            for k, x, read_errors in reader.batches():
                maps, predicted, errors = _compute(run, model, x, read_errors, plan.map_shape)
                writer.put((k, x, maps, predicted, errors))
                finished += len(x)
                if progress is not None:
                    progress(finished, n)
        finally:
            reader.stop.set()
            writer.finish()  # the batches computed so far are written whole, also after Ctrl-C
    except _WriteFailed as failed:
        raise StoreError(_write_failure(target, failed.error)) from None
    return finished - before


def _write_failure(store: Any, exc: OSError) -> str:
    """The line of a store that could not be written: which file, why, what is done."""
    try:
        done = f"{int(store.done.sum())} of {len(store)} images are done in {store.path}"
    except (OSError, StoreError):
        done = f"the batches written so far are kept in {store.path}"
    where = f"cannot write {exc.filename}" if exc.filename else f"cannot write the map store {store.path}"
    fix = "make room on its disk" if exc.errno == errno.ENOSPC else "fix that"
    return f"{where}: {exc.strerror or exc}; {done}; {fix} and run the same command with --resume to continue"


class _Writer(threading.Thread):
    """A thread running `step` on the items of a bounded queue, in order; its first exception is
    kept (the items after it are dropped) and raised by `put` or `finish` on the calling thread."""

    def __init__(self, step: Callable[..., Any]) -> None:
        super().__init__(daemon=True)
        self.items: queue.Queue[Optional[tuple[Any, ...]]] = queue.Queue(QUEUED_BATCHES)
        self.step = step
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        while True:
            item = self.items.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self.step(*item)
                except BaseException as exc:  # noqa: BLE001: kept and raised on the calling thread
                    self.error = exc

    def put(self, item: tuple[Any, ...]) -> None:
        if self.error is not None:
            raise self.error
        self.items.put(item)

    def finish(self) -> None:
        """Wait for the queued items; raise the first exception of any."""
        self.items.put(None)
        self.join()
        if self.error is not None:
            raise self.error


def _maps_of(run: Run, model: Model, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(maps (n, [K,] C, H, W) float32, predicted class (n,), error (n,)) of one method call on
    the batch x: the predicted class is -1 for a dense output; an image whose output is not finite
    gets a NaN map and that error."""
    attr = run.method.function(model, x, run.seed, **run.options)
    maps = np.asarray(attr.map, np.float32)
    if run.seed is not None and run.seed.count is not None:  # (K, n, ...) -> (n, K, ...)
        maps = np.moveaxis(maps, 0, 1)
    maps = np.ascontiguousarray(maps)
    out = np.asarray(attr.output)
    predicted = out.argmax(axis=1) if out.ndim == 2 else np.full(len(x), -1)
    bad = ~np.isfinite(out.reshape(len(x), -1)).all(axis=1)
    maps[bad] = np.nan
    predicted = np.where(bad, -1, predicted)
    return maps, predicted, np.where(bad, "the model's output holds NaN or infinite values", "")


def _compute(run: Run, model: Model, x: np.ndarray, read_errors: Iterable[str],
             map_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The maps of one batch: one method call (`_maps_of`); if the model fails on the batch
    (`ModelError`), one call per image, so that only the images it fails on lose their maps, each
    recorded with its error. Images that could not be read keep NaN maps. Any other error is the
    run's, not an image's (a method option, a seed that does not fit the model's output, a layer
    that does not fit the input), and is raised whichever batch meets it."""
    n = len(x)
    maps = np.full((n,) + map_shape, np.nan, np.float32)
    predicted = np.full(n, -1, np.int64)
    errors = list(read_errors)
    ok = [i for i in range(n) if not errors[i]]
    if not ok:
        return maps, predicted, errors
    try:
        m, p, e = _maps_of(run, model, x)
        for i in ok:
            maps[i], predicted[i], errors[i] = m[i], p[i], str(e[i])
        return maps, predicted, errors
    except ModelError:  # find which images the model fails on, one at a time
        pass
    for i in ok:
        try:
            m, p, e = _maps_of(run, model, x[i:i + 1])
            maps[i], predicted[i], errors[i] = m[0], p[0], str(e[0])
        except ModelError as exc:
            errors[i] = str(exc)
    return maps, predicted, errors
