"""Maps for a whole dataset: images streamed in batches through a model, raw maps into a store.

`batch(model, images, method, seed, out=FOLDER)` reads the images (paths, decoded and resized on
a reader thread while the model works), computes each batch of `batch_size` images as two method
calls at once, one per half batch on each of two threads (one call for Grad-CAM, for a method of
your own and for a model with hooks or in training mode), and writes each batch's maps into the
store of `out` (`store.py`: maps.zarr, or a folder of .npy chunks without Zarr) on a writer
thread, with heatmap PNGs if asked. At most two batches wait on each side, so memory stays
bounded whatever the number of images.

Batch k is always images k*B .. k*B + B - 1, computed together: a run that is interrupted and
continued (`resume=True`) computes every batch exactly as an uninterrupted run does, so the
stored maps are bit for bit the same. An image that cannot be read is recorded with its error
(its map is NaN) and the others go on; a batch whose method calls fail is computed again one
image at a time, so that only the images that fail are lost.
"""
import errno
import json
import math
import queue
import threading
from collections import Counter, namedtuple
from pathlib import Path

import numpy as np

from .._write import atomic_path
from ..kernels.memory import available_bytes, format_bytes
from ..kernels.threads import split_work
from . import seeds as seeds_module
from ._core import InputError, ModelError
from .gradcam import gradcam
from .gradient import gradient, guided_backprop, input_x_gradient
from .integrated_gradients import integrated_gradients
from .occlusion import occlusion
from .smoothgrad import smoothgrad
from . import registry
from .store import MapStore, StoreError, create_store, open_store, store_path
from .store_lock import acquire

METHODS = {name: record.function for name, record in registry.METHODS.items()}
BATCH_SIZE = 32
QUEUED_BATCHES = 2

# The arrays `batch` returns when it writes no store.
BatchMaps = namedtuple("BatchMaps", "maps predicted errors")


def output_names(files, method, count=None):
    """{file: PNG name} (or {file: [K names]} for K seeds): STEM_METHOD.png, or STEM.EXT_METHOD.png
    for files whose stems are shared (x.png and x.jpg), STEM_METHOD_k.png for seed k. No two images
    write the same name, even on a file system that ignores case: a name still taken (x.png beside
    x.jpg and x.png.png) gets _2, _3, ... before _METHOD."""
    stems = Counter(Path(p).stem.lower() for p in files)
    names, used = {}, set()
    for p in files:
        p = Path(p)
        base = p.stem if stems[p.stem.lower()] == 1 else p.name
        name, k = f"{base}_{method}.png", 1
        while name.lower() in used:
            k += 1
            name = f"{base}_{k}_{method}.png"
        used.add(name.lower())
        names[p] = name if count is None else [name[:-4] + f"_{i}.png" for i in range(count)]
    return names


def _method(method):
    if callable(method):
        return getattr(method, "__name__", "method"), method
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method, METHODS[method]


def _seed(seed):
    if seed is None or isinstance(seed, seeds_module.Seed):
        return seed
    return seeds_module.parse(seed)


class _Source:
    """The images of a run: paths (read with the model's input size) or an array (N, C, H, W)."""

    def __init__(self, model, images):
        self.array = None
        if isinstance(images, np.ndarray):
            if images.ndim != 4:
                raise InputError(f"images must be a list of image files or an array (N, C, H, W), got shape "
                                 f"{images.shape}")
            self.array = images
            self.names = [f"image{i}" for i in range(len(images))]
            self.shape = images.shape[1:]
            return
        self.paths = [Path(p) for p in images]
        if not self.paths:
            raise InputError("no images given")
        self.names = [str(p) for p in self.paths]
        shape = getattr(model, "input_shape", None)
        if shape is None:  # a model of any input size: every image at the size of the first that reads
            shape = self._first_shape()
        self.shape = tuple(int(s) for s in shape)

    def _first_shape(self):
        from .. import viz  # images and heatmaps only: `import saliency.attribution` stays without matplotlib

        for p in self.paths:
            try:
                return viz.load_image(p)[0].shape
            except Exception:  # noqa: BLE001: an unreadable image is recorded when its batch is read
                continue
        raise InputError(f"none of the {len(self.paths)} images can be read")

    def __len__(self):
        return len(self.names)

    def read(self, a, b):
        """(float32 (b - a, C, H, W), [error or "" per image]); an image that fails reads as zeros."""
        if self.array is not None:
            x = np.array(self.array[a:b], np.float32)
            finite = np.isfinite(x.reshape(len(x), -1)).all(axis=1)
            x[~finite] = 0
            return x, ["" if ok else "the image holds NaN or infinite values" for ok in finite]
        from .. import viz

        x = np.zeros((b - a,) + self.shape, np.float32)
        errors = []
        for i, p in enumerate(self.paths[a:b]):
            try:
                x[i] = viz.load_image(p, size=self.shape[1:], channels=self.shape[0])[0]
                errors.append("")
            except Exception as exc:  # noqa: BLE001: any image may fail; the run goes on and says why
                errors.append(_message(exc))
        return x, errors


