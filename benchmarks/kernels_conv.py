"""Benchmark conv2d forward and VJP algorithms on the zoo's layers (float32).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_THREAD_TIMEOUT=4 .venv/bin/python benchmarks/kernels_conv.py [--repeat 31] [--passes forward,grad_x]
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/kernels_conv.py --pools

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on the CI machines) select a slower AVX2 GEMM kernel:
unset them for figures that mean anything on users' machines. Without OPENBLAS_THREAD_TIMEOUT=4
the GEMM path stalls 8-100 ms per call while OpenBLAS workers spin-wait on the cores Numba's
threads need (see --pools). OMP_WAIT_POLICY=PASSIVE also puts torch's OpenMP threads to sleep
between regions and slows torch 1.5-3x on small layers: take torch's times from a run without it.

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

--pools measures the thread-pool interaction instead, in a fresh process per environment
setting: a small parallel Numba kernel right after a NumPy GEMM (OpenBLAS workers may still be
spin-waiting), and chains of whole layers as a network runs them (conv forward, parallel max-pool,
conv input VJP). BENCH_HELPER_THREADS=1 runs the Numba gathers around our GEMMs on one thread;
BENCH_BLAS_LOCAL_THREADS=1 runs our GEMMs on one OpenBLAS thread (openblas_set_num_threads_local).
"""
import argparse
import os
import subprocess
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


POOL_SETTINGS = [
    {},
    {"OPENBLAS_THREAD_TIMEOUT": "4"},
    {"BENCH_HELPER_THREADS": "1"},
    {"OPENBLAS_THREAD_TIMEOUT": "4", "BENCH_HELPER_THREADS": "1"},
    {"BENCH_BLAS_LOCAL_THREADS": "1"},
    {"OMP_WAIT_POLICY": "PASSIVE"},
    {"OPENBLAS_THREAD_TIMEOUT": "4", "OMP_WAIT_POLICY": "PASSIVE"},
    {"OPENBLAS_NUM_THREADS": "1"},
    {"NUMBA_THREADING_LAYER": "workqueue"},
    {"NUMBA_THREADING_LAYER": "workqueue", "OPENBLAS_THREAD_TIMEOUT": "4"},
]
POOL_VARIABLES = ("OPENBLAS_THREAD_TIMEOUT", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS", "NUMBA_THREADING_LAYER",
                  "BENCH_HELPER_THREADS", "BENCH_BLAS_LOCAL_THREADS")


def blas_local_threads(n):
    """A matmul that runs on n OpenBLAS threads (thread-local setting, OpenBLAS >= 0.3.27), or None."""
    import ctypes
    import glob
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas*.so"))
    if not libs:
        return None
    lib = ctypes.CDLL(libs[0])
    if not hasattr(lib, "openblas_set_num_threads_local"):
        return None
    set_local = lib.openblas_set_num_threads_local

    def matmul(a, b, out=None):
        old = set_local(n)
        try:
            return np.matmul(a, b, out=out) if out is not None else np.matmul(a, b)
        finally:
            set_local(old)
    return matmul


def pools_child(repeat):
    """One line, ms median/p90: a direct kernel right after a GEMM, and two chains of whole layers as a
    network runs them (GEMM-path conv forward, parallel Numba max-pool, GEMM-path input VJP)."""
    from saliency.kernels import im2col
    from saliency.kernels import pool
    if os.environ.get("BENCH_HELPER_THREADS"):
        im2col.HELPER_THREADS = int(os.environ["BENCH_HELPER_THREADS"])
    if os.environ.get("BENCH_BLAS_LOCAL_THREADS"):
        im2col._matmul = blas_local_threads(int(os.environ["BENCH_BLAS_LOCAL_THREADS"])) or np.matmul
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 128, 128)).astype(np.float32)
    w = rng.standard_normal((1, 16, 3, 3)).astype(np.float32)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    kernel = lambda: K.conv2d_forward(x, w, None, 1, 1, algorithm=K.ConvAlgorithm.DIRECT)  # noqa: E731
    gemm = lambda: a @ a  # noqa: E731

    def chain(N, C, O, H):
        xc = rng.standard_normal((N, C, H, H)).astype(np.float32)
        wc = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
        g = rng.standard_normal((N, O, H, H)).astype(np.float32)

        def run():
            y = K.conv2d_forward(xc, wc, None, 1, 1)
            pool.max_pool2d_forward(y, 2)
            K.conv2d_grad_input(g, wc, xc.shape, 1, 1)
        return run
    small, large = chain(1, 16, 32, 32), chain(1, 32, 64, 64)
    kernel(), gemm(), small(), large()
    runs = {"kernel after GEMM": [], "chain 16->32@32": [], "chain 32->64@64": []}
    for _ in range(repeat):
        gemm()
        t0 = time.perf_counter()
        kernel()
        runs["kernel after GEMM"].append(time.perf_counter() - t0)
        for name, fn in [("chain 16->32@32", small), ("chain 32->64@64", large)]:
            t0 = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t0)
    print("  ".join(f"{k} {np.median(v) * 1e3:6.2f}/{np.percentile(v, 90) * 1e3:6.2f}" for k, v in runs.items()))


def pools(repeat):
    print("thread pools, ms median/p90: Numba conv 16->1 @128 (direct, parallel) right after a NumPy 256^2 GEMM; "
          "chains conv forward (GEMM path) + max-pool + conv input VJP (GEMM path)")
    for setting in POOL_SETTINGS:
        env = {k: v for k, v in os.environ.items() if k not in POOL_VARIABLES}
        env.update(setting)
        out = subprocess.run([sys.executable, __file__, "--pools-child", "--repeat", str(repeat)], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
        label = " ".join(f"{k}={v}" for k, v in setting.items()) or "defaults"
        print(f"{label:58} {out}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for the comparison")
    ap.add_argument("--passes", default="forward,grad_x,grad_w", help="comma-separated subset of forward,grad_x,grad_w")
    ap.add_argument("--pools", action="store_true", help="measure the OpenBLAS / Numba thread-pool interaction")
    ap.add_argument("--pools-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.passes = args.passes.split(",")
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
            if pname not in args.passes:
                continue
            fns = [make(a) for a in algos] + ([tfn[pname]] if torch is not None else [])
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
