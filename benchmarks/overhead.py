"""Per-op overhead of the engine: forward + backward of a chain of tiny ops, against PyTorch.

    python benchmarks/overhead.py [--ops 200] [--repeats 200]

Both engines run alternately in this process; medians are printed with the ratio
ours / PyTorch (lower is better). Then the same for layers: a chain of 3x3 convolutions and
ReLUs on a tiny map (4 channels, 2x2), forward and input gradient, whose time is the per-layer
cost a model's small layers pay before any arithmetic. Also times backward through chains of
10,000 to 100,000 ops to show that the cost per op stays flat (linear time).
"""
import argparse
import statistics
import time

import numpy as np

import saliency as sl
from timing import median_ms


def chain(x, n):
    """n tiny ops on x, then a sum: the same code runs on our tensors and on PyTorch's."""
    y = x
    for i in range(n // 4):
        y = y * 1.0001
        y = y + 0.001
        y = y.tanh()
        y = y - 0.0005
    return y.sum()


def layers(F, x, w, n):
    """n pairs of a 3x3 convolution (padding 1) and a ReLU on x: the same code on both engines."""
    y = x
    for _ in range(n):
        y = F.relu(F.conv2d(y, w, None, 1, 1))
    return y.sum()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    n = args.ops
    x = sl.tensor(np.random.default_rng(0).standard_normal(4).astype(np.float32), requires_grad=True)

    def ours():
        chain(x, n).backward()

    def ours_forward():
        with sl.no_grad():
            chain(x, n)

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(2)
        tx = torch.tensor(x.numpy(), requires_grad=True)

        def theirs():
            chain(tx, n).backward()

    for _ in range(20):  # warm-up
        ours()
        if torch is not None:
            theirs()
    rounds = 5
    ours_ms, theirs_ms = [], []
    for _ in range(rounds):  # alternate so that both see the same machine load
        ours_ms.append(median_ms(ours, args.repeats // rounds))
        if torch is not None:
            theirs_ms.append(median_ms(theirs, args.repeats // rounds))
    o = statistics.median(ours_ms)
    print(f"chain of {n} ops + sum, forward+backward, median of {args.repeats} runs")
    print(f"  saliency : {o:8.3f} ms   ({o / (n + 1) * 1e3:.2f} us per op)")
    if torch is not None:
        t = statistics.median(theirs_ms)
        print(f"  torch    : {t:8.3f} ms   ({t / (n + 1) * 1e3:.2f} us per op)   torch {torch.__version__}")
        print(f"  ratio saliency / torch: {o / t:.2f}  (goal <= 1.0)")

    pairs = n // 4
    w = np.full((4, 4, 3, 3), 0.01, np.float32)
    xl = sl.tensor(np.ones((1, 4, 2, 2), np.float32), requires_grad=True)
    runs = {"saliency": lambda: sl.autograd.grad(layers(sl.nn.functional, xl, sl.tensor(w), pairs), xl)}
    if torch is not None:
        txl, tw = torch.tensor(xl.numpy(), requires_grad=True), torch.tensor(w)
        runs["torch"] = lambda: torch.autograd.grad(layers(torch.nn.functional, txl, tw, pairs), txl)
    times = {name: [] for name in runs}
    for _ in range(5):
        for name, run in runs.items():
            run()
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(median_ms(run, max(1, args.repeats // rounds // 4)))
    print(f"\nchain of {pairs} (3x3 convolution 4 -> 4 channels on a 2x2 map, ReLU) + sum, forward and "
          f"input gradient")
    for name, ms in times.items():
        m = statistics.median(ms)
        print(f"  {name:<9}: {m:8.3f} ms   ({m / pairs * 1e3:.1f} us per convolution and ReLU)")
    if torch is not None:
        ratio = statistics.median(times["saliency"]) / statistics.median(times["torch"])
        print(f"  ratio saliency / torch: {ratio:.2f}")

    print("\nbackward through long chains (linear time: us per op should stay flat)")
    for length in (10_000, 50_000, 100_000):
        leaf = sl.tensor([1.0], requires_grad=True)
        y = leaf
        for _ in range(length):
            y = y * 1.0
        t0 = time.perf_counter()
        y.backward(sl.tensor([1.0]))
        dt = time.perf_counter() - t0
        print(f"  {length:7d} ops: backward {dt * 1e3:8.1f} ms  ({dt / length * 1e6:.2f} us per op)")
        del y


if __name__ == "__main__":
    main()
