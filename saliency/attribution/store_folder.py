"""The folder format of the map store (`store.py`), where Zarr is not installed: `maps/`, its
`index.json` (attributes, file names) and per batch k `maps.k.npy` and `batch.k.json` (the
batch's first image, predictions, errors and done marks)."""
from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ..nn.errors import one_line
from .store_base import NOT_DONE, Batch, MapStore
from .store_files import StoreError, check_attrs, check_files, npy_bytes, read_json, read_npy, write_file

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path


class _FolderStore(MapStore):
    def __init__(self, path: str | os.PathLike[str], attrs: dict[str, Any], files: Iterable[str]) -> None:
        super().__init__(path, "npy", attrs, files)

    def _reopen(self) -> _FolderStore:
        return open_folder(self.path)

    def _batch(self, k: int) -> Batch:
        record_path = self.path / f"batch.{k}.json"
        if not record_path.is_file():
            return NOT_DONE
        a, z = self.span(k)
        n = z - a
        try:
            record = read_json(record_path, limit=(1 << 20) + n * 4096)
        except (OSError, ValueError):
            return Batch(False, f"batch.{k}.json is not JSON", None, None)
        # "first" (the batch's first image; not in a store of the version before it) ties the record
        # to its place: a record read with another batch size than it was written with is not done
        if not (isinstance(record, dict) and record.get("done") == [True] * n and record.get("first", a) == a
                and _ints(record.get("predicted"), n) and _strings(record.get("error"), n)):
            return Batch(False, f"batch.{k}.json is not the record of its {n} images", None, None)
        reason = read_npy(self.path / f"maps.{k}.npy", (n,) + self.map_shape, read=False)
        if reason:
            return Batch(False, reason, None, None)
        return Batch(True, None, np.array(record["predicted"], np.int64), record["error"])

    def _read_maps(self, k: int) -> np.ndarray | str | None:
        a, z = self.span(k)
        return read_npy(self.path / f"maps.{k}.npy", (z - a,) + self.map_shape)

    def write_batch(self, k: int, maps: np.ndarray, predicted: np.ndarray, errors: Sequence[str]) -> None:
        a, b = self.span(k)
        maps = np.ascontiguousarray(maps, np.float32)
        record = self.path / f"batch.{k}.json"
        try:  # written again (a damaged batch): not done until its maps are written
            os.unlink(record)
        except FileNotFoundError:
            pass
        write_file(self.path / f"maps.{k}.npy", npy_bytes(maps))
        text = {"first": a, "predicted": [int(p) for p in predicted], "error": [str(e) for e in errors],
                "done": [True] * (b - a)}
        write_file(record, (_json(text) + "\n").encode("utf-8"))


def _ints(values: Any, n: int) -> bool:
    return (isinstance(values, list) and len(values) == n
            and all(isinstance(v, int) and not isinstance(v, bool) and -2 ** 63 <= v < 2 ** 63 for v in values))


def _strings(values: Any, n: int) -> bool:
    return isinstance(values, list) and len(values) == n and all(isinstance(v, str) for v in values)


def _json(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, **kwargs)  # ASCII: a lone surrogate in a name is written as its \u escape


def create_folder(path: Path, files: list[str], attrs: dict[str, Any]) -> _FolderStore:
    """A new, empty _FolderStore at `path` (nothing there, or an empty folder)."""
    path.mkdir(parents=True, exist_ok=True)
    write_file(path / "index.json", (_json({"attrs": attrs, "files": files}, indent=1) + "\n").encode("utf-8"))
    return _FolderStore(path, attrs, files)


def open_folder(path: Path) -> _FolderStore:
    """The _FolderStore at `path`, its index checked."""
    try:
        index = read_json(path / "index.json")
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the map store {path}: index.json is not JSON ({one_line(exc)})") from None
    if not isinstance(index, dict):
        raise StoreError(f"cannot read the map store {path}: index.json holds {type(index).__name__}, not an object")
    attrs = check_attrs(path, index.get("attrs"), "index.json")
    files = check_files(path, index.get("files"), "index.json")
    _check_batch_files(path, len(files), attrs["batch_size"])
    return _FolderStore(path, attrs, files)


_BATCH_FILE = re.compile(r"(?:maps\.(\d+)\.npy|batch\.(\d+)\.json)")


def _check_batch_files(path: Path, n: int, batch_size: int) -> None:
    """A StoreError when the folder holds a batch past the `n` images of its index."""
    batches = -(-n // batch_size)
    for name in os.listdir(path):
        m = _BATCH_FILE.fullmatch(name)
        if m and int(m.group(1) or m.group(2)) >= batches:
            raise StoreError(f"cannot read the map store {path}: it holds {name}, but index.json lists {n} images, "
                             f"{batches} batch{'es' if batches != 1 else ''} of {batch_size}; index.json is damaged")
