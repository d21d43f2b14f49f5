"""The maps of a dataset on disk: one array of shape (images, *map_shape), float32, written a
batch at a time, with what each map is beside it.

Two formats, one interface (`MapStore`):

* `maps.zarr`, a Zarr group (with the optional `zarr` package, `pip install
  'saliency-maps[scale]'`), which NumPy, Dask and xarray users open directly
  (`zarr.open_group(path)["maps"]`, `dask.array.from_zarr(path, component="maps")`). Arrays:
  `maps` (images, *map_shape) float32, `predicted` (images,) int64 (the class a classifier
  predicted, -1 for a dense output or a failed image), `error` (images,) str ("" when the map
  was made), `done` (images,) bool, `files` (images,) str; attributes: the method, seed, model
  and options of the run.
* `maps/`, a folder of NumPy files, where Zarr is not installed: `index.json` (the same
  attributes, the file names and the shape), and per batch k `maps.k.npy` and `batch.k.json`
  (its predictions and errors).

Every array is chunked by batch (the chunk of batch k holds images k*B .. k*B + B - 1), so a
batch writes only its own chunks, and whoever writes batch k (a thread, another process) never
touches another's. A batch is marked done last: its `done` chunk (`batch.k.json` in the folder
format) appears only after its maps are written, so an interrupted run leaves no batch that
reads as done and is not. Every chunk file is written whole, then renamed into place; in a Zarr
store made here (plain encodings: little-endian bytes, vlen-utf8 strings, no compression) the
store writes the chunk files itself, in the encoding zarr would give them.
"""
import json
import shutil
import struct
from pathlib import Path

import numpy as np

from .._write import atomic_path, write_text

FORMAT_VERSION = 1
ZARR_NAME, FOLDER_NAME = "maps.zarr", "maps"
INSTALL_ZARR = "pip install 'saliency-maps[scale]'"


class StoreError(ValueError):
    """A store that cannot be created, opened or continued as asked."""


def zarr_available():
    """Whether the optional `zarr` package can be imported."""
    try:
        import zarr  # noqa: F401
    except ImportError:
        return False
    return True


def store_path(folder, use_zarr=None):
    """Where the store of an output folder lives: FOLDER/maps.zarr with Zarr (the default when it
    is installed), else FOLDER/maps."""
    use_zarr = zarr_available() if use_zarr is None else use_zarr
    return Path(folder) / (ZARR_NAME if use_zarr else FOLDER_NAME)


