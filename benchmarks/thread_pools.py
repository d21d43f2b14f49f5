"""The kernels' thread pool: what a parallel region costs, products in it, and maps beside other pools.

    python benchmarks/thread_pools.py [--repeats 15]

Every part runs in fresh processes (so that import order and environment are as a user's would
be), under each GNU OpenMP wait policy: the default (workers spin for a while after a region,
then sleep), `OMP_WAIT_POLICY=active` (they keep spinning) and `OMP_WAIT_POLICY=passive` (they
sleep at once). Printed per policy, medians in microseconds or ms:

* an empty region of the pool (a `prange` over the threads), back to back and after a 2 ms sleep;
* a ReLU over 2**20 float32 elements, whole on the calling thread and in parts, after a 2 ms sleep;
* the products of the convolution layers' shapes in GFLOP/s: `kernels.matmul` (in the pool, one
  BLAS thread per part), NumPy on one BLAS thread, NumPy on OpenBLAS's own threads, and PyTorch
  where it is installed (2 threads);
* one map of the reference models (forward and the backward of the all-ones seed, weights frozen)
  with saliency imported first, NumPy first, and PyTorch first and used between our maps.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

REGIONS = """
import time, statistics, numpy as np
from numba import njit, prange
import saliency
from saliency.kernels import activation, blas, threads

@njit(parallel=True, nogil=True)
def empty(a):
    for t in prange(a.size):
        a[t] += 1

def med(f, sleep, n):
    ts = []
    for _ in range(n):
        if sleep:
            time.sleep(sleep)
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6

a = np.zeros(threads.get_num_threads())
empty(a)
x = np.random.default_rng(0).standard_normal((2, 1 << 19)).astype(np.float32)
out = [med(lambda: empty(a), 0, 2000), med(lambda: empty(a), 0.002, 300)]
for elements in (1 << 62, 1):
    threads.PARALLEL_ELEMENTS = elements
    activation.relu_forward(x)
    out.append(med(lambda: activation.relu_forward(x), 0.002, 200))
shapes = [((64, 576), (576, 1024)), ((128, 1152), (1152, 256)), ((256, 2304), (2304, 64)), ((512, 4608), (4608, 16))]
try:
    import torch
    torch.set_num_threads(threads.get_num_threads())
except ImportError:
    torch = None
for sa, sb in shapes:
    p, q = np.ones(sa, np.float32), np.ones(sb, np.float32)
    flops = 2.0 * sa[0] * sa[1] * sb[1]
    calls = [lambda: threads.matmul(p, q), lambda: blas.matmul(p, q), lambda: np.matmul(p, q)]
    if torch is not None:
        tp, tq = torch.ones(sa), torch.ones(sb)
        calls.append(lambda: torch.matmul(tp, tq))
    for f in calls:
        time.sleep(0.15)
        f()
        out.append(flops / med(f, 0.002, 40) / 1e3)
print(" ".join(f"{v:.1f}" for v in out))
"""

MAPS = """
import sys, time, statistics
first = sys.argv[1]
if first == "numpy":
    import numpy
elif first == "torch":
    import torch
import numpy as np
import saliency as sl
sys.path.insert(0, {here!r})
from reference_models import build, random_input
if first == "torch":  # PyTorch also works in this process, between our maps
    torch.set_num_threads(2)
    tm = build("classifier", torch.nn).eval().requires_grad_(False)
    tx = torch.tensor(random_input("classifier", 1), requires_grad=True)
out = []
for name, batch in (("classifier", 1), ("classifier", 32), ("depth", 1)):
    model = build(name, sl.nn).eval().requires_grad_(False)
    x = sl.tensor(random_input(name, batch), requires_grad=True)
    with sl.no_grad():
        v = np.ones(model(x).shape, np.float32)
    times = []
    for i in range({repeats} + 3):
        t0 = time.perf_counter()
        sl.autograd.grad(model(x), x, v)
        times.append(time.perf_counter() - t0)
        if first == "torch":
            torch.autograd.grad(tm(tx).sum(), tx)
    out.append(statistics.median(times[3:]) * 1e3)
print(" ".join(f"{{t:.2f}}" for t in out))
"""

POLICIES = [("default", {}), ("OMP_WAIT_POLICY=active", {"OMP_WAIT_POLICY": "active"}),
            ("OMP_WAIT_POLICY=passive", {"OMP_WAIT_POLICY": "passive"})]
SHAPES = ["64x576 @ 576x1024", "128x1152 @ 1152x256", "256x2304 @ 2304x64", "512x4608 @ 4608x16"]
FIRST = [("saliency imported first", "saliency"), ("NumPy imported first", "numpy"),
         ("PyTorch imported first, used between maps", "torch")]


def fresh(code, args, env, processes=3):
    """Medians over `processes` fresh processes of the numbers each prints."""
    rows = []
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-c", code] + args, env={**os.environ, **env}, capture_output=True,
                             text=True, timeout=1800)
        if out.returncode:
            raise RuntimeError(out.stderr)
        rows.append([float(v) for v in out.stdout.split()])
    return [statistics.median(col) for col in zip(*rows)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        engines = ["ours", "NumPy 1 thread", "NumPy (OpenBLAS threads)", "PyTorch"]
    except ImportError:
        engines = ["ours", "NumPy 1 thread", "NumPy (OpenBLAS threads)"]
    for policy, env in POLICIES:
        r = fresh(REGIONS, [], env)
        print(f"## {policy}")
        print(f"empty region: {r[0]:.1f} us back to back, {r[1]:.1f} us after a 2 ms sleep; "
              f"ReLU of 2**20 elements after a 2 ms sleep: whole {r[2]:.0f} us, in parts {r[3]:.0f} us "
              f"({r[3] / r[2]:.2f})")
        print("| product | " + " | ".join(f"{e} GFLOP/s" for e in engines) + " |")
        print("| --- |" + " ---: |" * len(engines))
        for i, shape in enumerate(SHAPES):
            cells = r[4 + i * len(engines):4 + (i + 1) * len(engines)]
            print(f"| {shape} | " + " | ".join(f"{c:.0f}" for c in cells) + " |")
        print("| maps (ms) | classifier b1 | classifier b32 | depth b1 |")
        print("| --- | ---: | ---: | ---: |")
        for label, first in FIRST:
            if first == "torch" and len(engines) < 4:
                continue
            cells = fresh(MAPS.format(here=HERE, repeats=args.repeats), [first], env)
            print(f"| {label} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
        print()


if __name__ == "__main__":
    main()
