"""Benchmark conv2d forward and VJP algorithms on the zoo's layers (float32).

    OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/kernels_conv.py [--repeat 21]
    .venv/bin/python benchmarks/kernels_conv.py --pools

Without the two variables the GEMM path (Numba im2col, OpenBLAS GEMM, Numba col2im in one call)
stalls about 8 ms per call while each pool's threads spin-wait for the other's (see --pools).
OMP_WAIT_POLICY=PASSIVE also puts torch's OpenMP threads to sleep between regions and slows
torch 1.5-3x on small layers: for a fair ratio take torch's times from a run without it.

Prints, per layer and pass (forward, grad_x = input VJP, grad_w = weight VJP): median time
and GFLOP/s of each algorithm in saliency.kernels.conv2d (DIRECT: Numba, width innermost,
output channels blocked; GEMM: im2col + NumPy matmul), which one `choose_algorithm` picks,
torch.nn.functional.conv2d / torch.nn.grad.conv2d_input / conv2d_weight at the same thread
count when torch is installed, and ours/torch (time ratio of the picked algorithm, < 1 means
we are faster).
The NumPy float32 GEMM rate measured in the same run is printed first as the ceiling.
The machine is shared: every figure is a median of --repeat timed runs after a warm-up.

--pools measures the thread-pool interaction instead: a small parallel Numba kernel right after
a NumPy GEMM (OpenBLAS threads may still be spin-waiting) and a GEMM right after the kernel
(OpenMP threads may still be spinning), each in a fresh process per environment setting.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

from saliency.kernels import conv2d as K

# (model, name, N, C_in, C_out, H, W, kernel, stride, padding)
LAYERS = [
    ("classifier", "conv1 3->16 @64", 1, 3, 16, 64, 64, 3, 1, 1),
    ("classifier", "conv2 16->32 @32", 1, 16, 32, 32, 32, 3, 1, 1),
    ("classifier", "conv3 32->64 @16", 1, 32, 64, 16, 16, 3, 1, 1),
    ("classifier", "conv1 3->16 @64", 32, 3, 16, 64, 64, 3, 1, 1),
    ("classifier", "conv2 16->32 @32", 32, 16, 32, 32, 32, 3, 1, 1),
    ("classifier", "conv3 32->64 @16", 32, 32, 64, 16, 16, 3, 1, 1),
    ("depth", "enc1 3->16 @128", 1, 3, 16, 128, 128, 3, 1, 1),
    ("depth", "enc2 16->32 s2 @128", 1, 16, 32, 128, 128, 3, 2, 1),
    ("depth", "enc3 32->64 s2 @64", 1, 32, 64, 64, 64, 3, 2, 1),
    ("depth", "dec1 64->32 @64", 1, 64, 32, 64, 64, 3, 1, 1),
    ("depth", "dec2 32->16 @128", 1, 32, 16, 128, 128, 3, 1, 1),
    ("depth", "dec3 16->1 @128", 1, 16, 1, 128, 128, 3, 1, 1),
]


def median_time(fn, repeat):
    fn()  # warm-up (and JIT compile on the first call)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def gemm_peak(repeat):
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    t = median_time(lambda: a @ a, repeat)
    return 2 * 1024 ** 3 / t / 1e9


POOL_SETTINGS = [
    {},
    {"OPENBLAS_THREAD_TIMEOUT": "4"},
    {"OMP_WAIT_POLICY": "PASSIVE"},
    {"OPENBLAS_THREAD_TIMEOUT": "4", "OMP_WAIT_POLICY": "PASSIVE"},
    {"OPENBLAS_NUM_THREADS": "1"},
    {"NUMBA_THREADING_LAYER": "workqueue"},
    {"NUMBA_THREADING_LAYER": "workqueue", "OPENBLAS_THREAD_TIMEOUT": "4"},
]


def pools_child(repeat):
    """One line: kernel and GEMM times, each alone and right after the other (median / 90th percentile, ms)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 128, 128)).astype(np.float32)
    w = rng.standard_normal((1, 16, 3, 3)).astype(np.float32)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    kernel = lambda: K.conv2d_forward(x, w, None, 1, 1, algorithm=K.ConvAlgorithm.DIRECT)  # noqa: E731
    gemm = lambda: a @ a  # noqa: E731
    kernel(), gemm()
    runs = {"kernel alone": [], "kernel after GEMM": [], "GEMM alone": [], "GEMM after kernel": []}
    for _ in range(repeat):
        for name, before, fn in [("kernel alone", kernel, kernel), ("kernel after GEMM", gemm, kernel),
                                 ("GEMM alone", gemm, gemm), ("GEMM after kernel", kernel, gemm)]:
            before()
            t0 = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t0)
    print("  ".join(f"{k} {np.median(v) * 1e3:6.2f}/{np.percentile(v, 90) * 1e3:6.2f}" for k, v in runs.items()))


