"""Reading large images for a small model: load_image against converting the whole image first.

    python benchmarks/large_image.py [--sizes 4000x3000 9000x9000 12000x12000] [--target 64] [--runs 3]

For each size, a smooth RGB image is written once as PNG and as JPEG into a temporary folder.
Each read runs in a fresh process, alternating between
  ours:      saliency.viz.load_image(path, size=(target, target)), and
  reference: what a reader without shrinking does: Pillow decodes the image, NumPy turns it into
             float32, and each channel is resized with Pillow's bilinear filter,
and reports the read's time and the growth of the process's peak memory (VmHWM, Linux), as a
ratio of the image's 8-bit size (width x height x 3 bytes); printed: medians over the runs and
ours / reference. Images over Pillow's MAX_IMAGE_PIXELS are read with the limit raised for the
reference (ours only notes them).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
from PIL import Image

READ = """
import sys, time
import numpy as np
from PIL import Image
from saliency.viz import load_image

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))

path, how, target, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
Image.MAX_IMAGE_PIXELS = None if how == "reference" else Image.MAX_IMAGE_PIXELS
load_image(warm, size=(target, target))   # imports Pillow's file plugins before measuring
before = peak()
start = time.perf_counter()
if how == "ours":
    x, _ = load_image(path, size=(target, target))
else:
    with Image.open(path) as img:
        arr = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    x = np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(arr[..., c]))
                             .resize((target, target), Image.Resampling.BILINEAR)) for c in range(3)])
print(time.perf_counter() - start, peak() - before)
"""


def write_images(folder, width, height):
    """(png, jpeg) paths of a smooth width x height RGB image."""
    rgb = np.empty((height, width, 3), np.uint8)
    rgb[..., 0] = (np.arange(width) * 255 // width)[None, :]
    rgb[..., 1] = (np.arange(height) * 255 // height)[:, None]
    rgb[..., 2] = ((np.arange(height)[:, None] // 500 + np.arange(width)[None, :] // 500) % 2) * 200
    old, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
    try:
        img = Image.fromarray(rgb)
        png, jpeg = os.path.join(folder, f"{width}x{height}.png"), os.path.join(folder, f"{width}x{height}.jpg")
        img.save(png, compress_level=1)
        img.save(jpeg, quality=90)
    finally:
        Image.MAX_IMAGE_PIXELS = old
    return png, jpeg


def read(path, how, target, warm):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(READ), path, how, str(target), warm],
                         capture_output=True, text=True, check=True)
    seconds, grown = out.stdout.split()
    return float(seconds), int(grown)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["4000x3000", "9000x9000", "12000x12000"])
    parser.add_argument("--target", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'image':>22} {'ours s':>8} {'ref s':>8} {'time ratio':>10} {'ours mem':>9} {'ref mem':>8} "
          f"(peak growth / 8-bit size)")
    with tempfile.TemporaryDirectory() as folder:
        warm = os.path.join(folder, "warm.png")
        Image.new("RGB", (4 * args.target, 4 * args.target)).save(warm)
        for size in args.sizes:
            width, height = (int(n) for n in size.split("x"))
            eight_bit = width * height * 3
            for path in write_images(folder, width, height):
                runs = {"ours": [], "reference": []}
                for _ in range(args.runs):
                    for how in runs:
                        runs[how].append(read(path, how, args.target, warm))
                t = {how: statistics.median(s for s, _ in r) for how, r in runs.items()}
                m = {how: statistics.median(growth for _, growth in r) / eight_bit for how, r in runs.items()}
                print(f"{os.path.basename(path):>22} {t['ours']:8.2f} {t['reference']:8.2f} "
                      f"{t['ours'] / t['reference']:10.3f} {m['ours']:8.2f}x {m['reference']:7.2f}x", flush=True)


if __name__ == "__main__":
    main()
