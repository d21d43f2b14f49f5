"""The explore page, timed in the browser: from a click on an output pixel (or pointing at a class) to
the map painted, with the page's own clock (performance.now() from the request to the picture's
load), in headless Chromium driven by Playwright.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/explore.py [--clicks 40]

Rows: the zoo's depth model at 128x128 (a pixel's map: one cropped backward pass through the kept
graph, its heatmap PNG, the transfer and the decode), and the shapes classifier (pointing at each of
its top classes in turn). Prints the median and the 90th percentile of the page's times, and the
server's own share (the backward pass) from the response's X-Map-Milliseconds.
"""
import argparse
import os
import shutil
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from saliency import explore  # noqa: E402
from saliency.models import data, zoo  # noqa: E402

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


def _row(label, page_ms, server_ms):
    p90 = float(np.percentile(page_ms, 90))
    print(f"{label:<38} {statistics.median(page_ms):8.1f} {p90:8.1f} {statistics.median(server_ms):10.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=40)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no Chromium found (Debian: apt install chromium)")
    depth = zoo.load("depth")
    scene = data.scenes(1, seed=5)[0][0]
    shapes = zoo.load("shapes")
    star = data.shapes(1, seed=11)[0][0]
    print(f"{'page (ms)':<38} {'median':>8} {'p90':>8} {'server med':>10}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
        server = explore.serve(depth, scene)
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        box = page.locator("#output").bounding_box()
        rng = np.random.default_rng(0)
        cells = rng.integers(0, 128, (args.clicks + 3, 2))

        def click(i):
            r, c = cells[i]
            page.mouse.click(box["x"] + (c + 0.5) * box["width"] / 128, box["y"] + (r + 0.5) * box["height"] / 128)

        _times(page, click, 3)  # warm-up
        cells = cells[3:]
        _row("depth 128x128, a clicked pixel", *_times(page, click, args.clicks))
        server.stop()

        server = explore.serve(shapes, star)
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        items = page.locator("#classes li")
        n = items.count()
        _times(page, lambda i: items.nth((i + 1) % n).hover(), 3)
        _row("shapes 64x64, a class pointed at", *_times(page, lambda i: items.nth(i % n).hover(), args.clicks))
        server.stop()
        browser.close()


if __name__ == "__main__":
    main()
