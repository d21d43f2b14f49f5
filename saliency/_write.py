"""Files appear whole or not at all: every file the package writes goes through `atomic_path`.

The writer writes to a temporary file in the target's folder, which is then renamed over the
target (`os.replace`, atomic when both names are on one file system). A run interrupted with
Ctrl-C removes its temporary file; a killed process leaves at most a hidden `.NAME.*.part` file
beside the target, never a truncated target, and an existing target keeps its old contents.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import IO, Any, Iterator, Union

StrPath = Union[str, "os.PathLike[str]"]

PART_SUFFIX = ".part"


def part_name(path: StrPath) -> Path:
    """A fresh temporary name beside `path`: `.NAME.<random>.part`."""
    path = Path(path)
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{PART_SUFFIX}")


def is_part(path: StrPath) -> bool:
    """Whether `path` is a temporary file left by an interrupted writer."""
    name = Path(path).name
    return name.startswith(".") and name.endswith(PART_SUFFIX)


@contextlib.contextmanager
def atomic_path(path: StrPath) -> Iterator[Path]:
    """Yields a temporary path beside `path` to write to. When the block ends normally that file
    replaces `path`; when it raises (KeyboardInterrupt included) the temporary file is removed."""
    path = Path(path)
    tmp = part_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_open(path: StrPath, mode: str = "wb", **kwargs: Any) -> Iterator[IO[Any]]:
    """`open(path, mode)` for writing, through `atomic_path`: the file replaces `path` on close."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files; mode must be 'w' or 'wb', got {mode!r}")
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as f:
        yield f


def write_text(path: StrPath, text: str, encoding: str = "utf-8") -> Path:
    """Write `text` to `path` whole (through `atomic_path`); returns the path."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)
    return Path(path)
