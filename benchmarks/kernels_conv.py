"""Benchmark conv2d forward and VJP algorithms on the zoo's layers (float32).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/kernels_conv.py [--repeat 31] [--passes forward,grad_x]

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some machines for old OpenBLAS builds) select a
slower AVX2 GEMM kernel: unset them for figures that mean anything on users' machines. (The
thread-pool interaction is measured by benchmarks/thread_pools.py.)

Prints, per layer and pass (forward, grad_x = input VJP, grad_w = weight VJP): median time
and GFLOP/s of each algorithm in saliency.kernels.conv2d (DIRECT: Numba, width innermost,
output channels blocked; GEMM: row-major patches @ W, or GEMM + col2im, as conv2d picks per
shape), which one `choose_algorithm` picks, torch.nn.functional.conv2d /
torch.nn.grad.conv2d_input / conv2d_weight at the same thread count when torch is installed,
and ours/torch (time ratio of the picked algorithm, < 1 means we are faster). The decoder layers
that follow a nearest x2 upsampling are also timed as sub-pixel convolutions
(saliency.kernels.subpixel) against torch's interpolate + conv2d, GFLOP/s counted as for the
3x3 conv of the upsampled image. Candidates are alternated in every round and every figure is a
median of --repeat rounds after a warm-up (the machine is shared). The NumPy float32 GEMM rate
measured in the same run is printed first as the ceiling.
"""
import argparse
import os
import sys
import time

import numpy as np

from saliency.kernels import conv2d as K
from saliency.kernels import subpixel as S

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
# nearest upsample x2 then 3x3 conv (stride 1, padding 1): (model, name, N, C_in, C_out, H, W) of the low-res input
UPSAMPLE_LAYERS = [
    ("depth", "up2+dec1 64->32 @32", 1, 64, 32, 32, 32),
    ("depth", "up2+dec2 32->16 @64", 1, 32, 16, 64, 64),
]


def median_time(fn, repeat):
    return median_times([fn], repeat)[0]


def median_times(fns, repeat):
    """Median time of each function, the candidates alternated in every round (fair under shared load)."""
    for fn in fns:
        fn()  # warm-up (and JIT compile on the first call)
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [float(np.median(ts)) for ts in times]


def gemm_peak(repeat):
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    t = median_time(lambda: a @ a, repeat)
    return 2 * 1024 ** 3 / t / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for the comparison")
    ap.add_argument("--passes", default="forward,grad_x,grad_w", help="comma-separated subset of forward,grad_x,grad_w")
    args = ap.parse_args()
    args.passes = args.passes.split(",")
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
            if pname not in args.passes:
                continue
            fns = [make(a) for a in algos] + ([tfn[pname]] if torch is not None else [])
            pick = K.choose_algorithm(x.shape, w.shape, g.shape, 1, vjp=pname != "forward")
            if torch is not None:
                with torch.no_grad():
                    measured = median_times(fns, args.repeat)
            else:
                measured = median_times(fns, args.repeat)
            times = dict(zip(algos, measured))
            row = f"{model:10} {name:22} {N:3d} {pname:7}"
            row += "".join(f" {times[a] * 1e3:10.3f} {gflop / times[a]:6.1f}" for a in algos)
            row += f" {pick.name:>6}"
            if torch is not None:
                tt = measured[-1]
                row += f" {tt * 1e3:9.3f} {gflop / tt:6.1f} {times[pick] / tt:10.2f}"
            print(row, flush=True)
    for model, name, N, C, O, H, W in UPSAMPLE_LAYERS:
        # GFLOP/s counted as for the 3x3 conv of the upsampled image (what torch computes)
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = (rng.standard_normal((O, C, 3, 3)) / np.sqrt(C * 9)).astype(np.float32)
        b = rng.standard_normal(O).astype(np.float32)
        g = rng.standard_normal((N, O, 2 * H, 2 * W)).astype(np.float32)
        gflop = 2.0 * N * O * 4 * H * W * C * 9 / 1e9
        passes = {"forward": lambda: S.upsample_conv2d_forward(x, w, b, 2),
                  "grad_x": lambda: S.upsample_conv2d_grad_input(g, w, x.shape, 2),
                  "grad_w": lambda: S.upsample_conv2d_grad_weight(g, x, w.shape, 2)}
        if torch is not None:
            F = torch.nn.functional
            xt, wt, bt, gt = (torch.from_numpy(v) for v in (x, w, b, g))
            tfn = {"forward": lambda: F.conv2d(F.interpolate(xt, scale_factor=2, mode="nearest"), wt, bt, 1, 1),
                   "grad_x": lambda: torch.nn.grad.conv2d_input((N, C, 2 * H, 2 * W), wt, gt, 1, 1)
                   .reshape(N, C, H, 2, W, 2).sum((3, 5)),
                   "grad_w": lambda: torch.nn.grad.conv2d_weight(F.interpolate(xt, scale_factor=2, mode="nearest"),
                                                                 w.shape, gt, 1, 1)}
        for pname, fn in passes.items():
            if pname not in args.passes:
                continue
            fns = [fn] + ([tfn[pname]] if torch is not None else [])
            if torch is not None:
                with torch.no_grad():
                    measured = median_times(fns, args.repeat)
            else:
                measured = median_times(fns, args.repeat)
            row = f"{model:10} {name:22} {N:3d} {pname:7} {'subpixel':>10} {'':6}"
            row += f" {measured[0] * 1e3:10.3f} {gflop / measured[0]:6.1f} {'SUBPIX':>6}"
            if torch is not None:
                tt = measured[-1]
                row += f" {tt * 1e3:9.3f} {gflop / tt:6.1f} {measured[0] / tt:10.2f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
