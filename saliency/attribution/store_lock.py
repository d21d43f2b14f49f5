"""Who is using a map store: a lock file beside it, `.NAME.lock` (`.maps.zarr.lock` beside
`maps.zarr`), held with `fcntl.flock` for as long as a run writes the store (exclusive) or an
evaluation reads it (shared). The kernel releases the lock of a process that ends, however it
ends (kill -9 too), so a lock never outlives its holder. The holder writes its process id, host,
command line and start time into the file, and whoever is refused names it.

The holder that releases the lock last deletes the file. The lock is taken on the file the name
refers to at that moment: a process that opened the file just before another deleted it sees that
the name now refers to another file (or none) and takes the lock again.

Where `fcntl` does not exist (Windows) or the file system refuses locks, runs go on unlocked
(with a warning for the second).
"""
from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from .store_files import StoreError

fcntl: ModuleType | None  # the module, or None where it does not exist
try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

_BUSY = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)


def lock_path(store: str | os.PathLike[str]) -> Path:
    """The lock file of the store at `store`: `.NAME.lock` beside it."""
    store = Path(store)
    return store.parent / f".{store.name}.lock"


class StoreLock:
    """A lock held on a store (`acquire`); `release()` (or the end of a `with` block) gives it up."""

    def __init__(self, store: str | os.PathLike[str], fd: Optional[int], shared: bool) -> None:
        self.store, self.path, self.shared, self._fd = Path(store), lock_path(store), shared, fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the lock up; the file goes with the last holder."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self.shared and fcntl is not None:  # the file stays while another reader holds it (an fd: fcntl)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return
            if _names(fd, self.path):
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
        finally:
            os.close(fd)

    def __enter__(self) -> StoreLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001: at interpreter exit os may be gone; the kernel releases it
            pass


def _names(fd: int, path: str | os.PathLike[str]) -> bool:
    """Whether `path` is (still) the file open as `fd`."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def acquire(store: str | os.PathLike[str], *, shared: bool = False) -> StoreLock:
    """The lock of the store at `store`: exclusive for a run that writes it, `shared` for a reader.
    A StoreError naming the holder when another process holds it in a way that excludes this one."""
    store = Path(store)
    path = lock_path(store)
    if fcntl is None:
        return StoreLock(store, None, shared)
    for _ in range(100):  # the file is deleted under us only while another holder lets go
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if not shared:
                raise StoreError(f"cannot create the lock file {path} of the map store {store}: "
                                 f"{exc.strerror or exc}") from None
            try:  # a store in a folder this user cannot write: a lock someone else holds, or none
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                return StoreLock(store, None, shared)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno in _BUSY:
                raise StoreError(busy_message(store, holder)) from None
            warnings.warn(f"cannot lock {path} ({exc.strerror or exc}): another run could write the map store "
                          f"{store} at the same time", stacklevel=2)
            return StoreLock(store, None, shared)
        if _names(fd, path):
            _record(fd, "reading" if shared else "writing")
            return StoreLock(store, fd, shared)
        os.close(fd)
    raise StoreError(f"cannot lock the map store {store}: its lock file {path} keeps changing")


def _record(fd: int, role: str) -> None:
    """Write who holds the lock into its file (a reader's write may fail: a read-only file)."""
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": _command(), "role": role,
                       "since": time.time()}) + "\n"
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode("utf-8", "backslashreplace"), 0)
    except OSError:
        pass


def _holder(fd: int) -> Optional[dict[str, Any]]:
    """What the holder wrote into the lock file, or None."""
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        holder, _ = json.JSONDecoder().raw_decode(text)  # two readers writing at once: the first record
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _command() -> str:
    """This process's command line, on one line and at most 160 characters."""
    argv = list(sys.argv) or ["python"]
    name = Path(argv[0]).name
    if name in ("main.py", "__main__.py"):  # python -m saliency.cli.main
        name = "saliency"
    text = " ".join(" ".join(shlex.quote(str(a)) for a in [name] + argv[1:]).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _when(seconds: float) -> str:
    """HH:MM of `seconds` (since the epoch) today, else the date too."""
    then = time.localtime(seconds)
    return time.strftime("%H:%M" if then[:3] == time.localtime()[:3] else "%Y-%m-%d %H:%M", then)


def busy_message(store: str | os.PathLike[str], holder: Optional[dict[str, Any]]) -> str:
    """The line refusing a store whose lock `holder` (what it wrote, or None) holds."""
    if not holder:
        return (f"{store} is being written or read by another process (it holds {lock_path(store)}); wait for it "
                f"or stop it")
    role = "read" if holder.get("role") == "reading" else "written"
    who = f"process {holder.get('pid')} on {holder.get('host')}"
    if holder.get("command"):
        who += f" ({holder['command']})"
    if isinstance(holder.get("since"), (int, float)):
        try:
            who += f" since {_when(holder['since'])}"
        except (OverflowError, OSError, ValueError):
            pass
    return f"{store} is being {role} by {who}; wait for it or stop it"