def _message(exc):
    return str(exc) if isinstance(exc, (ValueError, OSError)) else f"{type(exc).__name__}: {exc}"


def _maps_of(fn, model, x, seed, options):
    """(maps (n, [K,] C, H, W) float32, predicted class (n,), error (n,)) of one method call on
    the batch x: the predicted class is -1 for a dense output; an image whose output is not finite
    gets a NaN map and that error."""
    attr = fn(model, x, seed, **options)
    maps = np.asarray(attr.map, np.float32)
    if seed is not None and seed.count is not None:  # (K, n, ...) -> (n, K, ...)
        maps = np.moveaxis(maps, 0, 1)
    maps = np.ascontiguousarray(maps)
    out = np.asarray(attr.output)
    predicted = out.argmax(axis=1) if out.ndim == 2 else np.full(len(x), -1)
    bad = ~np.isfinite(out.reshape(len(x), -1)).all(axis=1)
    maps[bad] = np.nan
    predicted = np.where(bad, -1, predicted)
    return maps, predicted, np.where(bad, "the model's output holds NaN or infinite values", "")


# The methods whose calls share no state (Grad-CAM hooks the model's layer, which a call on another
# thread would also trigger): a batch of theirs runs as two half batches at once (`_halves`).
_OWN_STATE_ONLY = frozenset({gradient, input_x_gradient, smoothgrad, integrated_gradients, guided_backprop,
                             occlusion})


def _stateless(model):
    """Whether two calls of `model` may run at once: a Module in eval mode none of whose modules
    has a hook (a hook may keep what it sees between calls; in training mode, batch norm updates
    its running statistics and dropout draws from the shared generator, in whatever order the
    calls reach them); a plain function is not known to be."""
    modules = getattr(model, "modules", None)
    return modules is not None and not any(getattr(m, "_has_hooks", lambda: True)() or getattr(m, "training", False)
                                           for m in modules())


def _by_halves(model, n, call):
    """[call(a, b) for the two halves (a, b) of [0, n)], run at once on two threads
    (`kernels.threads.split_work`: each half's kernels on its own thread) for a `_stateless`
    model; [call(0, n)] for any other."""
    parts = {}

    def half(a, b):
        parts[a] = call(a, b)

    if _stateless(model):
        split_work(n, half)
    else:
        half(0, n)
    return [parts[a] for a in sorted(parts)]


def _halves(fn, model, x, seed, options):
    """_maps_of on the whole batch; for a method of _OWN_STATE_ONLY, as two halves of it at once
    (`_by_halves`), so the batch pays one hand-over between threads instead of one per large
    kernel call, and each half's Python runs while the other computes. The maps are those of the
    two half batches."""
    if fn not in _OWN_STATE_ONLY:
        return _maps_of(fn, model, x, seed, options)
    got = _by_halves(model, len(x), lambda a, b: _maps_of(fn, model, x[a:b], seed, options))
    return tuple(np.concatenate(parts) for parts in zip(*got))


