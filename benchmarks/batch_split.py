"""The two-thread batch split on and off, inside benchmarks/attribution.py's alternation with PyTorch.

    python benchmarks/batch_split.py [--job "classifier b32"] [--pairs 6]

Each pair times the job twice, once with batched kernel calls split in two halves over two
threads (`saliency.kernels.threads`) and once without, in alternating order; each time is a block
like attribution.py's (ours, PyTorch frozen, PyTorch trainable, each after a 0.15 s pause and an
untimed run, 10 rounds of 3 runs). Printed: ours / PyTorch frozen per block, and the medians.
Run as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...` on machines that set those.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attribution import GOALS, make_runners  # noqa: E402

from saliency.kernels import threads  # noqa: E402

# (SPLIT_ELEMENTS, SPLIT_FLOPS): the package's thresholds, or out of reach
MODES = {"split": (threads.SPLIT_ELEMENTS, threads.SPLIT_FLOPS), "no split": (1 << 62, float("inf"))}


def block(ours, frozen, trainable, rounds=10, runs=3):
    """Medians (ms) of ours and of PyTorch frozen, the three engines alternating as in attribution.py."""
    t_ours, t_frozen = [], []
    for _ in range(rounds):
        for fn, times in ((ours, t_ours), (frozen, t_frozen), (trainable, [])):
            time.sleep(0.15)
            fn()
            for _ in range(runs):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
    return statistics.median(t_ours) * 1e3, statistics.median(t_frozen) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", default="classifier b32", choices=list(GOALS))
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(2)
    ours, frozen, trainable = make_runners(args.job, torch)
    for _ in range(3):
        ours(), frozen(), trainable()
    ratios = {mode: [] for mode in MODES}
    for pair in range(args.pairs):
        for mode in (list(MODES) if pair % 2 == 0 else list(MODES)[::-1]):
            threads.SPLIT_ELEMENTS, threads.SPLIT_FLOPS = MODES[mode]
            o, f = block(ours, frozen, trainable)
            ratios[mode].append(o / f)
            print(f"{args.job}, {mode:8s}: ours {o:8.3f} ms, PyTorch {f:8.3f} ms, ratio {o / f:.2f}", flush=True)
    threads.SPLIT_ELEMENTS, threads.SPLIT_FLOPS = MODES["split"]
    print("median ratios: " + ", ".join(f"{mode} {statistics.median(r):.2f}" for mode, r in ratios.items()))


if __name__ == "__main__":
    main()
