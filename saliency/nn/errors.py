"""The error a malformed weights file raises, and the helpers both weight readers share."""
import math

import numpy as np


class WeightsError(ValueError):
    """A `.npz`, `.safetensors` or `.pth` file that cannot be read as weights: one sentence naming the
    file and what is wrong with it (truncated, a length field that does not fit the file, a
    refused dtype, a damaged archive, ...)."""


def short(value, limit=60):
    """repr(value) cut to `limit` characters, for error messages that must stay one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def too_big(shape, itemsize):
    """Whether NumPy would refuse an array of `shape` even when it is empty: its nonzero dimensions
    times the item size must stay below 2**63 bytes."""
    return math.prod(d for d in shape if d) * itemsize >= 2 ** 63


def one_line(exc, limit=200):
    """An exception's message on one line of at most `limit` characters (its type name when it
    has no message)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_exactly(stream, nbytes):
    """A new uint8 array of `nbytes` bytes read from `stream` in chunks of at most 1 MiB, and how
    many bytes the stream actually had (less than `nbytes` if it ended early). The caller must
    have checked `nbytes` against the file's real size: this allocates it."""
    buf = np.empty(nbytes, np.uint8)
    view = memoryview(buf)
    pos = 0
    while pos < nbytes:
        got = stream.readinto(view[pos:pos + _CHUNK])
        if not got:
            break
        pos += got
    return buf, pos


_CHUNK = 1 << 20
