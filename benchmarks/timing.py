"""Timing helpers shared by the benchmarks."""
import contextlib
import statistics
import subprocess
import sys
import time

SETTLE = 0.15  # seconds: longer than either engine's idle threads spin after their work


def alternate(fa, fb, repeats):
    """Medians (seconds) of `repeats` alternating timed calls of fa and fb. Before each timed call
    a pause of SETTLE seconds and, for calls shorter than a second, one untimed call of the same
    engine: each engine's idle threads spin-wait after its work (OpenBLAS's and OpenMP's), and
    timing one engine right after the other would charge it for the other's spinning threads."""
    times = {fa: [], fb: []}
    last = {fa: 0.0, fb: 0.0}
    fa(), fb()
    for _ in range(repeats):
        for f in (fa, fb):
            time.sleep(SETTLE)
            if last[f] < 1.0:
                f()
            t0 = time.perf_counter()
            f()
            last[f] = time.perf_counter() - t0
            times[f].append(last[f])
    return statistics.median(times[fa]), statistics.median(times[fb])


# The child's peak resident memory: VmHWM of /proc/self/status where there is one (it belongs to
# the process's own memory map; ru_maxrss can carry the parent's peak across fork and exec on
# Linux, so a child started from a large benchmark process would report the parent's size).
PEAK = """
import resource
def peak_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""


def peak_of_process(code, cwd):
    """The peak memory (MB) a fresh Python process running `code` prints last (its `peak_mb()`, from
    PEAK), or RuntimeError with the process's last line of errors."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"one-map process failed: {proc.stderr.strip().splitlines()[-1:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def median_ms(fn, repeats):
    """Median wall time of `repeats` calls of fn(), in milliseconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


@contextlib.contextmanager
def replaced(obj, name, value):
    """obj.name is value within the block (a path forced on or off), restored after."""
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


def pick_is_right(pick, taken_ms, other_ms, slack=1.1):
    """Whether a choice between two paths (pick: the first one) took the faster, or one within
    `slack` of it."""
    return taken_ms <= slack * other_ms if pick else other_ms <= slack * taken_ms


def settled_median_ms(fn, repeats, pause=0.05):
    """median_ms after a pause (the threads of the previous call settle) and one untimed call."""
    time.sleep(pause)
    fn()
    return median_ms(fn, repeats)
