"""keep_freed_memory: a freed large array stays in the process's heap for the next one."""
import ctypes
import os
import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, sys
import numpy as np
from saliency.kernels.memory import keep_freed_memory

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Mallinfo2
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
a = np.ones(1 << 24, np.float32)  # 64 MiB
del a
print(kept, libc.mallinfo2().fordblks)
"""


def free_bytes_after_a_large_array(mode):
    # glibc's own defaults: without the MALLOC_* variables (Dask's nanny sets one in os.environ)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                         env=env).stdout
    kept, free = out.split()
    return kept, int(free)


def glibc_with_mallinfo2():
    try:
        return sys.platform.startswith("linux") and hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(not glibc_with_mallinfo2(), reason="glibc >= 2.33 only")
def test_a_freed_large_array_stays_in_the_heap():
    kept, free = free_bytes_after_a_large_array("keep")
    assert kept == "True"
    assert free >= 1 << 26
    _, free_default = free_bytes_after_a_large_array("default")
    assert free_default < 1 << 26  # by default the array's pages went back to the system
