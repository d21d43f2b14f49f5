"""The explore page, timed in the browser: from a click on an output pixel (or pointing at a class) to
the map painted, with the page's own clock (performance.now() from the request to the picture's
load), in headless Chromium driven by Playwright.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/explore.py [--clicks 40]

Rows: the zoo's depth model at 128x128 (a pixel's map: one cropped backward pass through the kept
graph, its heatmap, the transfer and the decode), the shapes classifier (pointing at each of its
top classes in turn), and torchvision's segmentation networks at 224x224 with random weights (a
pixel's map of its top class; `--segmenters`). Prints the median and the 90th percentile of the
page's times, the server's own share (the backward pass) from the response's
X-Map-Milliseconds, and for the pixels PyTorch's time for the same pixels' backward passes
through its own kept graph (the same architecture with the same weights, 2 threads).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import batch  # noqa: E402
import vision  # noqa: E402
from saliency import explore  # noqa: E402
from saliency.models import data, zoo  # noqa: E402

SEGMENTERS = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"]
SIZE = 224

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def _times(page, act, count):
    """Page times (ms) of `count` maps, `act(i)` causing the i-th."""
    page_ms, server_ms = [], []
    for i in range(count):
        before = int(page.evaluate("Number(document.body.dataset.painted || 0)"))
        act(i)
        page.wait_for_function(f"Number(document.body.dataset.painted || 0) > {before}", timeout=60000)
        page_ms.append(float(page.evaluate("document.getElementById('map').dataset.ms")))
        caption = page.text_content("#map-caption")
        server_ms.append(float(caption.split("(")[-1].split(" ms")[0]))
    return page_ms, server_ms


def _row(label, page_ms, server_ms, reference=None):
    p90 = float(np.percentile(page_ms, 90))
    shown = f"{reference:10.1f}" if reference is not None else f"{'-':>10}"
    print(f"{label:<44} {statistics.median(page_ms):8.1f} {p90:8.1f} {statistics.median(server_ms):10.1f} {shown}")


def _clicks(browser, model, x, count, side):
    """(page times, server times, cells) of `count` clicks on random output pixels of the page of
    `model` on `x`, after 3 clicks of warm-up."""
    server = explore.serve(model, x)
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    page.goto(server.url)
    page.wait_for_selector("body[data-ready='1']", timeout=60000)
    box = page.locator("#output").bounding_box()
    cells = np.random.default_rng(0).integers(0, side, (count + 3, 2))

    def click(i):
        r, c = cells[i]
        page.mouse.click(box["x"] + (c + 0.5) * box["width"] / side, box["y"] + (r + 0.5) * box["height"] / side)

    _times(page, click, 3)  # warm-up
    cells = cells[3:]
    got = _times(page, click, count)
    page.close()
    server.stop()
    return got + (cells,)


def _torch_ms(twin, x, cells):
    """PyTorch's median time (ms) for the same clicks: the backward pass of each pixel's logit (its
    top class) through one kept forward graph, on 2 threads: what PyTorch would answer a click with."""
    import torch

    torch.set_num_threads(2)
    xt = torch.tensor(x[None], requires_grad=True)
    with torch.enable_grad():
        y = twin(xt)
    y = y["out"] if isinstance(y, dict) else y
    times = []
    for r, c in list(cells[:3]) + list(cells):
        k = int(y[0, :, r, c].argmax())
        started = time.perf_counter()
        (g,) = torch.autograd.grad(y[0, k, r, c], xt, retain_graph=True)
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times[3:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=40)
    parser.add_argument("--segmenters", default=",".join(SEGMENTERS),
                        help="torchvision segmentation networks to time at 224x224 (comma-separated; none: '')")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no Chromium found (Debian: apt install chromium)")
    depth = zoo.load("depth")
    scene = data.scenes(1, seed=5)[0][0]
    shapes = zoo.load("shapes")
    star = data.shapes(1, seed=11)[0][0]
    print(f"{'page (ms)':<44} {'median':>8} {'p90':>8} {'server med':>10} {'PyTorch':>10}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
        page_ms, server_ms, cells = _clicks(browser, depth, scene, args.clicks, 128)
        _row("depth 128x128, a clicked pixel", page_ms, server_ms, _torch_ms(batch.torch_twin(depth), scene, cells))

        server = explore.serve(shapes, star)
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        items = page.locator("#classes li")
        n = items.count()
        _times(page, lambda i: items.nth((i + 1) % n).hover(), 3)
        _row("shapes 64x64, a class pointed at", *_times(page, lambda i: items.nth(i % n).hover(), args.clicks))
        server.stop()

        with tempfile.TemporaryDirectory() as folder:
            photo = np.random.default_rng(2).uniform(0, 1, (3, SIZE, SIZE)).astype(np.float32)
            for name in filter(None, args.segmenters.split(",")):
                ours, theirs = vision.build(name, folder)
                page_ms, server_ms, cells = _clicks(browser, ours, photo, min(args.clicks, 20), SIZE)
                reference = _torch_ms(theirs, photo, cells)
                _row(f"{name} 224x224, a pixel", page_ms, server_ms, reference)
        browser.close()


if __name__ == "__main__":
    main()
