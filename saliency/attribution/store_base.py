"""What both formats of map store share (`store.py`): `MapStore`, the interface, which reads a
store a batch at a time through its format's `_batch` and `_read_maps`."""
from __future__ import annotations

from collections import namedtuple
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .store_files import StoreError

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .result import Attribution
    from .store_lock import StoreLock

# One batch as read from disk. done: marked done and whole; damage: why a batch marked done is not
# whole (None otherwise); predicted, errors: those of a done batch.
Batch = namedtuple("Batch", "done damage predicted errors")
NOT_DONE = Batch(False, None, None, None)


class MapStore:
    """Maps of `len(files)` images, `batch_size` per chunk. Open one with `open_store`, make one
    with `create_store`. A store opened with a lock keeps it until `close()` (or the end of a
    `with` block)."""

    def __init__(self, path: str | os.PathLike[str], backend: str, attrs: dict[str, Any], files: Iterable[str]) -> None:
        self.path, self.backend, self.attrs, self.files = Path(path), backend, attrs, list(files)
        self.map_shape: tuple[int, ...] = tuple(attrs["map_shape"])
        self.batch_size = int(attrs["batch_size"])
        self.lock: Optional[StoreLock] = None

    def __len__(self) -> int:
        return len(self.files)

    @property
    def batches(self) -> int:
        """The number of batches: ceil(len(files) / batch_size)."""
        return -(-len(self.files) // self.batch_size)

    def span(self, k: int) -> tuple[int, int]:
        """The images (start, stop) of batch k."""
        return k * self.batch_size, min(len(self.files), (k + 1) * self.batch_size)

    def __repr__(self) -> str:
        done = int(self.done.sum())
        return (f"<MapStore {self.path} ({self.backend}): {done} of {len(self)} images done, maps "
                f"{(len(self),) + self.map_shape} float32, method {self.attrs.get('method')}>")

    def _all(self) -> list[Batch]:
        return [self._batch(k) for k in range(self.batches)]

    def _per_image(self, field: str, missing: Any, dtype: Any = None) -> Any:
        out: list[Any] = []
        for k, b in enumerate(self._all()):
            a, z = self.span(k)
            out += list(getattr(b, field)) if b.done else [missing] * (z - a)
        return out if dtype is None else np.array(out, dtype)

    @property
    def done(self) -> np.ndarray:
        """Per image, whether its batch is done and whole."""
        sizes = [z - a for a, z in map(self.span, range(self.batches))]
        return np.repeat(np.array([b.done for b in self._all()], bool), sizes)

    @property
    def predicted(self) -> np.ndarray:
        """Per image, the predicted class (int64; -1 for a dense output or a batch not done)."""
        return self._per_image("predicted", -1, np.int64)

    @property
    def errors(self) -> list[str]:
        """Per image, its error message ("" when it has none, or when its batch is not done)."""
        return self._per_image("errors", "")

    @property
    def damaged(self) -> dict[int, str]:
        """{batch: what is wrong} of the batches marked done whose chunks are not whole."""
        return {k: b.damage for k, b in enumerate(self._all()) if b.damage}

    @property
    def maps(self) -> _Maps:
        """The maps (images, *map_shape), an array-like read a batch at a time: index it to read
        some, np.asarray for all. A batch not done (or damaged) reads as NaN."""
        return _Maps(self)

    def batch_maps(self, k: int) -> np.ndarray:
        """The maps of batch k, float32 (images of it, *map_shape); NaN for a batch not done, a
        StoreError naming the batch when it is marked done and its maps cannot be read."""
        b = self._batch(k)
        got = b.damage if b.damage else self._read_maps(k) if b.done else None
        if isinstance(got, str):
            raise StoreError(self.damage_message({k: got}))
        if got is None:
            a, z = self.span(k)
            return np.full((z - a,) + self.map_shape, np.nan, np.float32)
        return got

    def describe(self, problems: dict[int, str], limit: int = 3) -> str:
        """`problems` ({batch: what is wrong}) as text: 'batch 3 (images 24-31): ...; ...'."""
        items = sorted(problems.items())
        text = "; ".join(f"batch {k} (images {self.span(k)[0]}-{self.span(k)[1] - 1}): {why}"
                         for k, why in items[:limit])
        return text + (f"; and {len(items) - limit} more" if len(items) > limit else "")

    def damage_message(self, damaged: dict[int, str]) -> str:
        """The line that refuses to read the batches `damaged` ({batch: what is wrong})."""
        them = "it" if len(damaged) == 1 else "them"
        return (f"the map store {self.path} has {len(damaged)} batch{'es' if len(damaged) > 1 else ''} marked done "
                f"that cannot be read: {self.describe(damaged)}; run saliency batch again with --out "
                f"{self.path.parent} --resume (the same images and options) to compute {them} again")

    def check_whole(self) -> MapStore:
        """The store as it reads back from disk, after a run: a StoreError saying which batches
        are not done or not whole, unless every one is."""
        again = self._reopen()
        bad = {k: b.damage or "not done" for k, b in enumerate(again._all()) if not b.done}
        if bad:
            raise StoreError(f"the map store {self.path} is not whole after the run: {again.describe(bad)}; run the "
                             f"same command with --resume to compute {'it' if len(bad) == 1 else 'them'} again")
        return again

    def _reopen(self) -> MapStore:
        """The store at this one's path, opened again (its files as they are now)."""
        raise NotImplementedError

    def _batch(self, k: int) -> Batch:
        """Batch k as read from disk, a _Batch."""
        raise NotImplementedError

    if TYPE_CHECKING:  # each format's store writes a batch (`_FolderStore`, `_ZarrStore`)
        def write_batch(self, k: int, maps: np.ndarray, predicted: np.ndarray, errors: Sequence[str]) -> None: ...

    def _read_maps(self, k: int) -> np.ndarray | str | None:
        """The maps of batch k, which _batch found done, or a string saying why they cannot be read."""
        raise NotImplementedError

    def attribution(self, index: int) -> Attribution:
        """Map `index` of the store as an `Attribution`, to draw it: its method and seed as the
        store records them, its image read again from its file at the map's size (through the
        store's preprocessing: the crop the model saw) when it reads,
        no output (the model is not run) and no time. A StoreError for a map that is not done."""
        from .result import Attribution

        if not -len(self) <= index < len(self):
            raise StoreError(f"index {index} is out of range for the {len(self)} images of {self.path}")
        index %= len(self)
        amap = self.batch_maps(index // self.batch_size)[index % self.batch_size]
        if not self.done[index] or self.errors[index]:
            raise StoreError(f"the map of {self.files[index]} is not in {self.path}: "
                             f"{self.errors[index] or 'its batch is not done'}")
        predicted = int(self.predicted[index])
        text = self.attrs.get("seed", "default")
        if text == "default" and predicted >= 0:
            text = f"predicted class {predicted}"
        seed = _StoredSeed(text, self.map_shape[0] if len(self.map_shape) == 4 else None)
        return Attribution(map=amap, seed=seed, method=self.attrs.get("method", "map"), output=None, seconds=0.0,
                           input=self.picture(index))

    def picture(self, index: int) -> Optional[np.ndarray]:
        """The image of map `index` as a picture (H, W, 3) at the map's size, read again from its file
        through the store's preprocessing (the crop the model saw), or None when it does not read
        (an array's images, image0, ...; a file moved since)."""
        return _image(self.files[index], self.map_shape[-2:], self.attrs.get("preprocess"))

    def figure(self, index: int = 0, style: Any = None, **style_fields: Any) -> Figure:
        """The Figure of map `index`: its image beside it (`Attribution.figure`)."""
        return self.attribution(index).figure(0, style, **style_fields)

    def plot(self, index: int = 0, ax: Optional[Axes] = None, style: Any = None, **style_fields: Any) -> Axes:
        """Draw map `index` on a matplotlib Axes (`Attribution.plot`); returns the Axes."""
        return self.attribution(index).plot(ax, 0, 0, style, **style_fields)

    def show(self, index: int = 0, style: Any = None, **style_fields: Any) -> None:
        """Show the Figure of map `index` (`Attribution.show`)."""
        self.attribution(index).show(0, style, **style_fields)

    def save(self, index: int, path: str | os.PathLike[str], style: Any = None, **style_fields: Any) -> Path:
        """Write the Figure of map `index` to `path` (.png, .pdf or .svg); returns the path."""
        return self.attribution(index).save(path, 0, style, **style_fields)

    def close(self) -> None:
        """Release the store's lock, if it holds one."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> MapStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Maps:
    """A store's maps as an array-like: indexing along the first axis reads only the batches it
    needs; np.asarray(store.maps) reads them all."""

    def __init__(self, store: MapStore) -> None:
        self._store = store
        self.shape: tuple[int, ...] = (len(store),) + store.map_shape
        self.dtype = np.dtype(np.float32)
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def _chunk(self, k: int) -> Optional[np.ndarray]:
        """Batch k's maps, or None for a batch not done (or damaged): NaN."""
        store = self._store
        b = store._batch(k)
        got = store._read_maps(k) if b.done else None
        return None if isinstance(got, str) else got

    def __getitem__(self, index: Any) -> np.ndarray:
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        rows = np.arange(len(self))[first]
        B = self._store.batch_size
        flat = np.atleast_1d(rows)
        out = np.empty((len(flat),) + self._store.map_shape, np.float32)
        for k in np.unique(flat // B):
            chunk = self._chunk(int(k))
            where = flat // B == k
            out[where] = np.nan if chunk is None else chunk[flat[where] - k * B]
        out = out if np.ndim(rows) else out[0]
        return out[(slice(None),) * np.ndim(rows) + tuple(rest)]

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        arr = self[:]
        return arr if dtype is None else arr.astype(dtype)


class _StoredSeed:
    """The seed of a stored map, as the store describes it (for captions)."""

    def __init__(self, text: str, count: Optional[int]) -> None:
        self.text, self.count = text, count

    def describe(self, classes: Any = None) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def _image(name: str, size: tuple[int, ...], preprocess: Any = None) -> Optional[np.ndarray]:
    """The image file `name` read at `size` (H, W) for a picture (with `preprocess`, the record of
    the `viz.Preprocess` that read it for the model: the crop the model saw), or None when it does
    not read (an array's images, image0, ...; a file moved since)."""
    from .. import viz

    try:
        if preprocess is not None:
            return viz.Preprocess.from_record(preprocess).picture(Path(name))
        return viz.load_image(Path(name), size=tuple(size))[0]
    except (OSError, ValueError):
        return None
