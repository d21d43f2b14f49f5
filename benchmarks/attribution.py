"""Attribution maps against PyTorch CPU: forward, then the backward of a seed to the input.

    python benchmarks/attribution.py [--repeats 25] [--no-subprocess]

Both engines run on 2 threads, alternately in this process, weights frozen in both (PyTorch
is also timed with its weights requiring grad and `y.backward(seed)`, as most people run it).
The engines alternate in short blocks of runs. Before each block the process sleeps 0.15 s and
makes one untimed run: NumPy's OpenBLAS workers spin-wait for about 0.1 s after their last
matrix product, and PyTorch's OpenMP workers briefly too, which on a 2-core machine slows
whichever engine runs next; the pause lets the other engine's threads go idle, the untimed run
wakes this engine's own.
Every figure is a median; ratios are ours / PyTorch (lower is better). Then: each conv layer's
GFLOP/s beside the NumPy GEMM peak measured in the same run; peak memory of a process that
computes one depth map, per engine; start-up of a fresh process (import, build, one map) with
the Numba cache warm and cold.

On machines that set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) for old OpenBLAS builds, NumPy
runs a slower GEMM kernel; run this as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...`
to measure what users get.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import saliency as sl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from saliency import kernels  # noqa: E402
from timing import median_ms  # noqa: E402
from reference_models import INPUT_SHAPES, build, conv_layers, copy_weights, flops, random_input  # noqa: E402

GOALS = {"classifier b1": 0.6, "classifier b32": 0.9, "depth b1": 1.0, "depth 64 pixels": 0.05}  # 64 pixels: cropped VJPs


def gemm_peak():
    a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
    b = a.copy()
    a @ b
    return 2 * 1024 ** 3 / (median_ms(lambda: a @ b, 9) / 1e3) / 1e9


def seeds_for(job, y_shape, rng):
    """The seed array v of backward(v) for a job: one-hot class, all ones, or K one-hot pixels."""
    if job.startswith("classifier"):
        v = np.zeros(y_shape, np.float32)
        v[np.arange(y_shape[0]), 3] = 1.0
        return v, False
    if job == "depth b1":
        return np.ones(y_shape, np.float32), False
    k = 64
    v = np.zeros((k,) + y_shape, np.float32)
    rows, cols = rng.integers(0, y_shape[2], k), rng.integers(0, y_shape[3], k)
    v[np.arange(k), 0, 0, rows, cols] = 1.0
    return v, True


def make_runners(job, torch, repeats_check=True):
    name, batch = ("classifier", 32) if job == "classifier b32" else (job.split()[0], 1)
    torch.manual_seed(0)  # the same weights every run: the map check below sees the same near-ties
    tmodel = build(name, torch.nn).eval()
    ours = copy_weights(tmodel, build(name, sl.nn)).eval()
    ours.requires_grad_(False)
    x_np = random_input(name, batch)
    x = sl.tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    with sl.no_grad():
        y_shape = ours(sl.tensor(x_np)).shape
    v, batched = seeds_for(job, y_shape, np.random.default_rng(1))
    tv = torch.tensor(v)

    def run_ours():
        y = ours(x)
        return sl.autograd.grad(y, x, v, batched=batched)[0].numpy()

    def run_torch_frozen():
        for p in tmodel.parameters():
            p.requires_grad_(False)
        y = tmodel(tx)
        if not batched:
            return torch.autograd.grad(y, tx, tv)[0]
        # PyTorch's fastest way to K maps here: one forward, K backward passes
        return torch.stack([torch.autograd.grad(y, tx, tv[k], retain_graph=True)[0] for k in range(len(tv))])

    def run_torch_trainable():
        for p in tmodel.parameters():
            p.requires_grad_(True)
        tmodel.zero_grad(set_to_none=True)
        tx.grad = None
        y = tmodel(tx)
        if not batched:
            y.backward(tv)
            return tx.grad
        maps = []
        for k in range(len(tv)):
            tx.grad = None
            y.backward(tv[k], retain_graph=True)
            maps.append(tx.grad)
        return torch.stack(maps)

    if repeats_check:  # both engines compute the same map (float32: max-pool ties among ReLU zeros may differ)
        a, b = run_ours(), run_torch_frozen().numpy()
        err = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)
        assert err < 1e-3, f"{job}: maps differ by {err:.2e} (relative L2 error)"
    return run_ours, run_torch_frozen, run_torch_trainable


def time_jobs(torch, repeats, block=3):
    print(f"{'job':18s} {'ours ms':>9s} {'torch ms':>9s} {'ratio':>6s} {'goal':>5s}   torch, weights requiring grad")
    results = {}
    for job in GOALS:
        ours, frozen, trainable = make_runners(job, torch)
        for _ in range(3):  # warm-up
            ours(), frozen(), trainable()
        t_ours, t_frozen, t_train = [], [], []
        for _ in range(max(1, repeats // block)):  # alternate, so that both engines see the same machine load
            for fn, times in ((ours, t_ours), (frozen, t_frozen), (trainable, t_train)):
                time.sleep(0.15)  # the other engine's threads stop spinning
                fn()  # and this engine's wake up
                times.extend(median_ms(fn, 1) for _ in range(block))
        o, f, t = (statistics.median(v) for v in (t_ours, t_frozen, t_train))
        results[job] = o / f
        mark = "ok" if o / f <= GOALS[job] else "MISSED"
        print(f"{job:18s} {o:9.3f} {f:9.3f} {o / f:6.2f} {GOALS[job]:5.2f} {mark:6s} {t:9.3f} ms (ratio {o / t:.2f})")
    return results


def time_layers(repeats):
    peak = gemm_peak()
    print(f"\nconv layers, batch 1, as the models run them (NumPy float32 GEMM peak in this run: {peak:.0f} GFLOP/s)")
    print(f"{'layer':44s} {'forward ms':>10s} {'GFLOP/s':>8s} {'input VJP ms':>12s} {'GFLOP/s':>8s}")
    rng = np.random.default_rng(0)
    for name in ("classifier", "depth"):
        for label, xs, ws, s, p, upsampled in conv_layers(name):
            w = rng.standard_normal(ws).astype(np.float32)
            if upsampled:  # Upsample(nearest, 2) + this conv run fused, as a sub-pixel convolution
                x = rng.random(xs[:2] + (xs[2] // 2, xs[3] // 2), dtype=np.float32)
                y = kernels.upsample_conv2d_forward(x, w, None, 2)
                g = np.ones_like(y)
                fw = median_ms(lambda: kernels.upsample_conv2d_forward(x, w, None, 2), repeats)
                bw = median_ms(lambda: kernels.upsample_conv2d_grad_input(g, w, x.shape, 2), repeats)
                label = "Up+" + label.replace("s=1,", "") + " fused"
            else:
                x = rng.random(xs, dtype=np.float32)
                y = kernels.conv2d_forward(x, w, None, s, p)
                g = np.ones_like(y)
                fw = median_ms(lambda: kernels.conv2d_forward(x, w, None, s, p), repeats)
                bw = median_ms(lambda: kernels.conv2d_grad_input(g, w, xs, s, p), repeats)
            n = flops(xs, ws, s, p) / 1e6  # FLOPs of the plain conv (the sub-pixel one does 4/9 of them)
            print(f"{name[:5]} {label:38s} {fw:10.3f} {n / fw:8.1f} {bw:12.3f} {n / bw:8.1f}")


_MAP_SCRIPT = """
import sys, time
t0 = time.perf_counter()
engine = sys.argv[1]
sys.path.insert(0, {bench!r})
import numpy as np
from reference_models import build, random_input
if engine == "saliency":
    import saliency as sl
    model = build("depth", sl.nn).eval().requires_grad_(False)
    x = sl.tensor(random_input("depth", 1), requires_grad=True)
    y = model(x)
    sl.autograd.grad(y, x, np.ones(y.shape, np.float32))
