"""Keeping freed memory for reuse: `keep_freed_memory()`, for processes that compute many batches.

glibc's malloc serves a request above its mmap threshold (128 KiB, growing up to 32 MiB) with
fresh pages from the kernel and returns them when the array is freed, and a large allocation
below it can still be trimmed from the top of the heap. Every new activation array of a large
batch then starts with the kernel zeroing its pages, one more pass over memory that the
convolutions did not ask for. `keep_freed_memory()` raises both thresholds so that freed arrays
stay in the heap and the next batch's arrays of the same sizes reuse them: the process's peak
memory is unchanged (the same arrays are live at once), it only keeps what it had.

It changes the whole process, so the library never calls it on its own: the command line does,
and a program that maps many batches may. Elsewhere than glibc (macOS, Windows, musl) it does
nothing and returns False.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Arrays up to this size come from the heap; freed memory above the heap's top is returned to the
# system only past this much.
KEEP_BYTES = 1 << 30

_done = None


def keep_freed_memory() -> bool:
    """Make malloc keep freed arrays (up to KEEP_BYTES each) for reuse in this process. True if it
    did (glibc), False where there is no glibc malloc to tune."""
    global _done
    if _done is None:
        _done = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                mallopt = libc.mallopt
            except (OSError, AttributeError):
                return False
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            _done = bool(mallopt(_M_MMAP_THRESHOLD, KEEP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES))
    return _done


def available_bytes() -> int | None:
    """The memory the system can give this process now without swapping (Linux's MemAvailable; the
    free physical pages elsewhere), or None where that cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def format_bytes(n: float) -> str:
    """A size for a message: '512 KiB', '3.4 MiB', '12.0 GiB'."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{max(1, round(n / 1024))} KiB"