class MapStore:
    """Maps of `len(files)` images, `batch_size` per chunk. Open one with `open_store`, make one
    with `create_store`."""

    def __init__(self, path, backend, attrs, files):
        self.path, self.backend, self.attrs, self.files = Path(path), backend, attrs, list(files)
        self.map_shape = tuple(attrs["map_shape"])
        self.batch_size = int(attrs["batch_size"])

    def __len__(self):
        return len(self.files)

    @property
    def batches(self):
        return -(-len(self.files) // self.batch_size)

    def span(self, k):
        """The images (start, stop) of batch k."""
        return k * self.batch_size, min(len(self.files), (k + 1) * self.batch_size)

    def __repr__(self):
        done = int(self.done.sum())
        return (f"<MapStore {self.path} ({self.backend}): {done} of {len(self)} images done, maps "
                f"{(len(self),) + self.map_shape} float32, method {self.attrs.get('method')}>")


class _ZarrStore(MapStore):
    def __init__(self, path, group):
        super().__init__(path, "zarr", dict(group.attrs), group["files"][:].tolist())
        # the arrays opened once (opening one reads its metadata: about 0.6 ms); their data is
        # read from the store at every access
        self._arrays = {name: group[name] for name in ("maps", "predicted", "error", "done")}
        # batches are written as chunk files by this class, each whole or not at all, where the
        # arrays' encodings are the plain ones create_store makes (zarr itself costs about 4 ms
        # a batch, most of it holding the interpreter that the model's threads need)
        self._plain = _writes_plain_chunks(self._arrays, self.batch_size)

    @property
    def maps(self):
        """The zarr array (images, *map_shape): index it to read maps, np.asarray for all."""
        return self._arrays["maps"]

    @property
    def done(self):
        return np.asarray(self._arrays["done"][:], bool)

    @property
    def predicted(self):
        return np.asarray(self._arrays["predicted"][:], np.int64)

    @property
    def errors(self):
        return [str(e) for e in self._arrays["error"][:].tolist()]

    def write_batch(self, k, maps, predicted, errors):
        a, b = self.span(k)
        maps, predicted = np.asarray(maps, np.float32), np.asarray(predicted, np.int64)
        errors = [str(e) for e in errors]
        if not self._plain:  # a store of other encodings (made elsewhere): zarr encodes the chunks
            arrays = self._arrays
            arrays["maps"][a:b], arrays["predicted"][a:b] = maps, predicted
            arrays["error"][a:b] = np.array(errors, dtype=str)
            arrays["done"][a:b] = True
            return
        n = self.batch_size
        self._put("maps", k, _plain_chunk(maps, n, np.nan, "<f4"))
        self._put("predicted", k, _plain_chunk(predicted, n, -1, "<i8"))
        self._put("error", k, _vlen_utf8_chunk(errors, n))
        self._put("done", k, _plain_chunk(np.ones(b - a, bool), n, False, "|b1"))  # last: the batch is whole

    def _put(self, name, k, data):
        """The chunk of batch k of array `name`, as one file written whole then renamed into place
        (Zarr's default chunk keys: c/k/0/... below the array's folder)."""
        ndim = len(self._arrays[name].shape)
        target = self.path.joinpath(name, "c", str(k), *["0"] * (ndim - 1))
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as part:
            part.write_bytes(data)


# The encodings whose chunks _ZarrStore writes itself (those create_store makes): little-endian
# C-order bytes, and for strings vlen-utf8 alone; chunks keyed c/k/0/... ("default", "/").
_CHUNK_CODECS = {"maps": ["bytes"], "predicted": ["bytes"], "done": ["bytes"], "error": ["vlen-utf8"]}


def _writes_plain_chunks(arrays, batch_size):
    """Whether the arrays are encoded as create_store makes them, so that write_batch may write
    their chunk files itself."""
    for name, codecs in _CHUNK_CODECS.items():
        meta = arrays[name].metadata.to_dict()
        if ([c["name"] for c in meta.get("codecs", [])] != codecs
                or any(c.get("configuration", {}).get("endian", "little") != "little" for c in meta["codecs"])
                or meta.get("chunk_key_encoding") != {"name": "default", "configuration": {"separator": "/"}}
                or meta["chunk_grid"]["configuration"]["chunk_shape"][0] != batch_size
                or list(meta["chunk_grid"]["configuration"]["chunk_shape"][1:]) != list(meta["shape"][1:])):
            return False
    return True


def _plain_chunk(values, size, fill, dtype):
    """A chunk of `size` rows in the `bytes` encoding: `values` (its first rows) and `fill` after."""
    out = np.full((size,) + values.shape[1:], fill, np.dtype(dtype))
    out[:len(values)] = values
    return out.tobytes()


def _vlen_utf8_chunk(strings, size):
    """A chunk of `size` strings in the `vlen-utf8` encoding: the item count, then per item its
    length in bytes and its UTF-8 bytes (counts and lengths little-endian uint32), "" after
    `strings`."""
    items = [s.encode("utf-8") for s in strings] + [b""] * (size - len(strings))
    return b"".join([struct.pack("<I", len(items))] + [struct.pack("<I", len(i)) + i for i in items])


class _NpyChunks:
    """The folder format's maps as an array-like: indexing along the first axis reads only the
    chunks it needs; np.asarray(store.maps) reads them all. A batch not done reads as NaN."""

    def __init__(self, store):
        self._store = store
        self.shape = (len(store),) + store.map_shape
        self.dtype = np.dtype(np.float32)
        self.ndim = len(self.shape)

    def __len__(self):
        return self.shape[0]

    def _chunk(self, k):
        path = self._store.path / f"maps.{k}.npy"
        if not (self._store.path / f"batch.{k}.json").is_file():
            a, b = self._store.span(k)
            return np.full((b - a,) + self._store.map_shape, np.nan, np.float32)
        return np.load(path)

    def __getitem__(self, index):
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        rows = np.arange(len(self))[first]
        B = self._store.batch_size
        flat = np.atleast_1d(rows)
        out = np.empty((len(flat),) + self._store.map_shape, np.float32)
        for k in np.unique(flat // B):
            chunk = self._chunk(int(k))
            where = flat // B == k
            out[where] = chunk[flat[where] - k * B]
        out = out if np.ndim(rows) else out[0]
        return out[(slice(None),) * np.ndim(rows) + tuple(rest)]

    def __array__(self, dtype=None, copy=None):
        arr = self[:]
        return arr if dtype is None else arr.astype(dtype)


class _FolderStore(MapStore):
    def __init__(self, path, index):
        super().__init__(path, "npy", index["attrs"], index["files"])

    @property
    def maps(self):
        return _NpyChunks(self)

    def _batch_record(self, k):
        path = self.path / f"batch.{k}.json"
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def _per_image(self, key, missing):
        out = []
        for k in range(self.batches):
            a, b = self.span(k)
            record = self._batch_record(k)
            out += record[key] if record is not None else [missing] * (b - a)
        return out

    @property
    def done(self):
        return np.array(self._per_image("done", False), bool)

    @property
    def predicted(self):
        return np.array(self._per_image("predicted", -1), np.int64)

    @property
    def errors(self):
        return self._per_image("error", "")

    def write_batch(self, k, maps, predicted, errors):
        a, b = self.span(k)
        maps = np.ascontiguousarray(maps, np.float32)
        with atomic_path(self.path / f"maps.{k}.npy") as part:
            with open(part, "wb") as f:
                np.save(f, maps)
        record = {"predicted": [int(p) for p in predicted], "error": [str(e) for e in errors], "done": [True] * (b - a)}
        write_text(self.path / f"batch.{k}.json", json.dumps(record) + "\n")


def _attrs(map_shape, batch_size, attrs):
    out = {"format_version": FORMAT_VERSION, "map_shape": [int(s) for s in map_shape], "batch_size": int(batch_size)}
    out.update(attrs)
    return out


def create_store(path, files, map_shape, batch_size, attrs):
    """A new, empty store at `path` (maps.zarr for Zarr, any other name for the folder format),
    replacing whatever store was there. `attrs` (JSON values) are kept with it."""
    path = Path(path)
    files = [str(f) for f in files]
    attrs = _attrs(map_shape, batch_size, attrs)
    if path.exists():
        shutil.rmtree(path)
    if path.suffix == ".zarr":
        import zarr

        n = len(files)
        group = zarr.open_group(str(path), mode="w")
        chunk = (batch_size,)
        # uncompressed: float maps hardly compress, and compressing them cost more than computing
        # them; the per-image arrays are small. Chunks in these plain encodings are what
        # _ZarrStore writes itself (`_CHUNK_CODECS`).
        group.create_array("maps", shape=(n,) + tuple(map_shape), chunks=chunk + tuple(map_shape), dtype="float32",
                           fill_value=np.nan, compressors=None)
        group.create_array("predicted", shape=(n,), chunks=chunk, dtype="int64", fill_value=-1, compressors=None)
        group.create_array("error", shape=(n,), chunks=chunk, dtype=str, compressors=None)
        group.create_array("done", shape=(n,), chunks=chunk, dtype="bool", fill_value=False, compressors=None)
        group.create_array("files", shape=(n,), chunks=(max(1, n),), dtype=str)
        group["files"][:] = np.array(files, dtype=str)
        group.attrs.update(attrs)
        return _ZarrStore(path, group)
    path.mkdir(parents=True)
    write_text(path / "index.json", json.dumps({"attrs": attrs, "files": files}, indent=1) + "\n")
    return _FolderStore(path, {"attrs": attrs, "files": files})


def open_store(path):
    """The store at `path` (a maps.zarr group or a maps folder), for reading or to continue."""
    path = Path(path)
    if (path / "index.json").is_file():
        try:
            index = json.loads((path / "index.json").read_text(encoding="utf-8"))
            return _FolderStore(path, index)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"cannot read the map store {path} ({exc})") from None
    if (path / "zarr.json").is_file():
        if not zarr_available():
            raise StoreError(f"{path} is a Zarr store and zarr is not installed: {INSTALL_ZARR}")
        import zarr

        try:
            return _ZarrStore(path, zarr.open_group(str(path), mode="r+"))
        except Exception as exc:  # noqa: BLE001: any corruption zarr reports is one sentence here
            raise StoreError(f"cannot read the map store {path} ({exc})") from None
    raise StoreError(f"{path} holds no map store (no index.json or zarr.json)")
