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
reads as done and is not; writing a batch again first takes that mark away. Every chunk file is
written whole, then renamed into place; in a Zarr store made here (plain encodings:
little-endian bytes, vlen-utf8 strings, no compression) the store writes the chunk files itself,
in the encoding zarr would give them.

A store is checked when it is opened (its attributes, index and arrays: a StoreError naming
the store and what is wrong), and a batch counts as done only when its mark is there and its
chunks are whole: each of the right size (a .npy chunk: its header too), its records of the
right length. A batch marked done whose chunks are not is damaged (`damaged`): it reads as not
done, so that a resumed run computes it again. The attribute "format" marks a store this tool
wrote (`create_store` replaces only such a store, `store_files.clear_for_new_store`). A Zarr
store's file names that UTF-8 cannot hold (a name read from bytes that are not UTF-8) are
stored escaped (`store_files.escape_name`, attribute file_names="escaped"); `files` gives them
back as they were given.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .store_base import MapStore  # noqa: F401 (the interface, for users of this module)
from .store_files import FORMAT_VERSION, MARKER, StoreError, clear_for_new_store
from .store_folder import _FolderStore, create_folder, open_folder  # noqa: F401
from .store_lock import acquire
from .store_zarr import _ZarrStore, create_zarr, open_zarr  # noqa: F401

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable


ZARR_NAME, FOLDER_NAME = "maps.zarr", "maps"
INSTALL_ZARR = "pip install 'saliency-maps[scale]'"


def zarr_available() -> bool:
    """Whether the optional `zarr` package can be imported."""
    try:
        import zarr  # noqa: F401
    except ImportError:
        return False
    return True


def store_path(folder: str | os.PathLike[str], use_zarr: Optional[bool] = None) -> Path:
    """Where the store of an output folder lives: FOLDER/maps.zarr with Zarr (the default when it
    is installed), else FOLDER/maps."""
    use_zarr = zarr_available() if use_zarr is None else use_zarr
    return Path(folder) / (ZARR_NAME if use_zarr else FOLDER_NAME)


def _attrs(map_shape: Iterable[int], batch_size: int, attrs: dict[str, Any]) -> dict[str, Any]:
    out = {"format": MARKER, "format_version": FORMAT_VERSION, "map_shape": [int(s) for s in map_shape],
           "batch_size": int(batch_size)}
    out.update(attrs)
    return out


def create_store(path: str | os.PathLike[str], files: Iterable[str | os.PathLike[str]], map_shape: tuple[int, ...],
                 batch_size: int, attrs: dict[str, Any]) -> _ZarrStore | _FolderStore:
    """A new, empty store at `path` (maps.zarr for Zarr, any other name for the folder format).
    What is there is replaced only when it is a store this tool wrote holding nothing else
    (`store_files.clear_for_new_store`); anything else is a StoreError, and nothing is deleted.
    `attrs` (JSON values) are kept with it."""
    path = Path(path)
    names = [str(f) for f in files]
    attrs = _attrs(map_shape, batch_size, attrs)
    clear_for_new_store(path)
    if path.suffix == ".zarr":
        return create_zarr(path, names, map_shape, batch_size, attrs)
    return create_folder(path, names, attrs)


def open_store(path: str | os.PathLike[str], *, lock: Optional[str] = None) -> MapStore:
    """The store at `path` (a maps.zarr group or a maps folder), for reading or to continue, checked
    (a StoreError saying what is wrong with a store that cannot be read). lock="read": refused
    while a run writes the store (StoreError naming it), and no run can replace it until
    `close()`."""
    path = Path(path)
    held = acquire(path, shared=True) if lock == "read" else None
    try:
        store = _open(path)
    except BaseException:
        if held is not None:
            held.release()
        raise
    store.lock = held
    return store


def _open(path: Path) -> MapStore:
    if (path / "index.json").is_file():
        return open_folder(path)
    if (path / "zarr.json").is_file():
        if not zarr_available():
            raise StoreError(f"{path} is a Zarr store and zarr is not installed: {INSTALL_ZARR}")
        return open_zarr(path)
    raise StoreError(f"{path} holds no map store (no index.json or zarr.json)")
