"""Thread pools: attribution-map times whatever was imported first (saliency, NumPy or PyTorch).

    python benchmarks/thread_pools.py [--repeats 15]

NumPy's OpenBLAS workers spin-wait after each matrix product; PyTorch's OpenMP workers do the
same after each op. On a machine with few cores, any other thread pool then waits for a core.
Each scenario runs in a fresh process, so that import order and environment are as a user's
would be; every figure is the median time of one map (forward + backward of a seed to the
input, weights frozen), in ms.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = """
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

SCENARIOS = [
    ("saliency imported first", "saliency", {}),
    ("NumPy imported first", "numpy", {}),
    ("PyTorch imported first, used between maps", "torch", {}),
    ("OPENBLAS_THREAD_TIMEOUT=4 (BLAS workers sleep at once)", "saliency", {"OPENBLAS_THREAD_TIMEOUT": "4"}),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    script = CHILD.format(here=HERE, repeats=args.repeats)
    print(f"{'scenario':55s} {'classifier b1':>14s} {'classifier b32':>15s} {'depth b1':>9s}   (ms, median)")
    for label, first, env in SCENARIOS:
        rows = []
        for _ in range(3):  # three fresh processes; the median of their medians
            out = subprocess.run([sys.executable, "-c", script, first], env={**os.environ, **env},
                                 capture_output=True, text=True, timeout=900)
            if out.returncode:
                raise RuntimeError(out.stderr)
            rows.append([float(v) for v in out.stdout.split()])
        cells = [statistics.median(col) for col in zip(*rows)]
        print(f"{label:55s} {cells[0]:14.2f} {cells[1]:15.2f} {cells[2]:9.2f}")


if __name__ == "__main__":
    main()
