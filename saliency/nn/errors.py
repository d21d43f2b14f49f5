"""The error a malformed weights file raises, and the helpers both weight readers share."""
import itertools
import math
from typing import IO, Any, Iterable, Protocol, cast

import numpy as np
from numpy.typing import NDArray


class WeightsError(ValueError):
    """A `.npz`, `.safetensors` or `.pth` file that cannot be read as weights: one sentence naming the
    file and what is wrong with it (truncated, a length field that does not fit the file, a
    refused dtype, a damaged archive, ...)."""


class Readable(Protocol):
    """A binary stream `read_exactly` fills buffers from (an open file, a zip member)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


def short(value: object, limit: int = 60) -> str:
    """repr(value) cut to `limit` characters, for error messages that must stay one short line. A
    value too big to walk whole (a pickle can nest containers deeply or share one container a
    million times over, which repr would print in full) is shown by `_brief`, which stops early."""
    text = repr(value) if _small(value) else _brief(value, limit)
    return text if len(text) <= limit else text[:limit - 3] + "..."


_SEQUENCES = (list, tuple, set, frozenset)
_BRACKETS: dict[type, tuple[str, str]] = {list: ("[", "]"), tuple: ("(", ")")}


def _small(value: object, parts: int = 200) -> bool:
    """Whether `value` has at most `parts` parts (containers and their items, counted as often as
    they are reached), no string longer than 1000 characters and no int repr would refuse."""
    todo: list[Any] = [value]
    while todo:
        parts -= 1
        if parts < 0:
            return False
        item = todo.pop()
        if isinstance(item, (str, bytes, bytearray)):
            if len(item) > 1000:
                return False
        elif isinstance(item, int):
            if item.bit_length() > 4000:   # repr refuses ints of more than 4300 digits
                return False
        elif isinstance(item, dict):
            todo.extend(itertools.islice(itertools.chain.from_iterable(item.items()), parts + 1))
        elif isinstance(item, _SEQUENCES):
            todo.extend(itertools.islice(item, parts + 1))
    return True


def _brief(value: object, room: int, depth: int = 0) -> str:
    """A repr-like text of `value` that stops after about `room` characters or 4 levels of nesting."""
    if isinstance(value, (str, bytes, bytearray)):
        return repr(value[:room]) + ("..." if len(value) > room else "")
    if isinstance(value, int) and not isinstance(value, bool):
        return repr(value) if value.bit_length() <= 200 else f"<an int of {value.bit_length()} bits>"
    if isinstance(value, dict):
        items: Iterable[Any]
        opening, closing, items = "{", "}", value.items()
    elif isinstance(value, _SEQUENCES):
        (opening, closing), items = _BRACKETS.get(type(value), ("{", "}")), value
    else:
        return repr(value) if _small(value) else f"<{type(value).__name__}>"
    if depth >= 4:
        return opening + "..." + closing
    parts: list[str] = []
    used = 0
    for item in items:
        if used >= room:
            parts.append("...")
            break
        if isinstance(value, dict):
            text = f"{_brief(item[0], room - used, depth + 1)}: {_brief(item[1], room - used, depth + 1)}"
        else:
            text = _brief(item, room - used, depth + 1)
        parts.append(text)
        used += len(text) + 2
    return opening + ", ".join(parts) + closing


def too_big(shape: Iterable[int], itemsize: int) -> bool:
    """Whether NumPy would refuse an array of `shape` even when it is empty: its nonzero dimensions
    times the item size must stay below 2**63 bytes."""
    return math.prod(d for d in shape if d) * itemsize >= 2 ** 63


def one_line(exc: BaseException | str, limit: int = 200) -> str:
    """An exception's message (or a text) on one line of at most `limit` characters (its type name
    when it has no message)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_exactly(stream: Readable | IO[bytes], nbytes: int) -> tuple[NDArray[np.uint8], int]:
    """A new uint8 array of `nbytes` bytes read from `stream` in chunks of at most 1 MiB, and how
    many bytes the stream actually had (less than `nbytes` if it ended early). The caller must
    have checked `nbytes` against the file's real size: this allocates it."""
    # typeshed's IO[bytes] (what zipfile.ZipFile.open returns) has no readinto; every binary file has it
    readable = cast(Readable, stream)
    buf = np.empty(nbytes, np.uint8)
    view = buf.data  # memoryview(buf), which NumPy's stubs only allow from Python 3.12
    pos = 0
    while pos < nbytes:
        got = readable.readinto(view[pos:pos + _CHUNK])
        if not got:
            break
        pos += got
    return buf, pos


_CHUNK = 1 << 20
