"""The store a batch run writes: a new one, or the earlier run's to continue (`resume`), checked
to be the same run, and held under its lock."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .store import StoreError, create_store, open_store, store_path
from .store_lock import acquire

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable

    from .store_base import MapStore


def prepared_store(out: str | os.PathLike[str], files: Iterable[str], map_shape: tuple[int, ...], batch_size: int,
                   attrs: dict[str, Any], resume: bool, use_zarr: Optional[bool]) -> MapStore:
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


def _new_store(path: Path, files: Iterable[str], map_shape: tuple[int, ...], batch_size: int,
               attrs: dict[str, Any]) -> MapStore:
    """create_store, its failures to write (a full disk) one line naming the file."""
    try:
        return create_store(path, files, map_shape, batch_size, attrs)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise StoreError(f"cannot create the map store {path}{where}: {exc.strerror or exc}") from None


def _resumed_store(out: Path, path: Path, files: Iterable[str], map_shape: tuple[int, ...], batch_size: int,
                   attrs: dict[str, Any]) -> MapStore:
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


def _difference(key: str, then: Any, now: Any) -> str:
    """What changed in one attribute of a run, for the message refusing to resume it."""
    if key == "files":
        return f"images ({len(then or [])} then, {len(now)} now)" if len(then or []) != len(now) else "images"
    if isinstance(then, dict) and isinstance(now, dict):
        keys = [k for k in now if then.get(k) != now[k]]
        return ", ".join(f"{k} ({then.get(k)!r} then, {now[k]!r} now)" for k in keys)
    return f"{key} ({then!r} then, {now!r} now)"


def json_round_trip(value: Any) -> Any:
    """`value` as it reads back from a store's JSON attributes (tuples become lists)."""
    return json.loads(json.dumps(value))
