"""The Zarr format of the map store (`store.py`): `maps.zarr`, a Zarr group whose chunk files
this module writes itself where their encodings are the plain ones `create_zarr` makes, and
reads back checked (a chunk of the wrong size is damage, never a NaN map or zarr's exception)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..nn.errors import one_line
from .store_base import NOT_DONE, Batch, MapStore
from .store_files import (
           ARRAYS,
           ESCAPED_NAMES,
           StoreError,
           check_attrs,
           escape_name,
           file_bytes,
           plain_chunk,
           read_json,
           read_vlen_utf8,
           unescape_name,
           utf8,
           vlen_utf8_chunk,
           write_file,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path


class _ZarrStore(MapStore):
    def __init__(self, path: str | os.PathLike[str], arrays: dict[str, Any], attrs: dict[str, Any],
                 files: Iterable[str]) -> None:
        super().__init__(path, "zarr", attrs, files)
        # the arrays opened once (opening one reads its metadata: about 0.6 ms); their data is
        # read from the store at every access
        self._arrays = {name: arrays[name] for name in ("maps", "predicted", "error", "done")}
        # batches are written as chunk files by this class, each whole or not at all, where the
        # arrays' encodings are the plain ones create_store makes (zarr itself costs about 4 ms
        # a batch, most of it holding the interpreter that the model's threads need)
        self._plain = _writes_plain_chunks(self._arrays, self.batch_size)

    def _reopen(self) -> _ZarrStore:
        return open_zarr(self.path)

    def _chunk_path(self, name: str, k: int) -> Path:
        """Batch k's chunk file of array `name`: Zarr's default chunk keys, c/k/0/..."""
        ndim = len(self._arrays[name].shape)
        return self.path.joinpath(name, "c", str(k), *["0"] * (ndim - 1))

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.path).as_posix()

    def _batch(self, k: int) -> Batch:
        if not self._plain:
            return self._zarr_batch(k)
        a, z = self.span(k)
        n, size = z - a, self.batch_size
        done = self._chunk_path("done", k)
        if not done.is_file():
            return NOT_DONE
        data = file_bytes(done, size, self._rel(done))
        if isinstance(data, str):
            return Batch(False, data, None, None)
        if data[:n] != b"\x01" * n or data[n:].strip(b"\x00"):
            return Batch(False, f"{self._rel(done)} does not mark its {n} images done", None, None)
        maps = self._chunk_path("maps", k)
        want = size * int(np.prod(self.map_shape)) * 4
        try:
            got = maps.stat().st_size
        except OSError:
            return Batch(False, f"{self._rel(maps)} is missing", None, None)
        if got != want:
            return Batch(False, f"{self._rel(maps)} is {got} bytes, not {want}", None, None)
        where = self._chunk_path("predicted", k)
        predicted = file_bytes(where, size * 8, self._rel(where))
        if isinstance(predicted, str):
            return Batch(False, predicted, None, None)
        chunk = file_bytes(self._chunk_path("error", k))
        errors = read_vlen_utf8(chunk, size) if isinstance(chunk, bytes) else None
        if errors is None:
            return Batch(False, f"{self._rel(self._chunk_path('error', k))} is not a chunk of {size} strings",
                         None, None)
        return Batch(True, None, np.frombuffer(predicted, "<i8")[:n].astype(np.int64), errors[:n])

    def _zarr_batch(self, k: int) -> Batch:
        """_batch of a store whose chunks zarr encodes: each read through zarr."""
        a, z = self.span(k)
        arrays = self._arrays
        try:
            done = np.asarray(arrays["done"][a:z], bool)
        except Exception as exc:  # noqa: BLE001: a damaged chunk fails in zarr's codecs, in many ways
            return Batch(False, f"done cannot be read ({one_line(exc)})", None, None)
        if not done.any():
            return NOT_DONE
        if not done.all():
            return Batch(False, "done marks only some of its images", None, None)
        key = arrays["maps"].metadata.chunk_key_encoding.encode_chunk_key((k,) + (0,) * len(self.map_shape))
        if not (self.path / "maps" / key).is_file():
            return Batch(False, f"maps/{key} is missing", None, None)
        try:
            predicted = np.asarray(arrays["predicted"][a:z], np.int64)
            errors = [str(e) for e in arrays["error"][a:z].tolist()]
            np.asarray(arrays["maps"][a:z], np.float32)
        except Exception as exc:  # noqa: BLE001
            return Batch(False, f"a chunk cannot be read ({one_line(exc)})", None, None)
        return Batch(True, None, predicted, errors)

    def _read_maps(self, k: int) -> np.ndarray | str | None:
        a, z = self.span(k)
        if not self._plain:
            try:
                return np.asarray(self._arrays["maps"][a:z], np.float32)
            except Exception as exc:  # noqa: BLE001
                return f"maps cannot be read ({one_line(exc)})"
        path = self._chunk_path("maps", k)
        data = file_bytes(path, self.batch_size * int(np.prod(self.map_shape)) * 4, self._rel(path))
        if isinstance(data, str):
            return data
        return np.frombuffer(data, "<f4").reshape((self.batch_size,) + self.map_shape)[:z - a].copy()

    def write_batch(self, k: int, maps: np.ndarray, predicted: np.ndarray, errors: Sequence[str]) -> None:
        a, b = self.span(k)
        maps, predicted = np.asarray(maps, np.float32), np.asarray(predicted, np.int64)
        errors = [str(e) for e in errors]
        if not self._plain:  # a store of other encodings (made elsewhere): zarr encodes the chunks
            arrays = self._arrays
            try:
                if np.asarray(arrays["done"][a:b]).any():
                    arrays["done"][a:b] = False  # the batch is not done while it is written again
            except Exception:  # noqa: BLE001: a damaged done chunk is written below
                pass
            arrays["maps"][a:b], arrays["predicted"][a:b] = maps, predicted
            arrays["error"][a:b] = np.array([e.encode("utf-8", "backslashreplace").decode("utf-8") for e in errors],
                                            dtype=str)
            arrays["done"][a:b] = True
            return
        n = self.batch_size
        try:  # written again (a damaged batch): not done until the new chunks are all written
            os.unlink(self._chunk_path("done", k))
        except FileNotFoundError:
            pass
        self._put("maps", k, plain_chunk(maps, n, np.nan, "<f4"))
        self._put("predicted", k, plain_chunk(predicted, n, -1, "<i8"))
        self._put("error", k, vlen_utf8_chunk(errors, n))
        self._put("done", k, plain_chunk(np.ones(b - a, bool), n, False, "|b1"))  # last: the batch is whole

    def _put(self, name: str, k: int, data: bytes) -> None:
        """The chunk of batch k of array `name`, as one file written whole then renamed into place."""
        write_file(self._chunk_path(name, k), data)


# The encodings whose chunks _ZarrStore writes itself (those create_store makes): little-endian
# C-order bytes, and for strings vlen-utf8 alone; chunks keyed c/k/0/... ("default", "/").
_CHUNK_CODECS = {"maps": ["bytes"], "predicted": ["bytes"], "done": ["bytes"], "error": ["vlen-utf8"]}
_DATA_TYPES = {"maps": "float32", "predicted": "int64", "done": "bool", "error": "string", "files": "string"}


def _writes_plain_chunks(arrays: dict[str, Any], batch_size: int) -> bool:
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


def create_zarr(path: Path, files: list[str], map_shape: tuple[int, ...], batch_size: int,
                attrs: dict[str, Any]) -> _ZarrStore:
    """A new, empty _ZarrStore at `path` (nothing there, or an empty folder)."""
    import zarr

    names = files
    if not all(utf8(f) for f in files):
        attrs["file_names"] = ESCAPED_NAMES
        names = [escape_name(f) for f in files]
    n = len(files)
    # the attributes first: a store interrupted while it is made is still marked as this tool's
    group = zarr.open_group(str(path), mode="w", attributes=attrs)
    chunk = (batch_size,)
    # uncompressed: float maps hardly compress, and compressing them cost more than computing
    # them; the per-image arrays are small. Chunks in these plain encodings are what
    # _ZarrStore writes itself (`_CHUNK_CODECS`).
    arrays = {
        "maps": group.create_array("maps", shape=(n,) + tuple(map_shape), chunks=chunk + tuple(map_shape),
                                   dtype="float32", fill_value=np.nan, compressors=None),
        "predicted": group.create_array("predicted", shape=(n,), chunks=chunk, dtype="int64", fill_value=-1,
                                        compressors=None),
        "error": group.create_array("error", shape=(n,), chunks=chunk, dtype=str, compressors=None),
        "done": group.create_array("done", shape=(n,), chunks=chunk, dtype="bool", fill_value=False,
                                   compressors=None)}
    group.create_array("files", shape=(n,), chunks=(max(1, n),), dtype=str)[:] = np.array(names, dtype=str)
    return _ZarrStore(path, arrays, attrs, files)


def read_attrs(path: Path) -> dict[str, Any]:
    """The attributes of the Zarr store at `path`, from its zarr.json, checked."""
    try:
        doc = read_json(path / "zarr.json")
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the map store {path}: zarr.json is not JSON ({one_line(exc)})") from None
    return check_attrs(path, doc.get("attributes") if isinstance(doc, dict) else None, "zarr.json")


def open_zarr(path: Path, attrs: Optional[dict[str, Any]] = None) -> _ZarrStore:
    """The _ZarrStore at `path` (its attributes `attrs`, read and checked when not given), its
    arrays checked against them."""
    import zarr

    if attrs is None:
        attrs = read_attrs(path)

    def bad(what: str) -> StoreError:
        return StoreError(f"cannot read the map store {path}: {what}")

    try:
        group = zarr.open_group(str(path), mode="r+")
        arrays: dict[str, Any] = {}
        metas: dict[str, Any] = {}
        for name in ARRAYS:
            try:
                arrays[name] = group[name]
            except KeyError:
                arrays[name] = None
            if not isinstance(arrays[name], zarr.Array):
                raise bad(f"it has no array {name!r}")
            metas[name] = arrays[name].metadata.to_dict()
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001: any corruption zarr reports is one sentence here
        raise bad(one_line(exc)) from None
    n = metas["files"]["shape"][0] if len(metas["files"]["shape"]) == 1 else -1
    map_shape, batch_size = tuple(attrs["map_shape"]), attrs["batch_size"]
    for name, meta in metas.items():
        shape = tuple(meta["shape"])
        want = (n,) + (map_shape if name == "maps" else ())
        chunks = tuple(meta["chunk_grid"].get("configuration", {}).get("chunk_shape", ()))
        want_chunks = (max(1, n),) if name == "files" else (batch_size,) + want[1:]
        if shape != want or meta["data_type"] != _DATA_TYPES[name]:
            raise bad(f"the array {name} is {meta['data_type']} {shape}, not {_DATA_TYPES[name]} {want}")
        if meta["chunk_grid"].get("name") != "regular" or chunks != want_chunks:
            raise bad(f"the array {name} is in chunks of {chunks}, not {want_chunks}")
    files = _zarr_files(path, arrays["files"], metas["files"], n, bad)
    if attrs.get("file_names") == ESCAPED_NAMES:
        files = [unescape_name(f) for f in files]
    return _ZarrStore(path, arrays, attrs, files)


def _zarr_files(path: Path, array: Any, meta: dict[str, Any], n: int,
                bad: Callable[[str], StoreError]) -> list[str]:
    """The `n` names of the `files` array (one chunk), read and checked here where its encoding is
    vlen-utf8 (zstd-compressed, as create_store makes it, or not): zarr would first allocate the
    `n` names its metadata claims, which a damaged zarr.json makes any number."""
    if not n:
        return []
    key = array.metadata.chunk_key_encoding.encode_chunk_key((0,))
    data = file_bytes(path / "files" / key, name=f"files/{key}")
    if isinstance(data, str):
        raise bad(f"its file names cannot be read: {data}")
    codecs = [c.get("name") for c in meta.get("codecs", [])]
    if codecs not in (["vlen-utf8"], ["vlen-utf8", "zstd"]):
        try:  # another encoding, written elsewhere: zarr decodes it
            return [str(f) for f in array[:].tolist()]
        except Exception as exc:  # noqa: BLE001
            raise bad(f"its file names cannot be read ({one_line(exc)})") from None
    if codecs[-1] == "zstd":
        from numcodecs import Zstd

        try:
            data = bytes(Zstd().decode(data))
        except Exception as exc:  # noqa: BLE001: a damaged frame fails in the codec, in many ways
            raise bad(f"its file names (files/{key}) cannot be decompressed ({one_line(exc)})") from None
    names = read_vlen_utf8(data, n)
    if names is None:
        raise bad(f"its file names (files/{key}) are not a chunk of {n} names")
    return names