def _compute(fn, model, x, read_errors, seed, options, map_shape):
    """The maps of one batch: its method calls (`_halves`); if the model fails on the batch
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
        m, p, e = _halves(fn, model, x, seed, options)
        for i in ok:
            maps[i], predicted[i], errors[i] = m[i], p[i], str(e[i])
        return maps, predicted, errors
    except ModelError:  # find which images the model fails on, one at a time
        pass
    for i in ok:
        try:
            m, p, e = _maps_of(fn, model, x[i:i + 1], seed, options)
            maps[i], predicted[i], errors[i] = m[0], p[0], str(e[0])
        except ModelError as exc:
            errors[i] = str(exc)
    return maps, predicted, errors


def _render(png, names, x, maps, errors, sign, reduce, clip_percentile, overlay):
    """Heatmap PNGs of one batch (one per map; none for a failed image), colours as viz.heatmap.
    A PNG that cannot be written is that image's error (its map is kept); the others go on."""
    from PIL import Image

    from .. import viz

    for i, name in enumerate(names):
        if errors[i]:
            continue
        per_seed = [maps[i]] if isinstance(name, str) else list(maps[i])
        for target, m in zip([name] if isinstance(name, str) else name, per_seed):
            r = "sum" if reduce == "rgb" and m.shape[0] != 3 else reduce
            if overlay:
                rgb = viz.overlay(x[i], m, sign=sign, reduce=r, clip_percentile=clip_percentile)
            else:
                rgb = viz.heatmap(m, sign=sign, reduce=r, clip_percentile=clip_percentile)
            if rgb.ndim == 4:  # reduce="rgb": the three channels' pictures side by side
                rgb = np.concatenate(list(rgb), axis=1)
            try:
                with atomic_path(Path(png) / target) as part:
                    Image.fromarray(rgb).save(part, format="PNG", compress_level=1)
            except OSError as exc:
                errors[i] = f"cannot write {Path(png) / target}: {exc.strerror or exc}"


class _Worker(threading.Thread):
    """A thread running `step` on the items of a bounded queue, in order; its first exception is
    kept (the items after it are dropped) and raised by `put` or `finish` on the calling thread."""

    def __init__(self, step):
        super().__init__(daemon=True)
        self.items, self.step, self.error = queue.Queue(QUEUED_BATCHES), step, None

    def run(self):
        while True:
            item = self.items.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self.step(*item)
                except BaseException as exc:  # noqa: BLE001: kept and raised on the calling thread
                    self.error = exc

    def put(self, item):
        if self.error is not None:
            raise self.error
        self.items.put(item)

    def finish(self):
        """Wait for the queued items; raise the first exception of any."""
        self.items.put(None)
        self.join()
        if self.error is not None:
            raise self.error


class _Reader(threading.Thread):
    """Reads the batches `todo` of `source` ahead of the model, at most QUEUED_BATCHES at a time;
    `batches()` yields (k, x, read errors) in order."""

    def __init__(self, source, todo, batch_size):
        super().__init__(daemon=True)
        self.source, self.todo, self.batch_size = source, todo, batch_size
        self.items, self.error, self.stop = queue.Queue(QUEUED_BATCHES), None, threading.Event()

    def run(self):
        try:
            n = len(self.source)
            for k in self.todo:
                a, b = k * self.batch_size, min(n, (k + 1) * self.batch_size)
                if not self._offer((k,) + self.source.read(a, b)):
                    return
        except BaseException as exc:  # noqa: BLE001: raised on the calling thread
            self.error = exc
        self._offer(None)

    def _offer(self, item):
        """Queue `item` unless the consumer stopped (then the thread ends instead of waiting forever)."""
        while not self.stop.is_set():
            try:
                self.items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def batches(self):
        while True:
            item = self.items.get()
            if item is None:
                if self.error is not None:
                    raise self.error
                return
            yield item


_Plan = namedtuple("_Plan", "name fn seed source map_shape attrs batch_size options")


def _plan(model, images, method, seed, batch_size, options, record):
    """What a run computes: the method, seed, images and the shape of each image's maps."""
    name, fn = _method(method)
    seed_spec = seed.strip() if isinstance(seed, str) else None  # the command-line form, for `evaluate`
    seed = _seed(seed)
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
        raise InputError(f"batch_size must be a positive int, got {batch_size!r}")
    source = _Source(model, images)
    # every method's map has the input's shape, except Grad-CAM's single channel (a method function
    # of a user's must give the input's shape)
    map_shape = ((1,) + tuple(source.shape[1:])) if fn is gradcam else tuple(source.shape)
    if seed is not None and seed.count is not None:
        map_shape = (seed.count,) + map_shape
    batch_size = _bounded_batch(int(batch_size), len(source), source.shape, map_shape)
    seed_text = seed.describe(getattr(model, "classes", None)) if seed is not None else "default"
    attrs = {"method": name, "seed": seed_text, "seed_spec": seed_spec,
             "options": {k: repr(v) for k, v in options.items()}, "record": record or {}}
    return _Plan(name, fn, seed, source, map_shape, attrs, batch_size, options)


def _bounded_batch(batch_size, n, image_shape, map_shape):
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