def pools(repeat):
    print("thread pools: Numba conv 16->1 @128 (direct, parallel) and NumPy 256^2 GEMM; ms median/p90")
    for setting in POOL_SETTINGS:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "OMP_WAIT_POLICY",
                                                                "OPENBLAS_NUM_THREADS", "NUMBA_THREADING_LAYER")}
        env.update(setting)
        out = subprocess.run([sys.executable, __file__, "--pools-child", "--repeat", str(repeat)], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
        label = " ".join(f"{k}={v}" for k, v in setting.items()) or "defaults"
        print(f"{label:58} {out}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for the comparison")
    ap.add_argument("--pools", action="store_true", help="measure the OpenBLAS / Numba thread-pool interaction")
    ap.add_argument("--pools-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pools_child:
        return pools_child(args.repeat)
    if args.pools:
        return pools(max(args.repeat, 40))
    print("environment: " + " ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_THREAD_TIMEOUT", "OMP_WAIT_POLICY",
          "OPENBLAS_NUM_THREADS", "NUMBA_THREADING_LAYER", "NUMBA_NUM_THREADS") if k in os.environ))
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    print(f"NumPy float32 GEMM 1024^3: {gemm_peak(args.repeat):.0f} GFLOP/s")
    head = f"{'model':10} {'layer':22} {'N':>3} {'pass':7}"
    algos = list(K.ConvAlgorithm)
    head += "".join(f" {a.name + ' ms':>10} {'GF/s':>6}" for a in algos)
    head += f" {'pick':>6} {'torch ms':>9} {'GF/s':>6} {'ours/torch':>10}"
    print(head)
    for model, name, N, C, O, H, W, k, s, p in LAYERS:
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = (rng.standard_normal((O, C, k, k)) / np.sqrt(C * k * k)).astype(np.float32)
        b = rng.standard_normal(O).astype(np.float32)
        OH, OW = K.conv_output_size(H, k, s, p, 1), K.conv_output_size(W, k, s, p, 1)
        g = rng.standard_normal((N, O, OH, OW)).astype(np.float32)
        gflop = 2.0 * N * O * OH * OW * C * k * k / 1e9
        pick = K.choose_algorithm(x.shape, w.shape, g.shape, 1)
        passes = {
            "forward": (lambda a: (lambda: K.conv2d_forward(x, w, b, s, p, 1, 1, algorithm=a))),
            "grad_x": (lambda a: (lambda: K.conv2d_grad_input(g, w, x.shape, s, p, 1, 1, algorithm=a))),
            "grad_w": (lambda a: (lambda: K.conv2d_grad_weight(g, x, w.shape, s, p, 1, 1, algorithm=a))),
        }
        if torch is not None:
            xt, wt, bt, gt = (torch.from_numpy(v) for v in (x, w, b, g))
            tfn = {"forward": lambda: torch.nn.functional.conv2d(xt, wt, bt, s, p),
                   "grad_x": lambda: torch.nn.grad.conv2d_input(x.shape, wt, gt, s, p),
                   "grad_w": lambda: torch.nn.grad.conv2d_weight(xt, w.shape, gt, s, p)}
        for pname, make in passes.items():
            times = {a: median_time(make(a), args.repeat) for a in algos}
            row = f"{model:10} {name:22} {N:3d} {pname:7}"
            row += "".join(f" {times[a] * 1e3:10.3f} {gflop / times[a]:6.1f}" for a in algos)
            row += f" {pick.name:>6}"
            if torch is not None:
                with torch.no_grad():
                    tt = median_time(tfn[pname], args.repeat)
                row += f" {tt * 1e3:9.3f} {gflop / tt:6.1f} {times[pick] / tt:10.2f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
