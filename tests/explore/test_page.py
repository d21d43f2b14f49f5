"""The explore page in a real headless browser (Playwright driving the system's Chromium): clicking an
output pixel, pointing at a class and switching the method show the maps the methods compute; an
error is one line on the page. Skipped where Playwright or Chromium is missing."""
import io
import os
import shutil
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import saliency as sl
from saliency import explore, nn
from saliency.attribution import gradient, lrp, seeds
from saliency.attribution.sources import ImageSource
from saliency.models import zoo

from ._store import IMAGES, made_store, opened, served

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (Debian: apt install chromium)")

# Chromium as root in a container, without the background connections a closed network refuses
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
SHOWN = 320  # the CSS size of the page's pictures, in pixels
REPO = Path(__file__).resolve().parents[2]


def _random(model, seed):
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data = (0.5 * rng.standard_normal(p.shape)).astype(np.float32)
    return model.eval()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def dense():
    model = _random(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, padding=1)), 0)
    x = np.random.default_rng(1).uniform(0, 1, (3, 32, 32)).astype(np.float32)
    server = explore.serve(model, x)
    yield server, model, x
    server.stop()


@pytest.fixture(scope="module")
def classifier():
    model = _random(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                                  nn.Linear(16, 6)), 2)
    x = np.random.default_rng(3).uniform(0, 1, (3, 16, 16)).astype(np.float32)
    server = explore.serve(model, x)
    yield server, model, x
    server.stop()


def _opened(browser, server):
    """A new page of the server's URL, its first request answered."""
    page = browser.new_page()
    page.goto(server.url)
    page.wait_for_selector("body[data-ready='1']", timeout=30000)
    return page


def _npy(page):
    """The map the page shows, downloaded from its NPY link."""
    href = page.get_attribute("#download-npy", "href")
    with urllib.request.urlopen(page.url.split("?")[0] + href) as response:
        return np.load(io.BytesIO(response.read()))


def _shown(page, count):
    page.wait_for_function(f"Number(document.body.dataset.painted || 0) >= {count}", timeout=30000)


def test_clicking_an_output_pixel_shows_its_map(browser, dense):
    server, model, x = dense
    page = _opened(browser, server)
    page.select_option("#channel", "1")
    box = page.locator("#output").bounding_box()
    for n, (r, c) in enumerate([(5, 7), (20, 30)], start=1):
        page.mouse.click(box["x"] + (c + 0.5) * box["width"] / 32, box["y"] + (r + 0.5) * box["height"] / 32)
        page.wait_for_function(f"document.getElementById('map').dataset.seed === 'pixel:{r},{c}@1'", timeout=30000)
        np.testing.assert_allclose(_npy(page), gradient(model, x, seeds.pixel(r, c, channel=1)).map, rtol=1e-6,
                                   atol=1e-7)
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + 2.5 * box["width"] / 32, box["y"] + 3.5 * box["height"] / 32)
    page.mouse.down()
    page.mouse.move(box["x"] + 6.5 * box["width"] / 32, box["y"] + 8.5 * box["height"] / 32)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_function("document.getElementById('map').dataset.seed === 'region:3,2,9,7@1'", timeout=30000)
    np.testing.assert_allclose(_npy(page), gradient(model, x, seeds.region((3, 2, 9, 7), channel=1)).map, rtol=1e-6,
                               atol=1e-7)
    page.close()


def test_pointing_at_a_class_and_switching_the_method(browser, classifier):
    server, model, x = classifier
    page = _opened(browser, server)
    second = page.locator("#classes li").nth(1)
    k = int(second.get_attribute("data-class"))
    second.hover()
    page.wait_for_function(f"document.getElementById('map').dataset.seed === 'class:{k}'", timeout=30000)
    np.testing.assert_allclose(_npy(page), gradient(model, x, seeds.one_hot(k)).map, rtol=1e-6, atol=1e-7)
    painted = int(page.evaluate("document.body.dataset.painted"))
    page.select_option("#method", "lrp")
    _shown(page, painted + 1)
    assert "lrp" in page.text_content("#map-caption")
    np.testing.assert_allclose(_npy(page), lrp(model, x, seeds.one_hot(k)).map, rtol=1e-5, atol=1e-7)
    page.select_option("#method", "deeplift_shap")  # needs its baselines: an error line, and the page goes on
    page.wait_for_selector("#error:not([hidden])", timeout=30000)
    assert "deeplift_shap needs --baselines" in page.text_content("#error")
    page.select_option("#method", "gradient")
    page.wait_for_function("document.getElementById('error').hidden", timeout=30000)
    page.close()


