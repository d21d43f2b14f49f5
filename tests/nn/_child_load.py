"""Load weights files in a child process and measure each: what it ended in, its wall time, and the
peak RSS it took over the child's RSS before it (on Linux the high-water mark VmHWM, reset before
each file through /proc/self/clear_refs; elsewhere getrusage's ru_maxrss, the peak over all files
so far, which can only hide growth below the imports' own peak). Used by the hostile-file tests,
whose bounds are on real memory, not only on what tracemalloc sees."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r'''
import json, resource, sys, time
from saliency import nn
import numpy as np

paths = json.load(open(sys.argv[1]))
nn.load(sys.argv[2])                          # warm up: the first load's imports and caches
try:                                          # a safety net: a load gone wrong fails, not the machine
    with open("/proc/self/statm") as f:
        virtual = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (virtual + (3 << 30), resource.getrlimit(resource.RLIMIT_AS)[1]))
except (OSError, ValueError):
    pass


def peak():
    """The peak RSS in KiB: Linux's VmHWM (ru_maxrss there also holds the RSS of the parent that forked
    this child, folded in at exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def reset_peak():
    """Linux: the peak RSS set back to the current RSS; elsewhere the peak so far."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return peak()


for path in paths:
    base = reset_peak()
    start = time.perf_counter()
    try:
        arrays = nn.load(path)
        ok = isinstance(arrays, dict) and all(isinstance(v, np.ndarray) for v in arrays.values())
        outcome, message = ("arrays" if ok else "not arrays"), f"{len(arrays)} arrays"
    except nn.WeightsError as exc:
        outcome, message = "WeightsError", str(exc)
    except BaseException as exc:  # noqa: BLE001 -- reported, and the test fails on it
        outcome, message = type(exc).__name__, str(exc)[:500]
    seconds = time.perf_counter() - start
    rss = (peak() - base) / 1024
    print(json.dumps({"path": path, "outcome": outcome, "message": message, "seconds": seconds, "rss_mb": rss}),
          flush=True)
'''


def load_in_child(paths, scratch, timeout=120):
    """[{path, outcome ("arrays" or "WeightsError", else the exception's type), message, seconds, rss_mb}]
    for each of `paths`, loaded in order by one child process (after its imports and a first load);
    rss_mb is the peak RSS the load took over the RSS before it, in MiB."""
    listing = Path(scratch) / "paths.json"
    listing.write_text(json.dumps([str(p) for p in paths]))
    warm = ROOT / "tests" / "nn" / "fixtures" / "state_dict.pth"
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(listing), str(warm)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(paths), f"the child stopped after {len(results)} of {len(paths)} files: " \
                                       f"{proc.stderr[-2000:]}"
    return results
