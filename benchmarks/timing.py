"""Timing helpers shared by the benchmarks."""
import contextlib
import statistics
import time


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