else:
    import torch
    torch.set_num_threads(2)
    model = build("depth", torch.nn).eval().requires_grad_(False)
    x = torch.tensor(random_input("depth", 1), requires_grad=True)
    y = model(x)
    torch.autograd.grad(y, x, torch.ones_like(y))
# the peak resident set of this process since exec (ru_maxrss would include the parent's before exec)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(time.perf_counter() - t0, hwm / 1024)
"""


def run_map_process(engine, env=None):
    script = _MAP_SCRIPT.format(bench=os.path.dirname(os.path.abspath(__file__)))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script, engine], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=300)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(out.stderr)
    _, rss = (float(v) for v in out.stdout.split())
    return wall, rss


def measure_processes():
    print("\nfresh processes computing one depth map")
    ours_rss = statistics.median(run_map_process("saliency")[1] for _ in range(3))
    torch_rss = statistics.median(run_map_process("torch")[1] for _ in range(3))
    mark = "ok" if ours_rss / torch_rss <= 0.5 else "MISSED"
    print(f"  peak resident memory: saliency {ours_rss:.0f} MB, torch {torch_rss:.0f} MB, "
          f"ratio {ours_rss / torch_rss:.2f} (goal <= 0.5) {mark}")
    warm = statistics.median(run_map_process("saliency")[0] for _ in range(5))
    print(f"  start-up (import, build, one map), Numba cache warm: {warm:.2f} s (goal <= 1.5 s) "
          f"{'ok' if warm <= 1.5 else 'MISSED'}")
    with tempfile.TemporaryDirectory() as cache:
        cold = run_map_process("saliency", {"NUMBA_CACHE_DIR": cache})[0]
    print(f"  start-up with the Numba cache cold (every kernel compiled): {cold:.2f} s (goal < 15 s) "
          f"{'ok' if cold < 15 else 'MISSED'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--no-subprocess", action="store_true", help="skip the memory and start-up measurements")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    print(textwrap.dedent(f"""\
        saliency {sl.__name__} on numpy {np.__version__}, torch {torch.__version__}, {os.cpu_count()} cores
        OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}
        inputs: classifier {INPUT_SHAPES['classifier']}, depth {INPUT_SHAPES['depth']}; medians of {args.repeats} runs
        """))
    time_jobs(torch, args.repeats)
    time_layers(args.repeats)
    if not args.no_subprocess:
        measure_processes()


if __name__ == "__main__":
    main()