def test_any_class_by_its_name(browser):
    model = zoo.load("shapes")
    x = np.asarray(sl.viz.load_image(IMAGES / "star.png", size=(64, 64))[0])
    server = explore.serve(model, x)
    try:
        page = _opened(browser, server)
        names = page.eval_on_selector_all("#class-pick option", "options => options.map(o => o.textContent)")
        assert names[1:] == [f"{k}: {name}" for k, name in enumerate(model.classes)]
        k = int(np.argmin(model(sl.tensor(x[None])).numpy()[0]))  # the least likely class
        page.select_option("#class-pick", str(k))
        page.wait_for_function(f"document.getElementById('map').dataset.seed === 'class:{k}'", timeout=30000)
        # (the shapes model's 8 classes are all among the top ten, whose maps come from one batched pass)
        np.testing.assert_allclose(_npy(page), gradient(model, x, seeds.one_hot(k)).map, rtol=1e-5, atol=1e-6)
        page.close()
    finally:
        server.stop()


def test_without_the_token_the_page_says_so(browser, dense):
    server, _, _ = dense
    page = browser.new_page()
    response = page.goto(server.url.split("?")[0] + "/api/info")
    assert response.status == 403 and "token" in page.content()
    page.close()


def test_a_pixel_shows_its_receptive_field_and_the_map_can_lie_over_the_image(browser, dense):
    server, model, x = dense
    from saliency.attribution import receptive_field

    page = _opened(browser, server)
    box = page.locator("#output").bounding_box()
    page.mouse.click(box["x"] + 16.5 * box["width"] / 32, box["y"] + 10.5 * box["height"] / 32)
    page.wait_for_function("document.getElementById('rings').dataset.radii !== undefined", timeout=30000)
    drawn = page.evaluate("JSON.parse(document.getElementById('rings').dataset.radii)")
    rf = receptive_field(model, x, (10, 16), channel=0)  # the page shows output channel 0 first
    np.testing.assert_allclose(drawn, [rf.extras["radius50"], rf.extras["radius90"]], rtol=1e-6)
    assert page.locator("#rings circle").count() == 2
    page.fill("#opacity", "0.4")
    page.dispatch_event("#opacity", "input")
    assert page.evaluate("document.getElementById('map').style.opacity") == "0.4"
    page.close()


def test_a_kept_map_stays_beside_the_next(browser, dense):
    server, _, _ = dense
    page = _opened(browser, server)
    box = page.locator("#output").bounding_box()
    page.mouse.click(box["x"] + 4.5 * box["width"] / 32, box["y"] + 4.5 * box["height"] / 32)
    page.wait_for_function("document.getElementById('map').dataset.seed === 'pixel:4,4@0'", timeout=30000)
    page.click("#pin")
    page.wait_for_selector("#pinned-figure:not([hidden])", timeout=30000)
    assert "pixel:4,4@0" in page.text_content("#pinned-caption")
    page.select_option("#method", "input_x_gradient")
    page.wait_for_function("document.getElementById('map-caption').textContent.startsWith('input_x_gradient')",
                           timeout=30000)
    assert "gradient, seed pixel:4,4@0" in page.text_content("#pinned-caption")
    page.close()


def test_a_segmentation_class_as_a_whole(browser):
    model = _random(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 3, 3, padding=1)), 4)
    model.task = "segmentation"
    x = np.random.default_rng(5).uniform(0, 1, (3, 24, 24)).astype(np.float32)
    server = explore.serve(model, x)
    try:
        page = _opened(browser, server)
        k = int(model(sl.tensor(x[None])).numpy()[0].argmax(axis=0)[0, 0])  # a class some pixel is
        page.select_option("#channel", str(k))
        page.click("#segment")
        page.wait_for_function(f"document.getElementById('map').dataset.seed === 'segment:{k}'", timeout=30000)
        np.testing.assert_allclose(_npy(page), gradient(model, x, seeds.segment(k)).map, rtol=1e-6, atol=1e-7)
        page.close()
    finally:
        server.stop()


def test_another_image_from_the_page_and_a_bad_one_is_one_line(browser, tmp_path):
    model = _random(nn.Sequential(nn.Conv2d(3, 2, 3, padding=1)), 6)
    x = np.zeros((3, 16, 16), np.float32)
    server = explore.serve(model, x)
    try:
        page = _opened(browser, server)
        bad = tmp_path / "notes.png"
        bad.write_text("not an image")
        page.set_input_files("#upload", str(bad))
        page.wait_for_selector("#error:not([hidden])", timeout=30000)
        assert "cannot read image" in page.text_content("#error")
        from PIL import Image

        good = tmp_path / "grey.png"
        Image.fromarray(np.full((16, 16, 3), 200, np.uint8)).save(good)
        page.set_input_files("#upload", str(good))
        page.wait_for_selector("body[data-ready='1']", timeout=30000)
        page.wait_for_function("document.getElementById('error').hidden", timeout=30000)
        np.testing.assert_allclose(server.explorer.x, np.full((3, 16, 16), 200 / 255, np.float32), rtol=1e-6)
        page.close()
    finally:
        server.stop()