def batch(model, images, method="gradient", seed=None, out=None, *, batch_size=BATCH_SIZE, png=None,
          sign="abs", reduce="sum", clip_percentile=99, overlay=False, resume=False, use_zarr=None,
          record=None, progress=None, **options):
    """Maps of every image, a batch of `batch_size` at a time.

    `images`: image files (read at the model's `input_shape`, or at the first image's size for a
    model without one), or an array (N, C, H, W). `method`: a name of METHODS or a method
    function (whose maps have the input's shape); `seed`: a seed or its command-line form
    (batched seeds, e.g. seeds.classes([...]), make K maps per image, stored as an axis after the
    image's). Other keyword arguments go to the method (e.g. `layer=` for gradcam).

    With `out` (a folder), the maps go into its store (out/maps.zarr, or out/maps without Zarr;
    `use_zarr` forces either) and the store is returned (`MapStore`: .maps, .predicted, .errors,
    .done, .files); with `png` (a folder), a heatmap PNG per map, coloured as `viz.heatmap`
    (`sign`, `reduce`, `clip_percentile`, `overlay`). `resume=True` continues the store of an
    earlier run with the same images and options, computing only the batches not done. Without
    `out`, returns BatchMaps(maps, predicted, errors) as arrays. `record` (JSON values) is kept
    in the store's attributes; `progress(done, total)` is called after each batch.

    The store is locked while the run writes it (`store_lock`: another run, or an evaluation, is
    refused with a StoreError naming this process), a store already at its place is replaced only
    when this tool wrote it (`create_store`), and the store returned has been read back whole: a
    StoreError says which batches are not, and that `resume=True` computes them again."""
    plan = _plan(model, images, method, seed, batch_size, options, record)
    n = len(plan.source)
    if out is None:
        result = BatchMaps(np.full((n,) + plan.map_shape, np.nan, np.float32), np.full(n, -1, np.int64), [""] * n)
        _run(model, plan, result, range(-(-n // plan.batch_size)), png, (sign, reduce, clip_percentile, overlay),
             progress)
        return result
    store = _prepared_store(out, plan.source.names, plan.map_shape, plan.batch_size, plan.attrs, resume, use_zarr)
    with store:  # its lock: no other run writes it, no evaluation reads it meanwhile
        _run(model, plan, store, range(store.batches), png, (sign, reduce, clip_percentile, overlay), progress)
        return store.check_whole()


def prepare(model, images, method="gradient", seed=None, out=None, *, batch_size=BATCH_SIZE, resume=False,
            use_zarr=None, record=None, **options):
    """The store of a run in `out`, created empty (or with `resume`, the earlier run's, checked to
    be the same run), for runs whose batches are computed elsewhere (`fill`, e.g. on Dask workers).
    The store holds its lock (no other run can write it) until `store.close()` or the end of a
    `with store:` block; `store.check_whole()` at the end reads it back."""
    plan = _plan(model, images, method, seed, batch_size, options, record)
    return _prepared_store(out, plan.source.names, plan.map_shape, plan.batch_size, plan.attrs, resume, use_zarr)


def fill(model, images, method, seed, store, batches, *, png=None, sign="abs", reduce="sum", clip_percentile=99,
         overlay=False, progress=None, **options):
    """Compute the batches `batches` (indices) of the run of `store` (made by `prepare` with the same
    images, method, seed and options) into it, skipping those already done (and whole); returns
    how many images it computed. Writers of different batches never touch each other's chunks, so
    any number of processes can fill one store at once, inside the lock `prepare` took."""
    plan = _plan(model, images, method, seed, store.batch_size, options, None)
    if plan.map_shape != store.map_shape or len(plan.source) != len(store):
        raise StoreError(f"the store {store.path} holds maps {(len(store),) + store.map_shape}, not the "
                         f"{(len(plan.source),) + plan.map_shape} of this run")
    return _run(model, plan, store, batches, png, (sign, reduce, clip_percentile, overlay), progress)


class _WriteFailed(Exception):
    """An OSError of writing a batch into the store (raised on the writer thread)."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


def _run(model, plan, target, batches, png, look, progress):
    """The pipeline: the batches of `batches` not yet done in `target` (a store, or BatchMaps),
    read ahead on one thread, computed here, written (and rendered) on another. Returns the
    number of images computed. A store that cannot be written (a full disk) is a StoreError
    naming the file, how many images are done and that a resumed run continues."""
    n, batch_size, source = len(plan.source), plan.batch_size, plan.source
    done = target.done if isinstance(target, MapStore) else np.zeros(n, bool)
    todo = [k for k in batches if not done[k * batch_size:(k + 1) * batch_size].all()]
    names = None
    if png is not None:
        Path(png).mkdir(parents=True, exist_ok=True)
        names = output_names(source.names, plan.name, None if plan.seed is None else plan.seed.count)

    def write(k, x, maps, predicted, errors):
        a, b = k * batch_size, min(n, (k + 1) * batch_size)
        if names is not None:
            _render(png, [names[Path(p)] for p in source.names[a:b]], x, maps, errors, *look)
        if isinstance(target, MapStore):
            try:
                target.write_batch(k, maps, predicted, errors)
            except OSError as exc:
                raise _WriteFailed(exc) from exc
        else:
            target.maps[a:b], target.predicted[a:b], target.errors[a:b] = maps, predicted, errors

    reader, writer = _Reader(source, todo, batch_size), _Worker(write)
    reader.start()
    writer.start()
    finished = before = n - sum(min(n, (k + 1) * batch_size) - k * batch_size for k in todo)
    try:
        try:
            for k, x, read_errors in reader.batches():
                maps, predicted, errors = _compute(plan.fn, model, x, read_errors, plan.seed, plan.options,
                                                   plan.map_shape)
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


def _write_failure(store, exc):
    """The line of a store that could not be written: which file, why, what is done."""
    try:
        done = f"{int(store.done.sum())} of {len(store)} images are done in {store.path}"
    except (OSError, StoreError):
        done = f"the batches written so far are kept in {store.path}"
    where = f"cannot write {exc.filename}" if exc.filename else f"cannot write the map store {store.path}"
    fix = "make room on its disk" if exc.errno == errno.ENOSPC else "fix that"
    return f"{where}: {exc.strerror or exc}; {done}; {fix} and run the same command with --resume to continue"


def _prepared_store(out, files, map_shape, batch_size, attrs, resume, use_zarr):
    """The store to write, holding its lock: a new one, or with `resume` the earlier run's, checked
    to be the same run."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise StoreError(f"{out} is a file; the maps go into a folder (created if missing)")
    path = store_path(out, use_zarr)
    if resume:
        other = store_path(out, not path.name.endswith(".zarr"))
        if not path.exists() and other.exists():
            path = other
        if not path.exists():
            raise StoreError(f"--resume: {out} holds no map store from an earlier run; run without --resume")
    else:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
    lock = acquire(path)  # before the store is looked at: another run may be replacing it
    try:
        store = _resumed_store(out, path, files, map_shape, batch_size, attrs) if resume else _new_store(
            path, files, map_shape, batch_size, attrs)
    except BaseException:
        lock.release()
        raise
    store.lock = lock
    return store


def _new_store(path, files, map_shape, batch_size, attrs):
    """create_store, its failures to write (a full disk) one line naming the file."""
    try:
        return create_store(path, files, map_shape, batch_size, attrs)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise StoreError(f"cannot create the map store {path}{where}: {exc.strerror or exc}") from None


def _resumed_store(out, path, files, map_shape, batch_size, attrs):
    """The earlier run's store at `path`, refused unless it was made with the same images and options."""
    store = open_store(path)
    earlier = {"files": store.files, "map_shape": list(store.map_shape), "batch_size": store.batch_size,
               **{k: store.attrs.get(k) for k in attrs}}
    now = {"files": [str(f) for f in files], "map_shape": list(map_shape), "batch_size": batch_size,
           **json_round_trip(attrs)}
    changed = [_difference(k, earlier.get(k), now[k]) for k in now if earlier.get(k) != now[k]]
    if changed:
        raise StoreError(f"--resume: the store in {out} was made with other {'; '.join(changed)}; give the "
                         f"same images and options, or run without --resume to start again")
    return store


def _difference(key, then, now):
    """What changed in one attribute of a run, for the message refusing to resume it."""
    if key == "files":
        return f"images ({len(then or [])} then, {len(now)} now)" if len(then or []) != len(now) else "images"
    if isinstance(then, dict) and isinstance(now, dict):
        keys = [k for k in now if then.get(k) != now[k]]
        return ", ".join(f"{k} ({then.get(k)!r} then, {now[k]!r} now)" for k in keys)
    return f"{key} ({then!r} then, {now!r} now)"


def json_round_trip(value):
    """`value` as it reads back from a store's JSON attributes (tuples become lists)."""
    return json.loads(json.dumps(value))
