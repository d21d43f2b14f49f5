"""A model loaded from an ONNX file against the same model ported as a .py file, side by side; and
loading a large ONNX file: its time and its memory.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/onnx_models.py [--repeats 7]

Maps: PyTorch builds each architecture (the zoo's depth U-Net from models/architectures.py; and
torchvision's ResNet-50 and MobileNetV3-large at 224x224 with random weights), exports it with its
TorchScript exporter (opset 17), and ours loads the file (`saliency.nn.load_onnx`); the same
architecture as this package's .py file (the zoo's model, `saliency.models.load(name)`) gets the
same weights. Per model, the median of alternating runs of a gradient map at batch 1 (forward and
backward; for the depth model also a pixel seed's cropped one), and the ratio ONNX / .py (goal:
<= 1.0).

Loading: torchvision's ResNet-50 (random weights, 102 MB as float32) exported; a fresh process
loads it and reports its time and its peak memory (VmHWM), beside a process that only imports
the engine and onnx: the model's memory is the difference (goal: under 2 s, and at most the
file's size more than the engine's).
"""
import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from timing import PEAK, alternate  # noqa: E402

import batch  # noqa: E402
import vision  # noqa: E402
from saliency.attribution import gradient, seeds  # noqa: E402
from saliency.models import zoo  # noqa: E402
from saliency.nn import load_onnx  # noqa: E402


def _export(model, shape, path):
    import torch

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (torch.zeros(shape),), path, dynamo=False, opset_version=17,
                          input_names=["image"])
    return path


def _pairs(folder):
    """(label, ONNX-loaded model, ported model, input (C, H, W), seed)."""
    depth = zoo.load("depth")
    from_onnx = load_onnx(_export(batch.torch_twin(depth), (1, 3, 128, 128), os.path.join(folder, "depth.onnx")))
    out = [("depth U-Net 128x128", from_onnx, depth, (3, 128, 128), None)]
    for name in ("resnet50", "mobilenet_v3_large"):
        ours, theirs = vision.build(name, folder)
        onnx_file = _export(theirs, (1, 3, 224, 224), os.path.join(folder, f"{name}.onnx"))
        out.append((f"{name} 224x224", load_onnx(onnx_file), ours, (3, 224, 224), None))
    out.append(("depth U-Net, a pixel's cropped map", from_onnx, depth, (3, 128, 128), seeds.pixel(64, 40)))
    return out


LOAD = PEAK + """
import sys, time
t0 = time.perf_counter()
{body}
print(round(time.perf_counter() - t0, 3))
print(peak_mb())
"""


def _process(body, cwd):
    proc = subprocess.run([sys.executable, "-c", LOAD.format(body=body)], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1])
    seconds, peak = proc.stdout.strip().splitlines()[-2:]
    return float(seconds), float(peak)


def _loading(folder):
    import torch

    tv = vision.torchvision()
    torch.manual_seed(0)
    model = tv.models.resnet50(weights=None)
    path = _export(model, (1, 3, 224, 224), os.path.join(folder, "resnet50.onnx"))
    size = os.path.getsize(path) / 2 ** 20
    engine = "import onnx; import saliency.nn; from saliency.nn import load_onnx"
    _, base = _process(engine, folder)
    seconds, peak = _process(engine + f"\nt0 = time.perf_counter()\nm = load_onnx({path!r})", folder)
    return size, seconds, peak, base


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        print(f"{'map at batch 1':<40} {'ONNX ms':>9} {'.py ms':>10} {'ratio':>6}")
        for label, from_onnx, ported, shape, seed in _pairs(folder):
            x = rng.uniform(0, 1, shape).astype(np.float32)
            a, b = alternate(lambda: gradient(from_onnx, x, seed), lambda: gradient(ported, x, seed), args.repeats)
            print(f"{label:<40} {a * 1e3:9.1f} {b * 1e3:10.1f} {a / b:6.2f}")
        size, seconds, peak, base = _loading(folder)
        print(f"\nloading resnet50.onnx ({size:.0f} MB): {seconds:.2f} s; peak memory {peak:.0f} MB, the engine and "
              f"onnx alone {base:.0f} MB: the model {peak - base:.0f} MB ({(peak - base) / size:.2f} x its size)")


if __name__ == "__main__":
    main()