def test_the_backward_pass_of_the_seed_node_by_node(browser, dense):
    server, _, _ = dense
    page = _opened(browser, server)
    box = page.locator("#output").bounding_box()
    page.mouse.click(box["x"] + 7.5 * box["width"] / 32, box["y"] + 9.5 * box["height"] / 32)
    page.wait_for_function("document.getElementById('map').dataset.seed === 'pixel:9,7@0'", timeout=30000)
    page.click("#work summary")
    page.wait_for_function("document.getElementById('work').dataset.seed === 'pixel:9,7@0'", timeout=30000)
    graph, steps = page.text_content("#graph"), page.text_content("#steps")
    assert "ConvolutionBackward0" in graph and "AccumulateGrad(x)" in graph
    assert "ReluBackward0" in steps and "VJP sent" in steps
    page.close()


@pytest.fixture(scope="module")
def store_page(tmp_path_factory):
    folder = made_store(tmp_path_factory.mktemp("store"))
    server, _ = served(folder)
    yield server, folder
    server.stop()


def _column(page, key):
    cells = f"#store-table tbody td[data-key='{key}']"
    return page.eval_on_selector_all(cells, "cells => cells.map(c => c.textContent)")


def test_a_store_sorted_by_a_column(browser, store_page):
    server, folder = store_page
    store, entry = opened(folder)
    page = _opened(browser, server)
    assert _column(page, "file") == store.files  # in the store's order at first
    deletion = dict(zip(entry["files"], entry["deletion_auc"]))
    page.click("#store-table th[data-key='deletion']")
    assert _column(page, "file") == sorted(store.files, key=deletion.get)
    assert page.get_attribute("#store-table", "data-sorted") == "deletion:asc" and "#sort=deletion:asc" in page.url
    page.click("#store-table th[data-key='deletion']")  # again: the other way
    assert _column(page, "file") == sorted(store.files, key=deletion.get, reverse=True)
    page.click("#store-table th[data-key='predicted']")
    names = _column(page, "predicted")
    assert names == sorted(names)
    page.close()


def test_a_row_opens_its_image_live_beside_its_stored_map(browser, store_page):
    server, folder = store_page
    store, _ = opened(folder)
    page = _opened(browser, server)
    _shown(page, 1)
    page.click("#store-table tbody tr[data-index='1']")
    page.wait_for_function("document.getElementById('what').textContent.includes('digit3')", timeout=30000)
    page.wait_for_selector("body[data-ready='1']", timeout=30000)
    _shown(page, 1)
    assert page.get_attribute("#store-table tr.on", "data-index") == "1"
    assert page.get_attribute("#stored", "data-index") == "1"
    model = zoo.load("shapes")
    x = ImageSource(model, [store.files[1]]).read(0, 1)[0][0]
    k = int(store.predicted[1])
    assert page.get_attribute("#map", "data-seed") == f"class:{k}"
    np.testing.assert_allclose(_npy(page), gradient(model, x, seeds.parse(f"class:{k}")).map, rtol=1e-5, atol=1e-6)
    page.close()


def test_the_readme_screenshot(browser, tmp_path):
    """The page on the depth model with a pixel clicked: README's picture (written to docs/explore.png
    with SALIENCY_WRITE_SCREENSHOTS=1)."""
    model = zoo.load("depth")
    x, _ = sl.viz.load_image(IMAGES / "scene.png", size=(128, 128))
    server = explore.Server(explore.Explorer(model, x, name="scene.png")).start()
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 560})
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']", timeout=30000)
        box = page.locator("#output").bounding_box()
        for row, col in ((20, 90), (100, 40)):  # the first map of a process compiles its kernels
            page.mouse.click(box["x"] + box["width"] * (col + 0.5) / 128, box["y"] + box["height"] * (row + 0.5) / 128)
            page.wait_for_function(f"document.getElementById('map').dataset.seed === 'pixel:{row},{col}'",
                                   timeout=30000)
        page.wait_for_selector("#rings circle", timeout=30000)
        shot = tmp_path / "explore.png"
        page.screenshot(path=str(shot))
        page.close()
    finally:
        server.stop()
    picture = np.asarray(Image.open(shot).convert("RGB"))
    assert picture.shape[:2] == (560, 1440) and picture.std() > 20  # the page, not a blank one
    if os.environ.get("SALIENCY_WRITE_SCREENSHOTS"):
        shutil.copyfile(shot, REPO / "docs" / "explore.png")
