"""Timing helpers shared by the benchmarks."""
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
