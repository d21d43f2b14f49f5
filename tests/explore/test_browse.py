"""`saliency explore STORE`: the store's rows with the scores `saliency evaluate` wrote, its stored
maps, any image opened live (its map then the one the run stored), a store whose model file was not
named browsed only; an evaluation that does not fit is one line."""
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from saliency import attribution, explore
from saliency.attribution import gradient, seeds
from saliency.attribution.sources import ImageSource
from saliency.cli.evaluate import store_at
from saliency.models import zoo

from saliency.cli.main import main

from ._store import IMAGES, made_store, opened, run, served
from .test_server import _get, _post


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return made_store(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def server(folder):
    server, notes = served(folder)
    assert any("scores from" in n for n in notes)  # the evaluation.json beside the store is read
    yield server
    server.stop()


def test_the_rows_are_the_stores_images_with_their_scores(folder, server):
    store, entry = opened(folder)
    status, _, body = _get(server, "/api/store")
    table = json.loads(body)
    assert status == 200 and table["images"] == len(store) and table["scored"]
    rows = table["rows"]
    assert [r["file"] for r in rows] == store.files and [r["index"] for r in rows] == list(range(len(store)))
    names = zoo.load("shapes").classes
    assert [r["predicted"] for r in rows] == [names[k] for k in store.predicted]
    assert all(r["done"] and r["error"] is None for r in rows)
    by_file = {r["file"]: r for r in rows}
    for name, deletion, insertion in zip(entry["files"], entry["deletion_auc"], entry["insertion_auc"]):
        assert by_file[name]["deletion"] == pytest.approx(deletion) and by_file[name]["insertion"] == pytest.approx(
            insertion)


def test_a_stored_map_is_the_one_in_the_store(folder, server):
    store, _ = opened(folder)
    status, _, body = _get(server, "/api/store/map?index=2&format=npy")
    assert status == 200
    np.testing.assert_array_equal(np.load(io.BytesIO(body)), store.maps[2])
    status, headers, body = _get(server, "/api/store/map?index=2&format=png&sign=all")
    assert status == 200 and Image.open(io.BytesIO(body)).size == store.map_shape[:0:-1][:2]
    status, _, body = _get(server, "/api/store/image.png?index=2")
    assert status == 200 and Image.open(io.BytesIO(body)).size == (64, 64)


def test_an_opened_image_is_shown_live_as_the_run_read_it(folder, server):
    store, _ = opened(folder)
    model = zoo.load("shapes")
    for index in (3, 1):
        status, info = _post(server, f"/api/open?index={index}", b"")
        assert status == 200 and info["live"] and info["index"] == index and info["image"] == store.files[index]
        k = int(store.predicted[index])
        assert info["top"][0]["class"] == k  # the model predicts what it predicted in the run
        status, _, body = _get(server, f"/api/map?seed=class:{k}&format=npy")
        x = ImageSource(model, [store.files[index]]).read(0, 1)[0][0]  # read as saliency batch read it
        shown = np.load(io.BytesIO(body))
        np.testing.assert_allclose(shown, gradient(model, x, seeds.parse(f"class:{k}")).map, rtol=1e-5, atol=1e-6)
        # the run's map, from a batch of 5, is the same picture: it differs only where a max pool's window
        # holds values equal but for rounding (flat colours), whose winner depends on the convolution's
        # kernel, which the batch's size picks
        assert np.corrcoef(shown.ravel(), store.maps[index].ravel())[0, 1] > 0.999


@pytest.mark.parametrize("path, message", [
    ("/api/store/map?index=99", "index 99 is out of range for the 5 images"),
    ("/api/store/map?index=two", "index must be an image's number in the store, got 'two'"),
    ("/api/store/image.png", "index must be an image's number in the store, got None"),
])
def test_a_bad_index_is_one_line_and_the_server_keeps_serving(server, path, message):
    status, _, body = _get(server, path)
    assert status == 400 and message in json.loads(body)["error"] and "\n" not in json.loads(body)["error"]
    status, info = _post(server, "/api/open?index=-1", b"")
    assert status == 400 and "out of range" in info["error"]
    assert _get(server, "/api/store")[0] == 200


def test_a_page_of_one_image_has_no_store():
    model = zoo.load("shapes")
    one = explore.serve(model, np.zeros((3, 64, 64), np.float32))
    try:
        status, _, body = _get(one, "/api/store")
        assert status == 400 and "saliency explore STORE" in json.loads(body)["error"]
        assert _post(one, "/api/open?index=0", b"")[0] == 400
        assert json.loads(_get(one, "/api/info")[2])["store"] is None
    finally:
        one.stop()


def test_a_store_made_with_a_model_file_is_browsed_until_the_file_is_named(tmp_path):
    net = tmp_path / "net.py"
    net.write_text("from saliency import nn\n\n"
                   "class Net(nn.Sequential):\n"
                   "    def __init__(self):\n"
                   "        super().__init__(nn.Conv2d(3, 2, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())\n")
    with pytest.raises(SystemExit) as info:
        main(["batch", str(IMAGES), "--out", str(tmp_path / "out"), "--model", f"{net}:Net", "--random-seed", "3"])
        raise SystemExit(0)
    assert info.value.code == 0
    server, notes = served(tmp_path / "out")
    try:
        info = json.loads(_get(server, "/api/info")[2])
        assert not info["live"] and f"--model {net}:Net" in info["why"] and any("--model" in n for n in notes)
        status, _, body = _get(server, "/api/map?seed=class:0")
        assert status == 400 and "runs only when you name it" in json.loads(body)["error"]
        assert _post(server, "/api/open?index=0", b"")[0] == 400
        store = attribution.open_store(store_at(tmp_path / "out"))
        np.testing.assert_array_equal(np.load(io.BytesIO(_get(server, "/api/store/map?index=4")[2])), store.maps[4])
    finally:
        server.stop()
    named, _ = served(tmp_path / "out", model=f"{net}:Net")  # named: the file runs, the images open live
    try:
        assert json.loads(_get(named, "/api/info")[2])["live"]
    finally:
        named.stop()


def test_an_evaluation_of_other_maps_is_refused_in_one_line(folder, tmp_path, capsys):
    store, entry = opened(folder)
    other = tmp_path / "evaluation.json"
    other.write_text(json.dumps({"out": {**entry, "method": "smoothgrad"}}))
    with pytest.raises(explore.ScoresError, match="holds no evaluation of the maps of"):
        explore.read_scores(other, store)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(explore.ScoresError, match="cannot read the evaluation"):
        explore.read_scores(tmp_path / "broken.json", store)
    code, out, err = run(capsys, "explore", folder, "--evaluation", other, "--no-browser")
    assert code == 2 and "holds no evaluation of the maps of" in err and "Traceback" not in err
    code, out, err = run(capsys, "explore", IMAGES / "star.png", "--evaluation", other, "--no-browser")
    assert code == 2 and "--evaluation goes with a store" in err


def test_a_store_without_scores_is_browsed_and_a_misfit_beside_it_is_a_note(folder, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    inner = store_at(folder)
    os.symlink(inner, copy / inner.name)
    (copy / "evaluation.json").write_text("[]")
    server, notes = served(copy)
    try:
        assert any(n.startswith("note: no scores shown") for n in notes)
        table = json.loads(_get(server, "/api/store")[2])
        assert not table["scored"] and all(r["deletion"] is None for r in table["rows"])
    finally:
        server.stop()


def test_the_command_serves_a_store_and_stops_on_ctrl_c(folder):
    proc = subprocess.Popen([sys.executable, "-m", "saliency.cli.main", "explore", str(folder), "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = None
        for _ in range(20):
            line = proc.stdout.readline()
            assert "the store" in line or "scores from" in line or not line.startswith("serving")
            found = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
            if found:
                url = found.group(0)
                assert "(5 of 5 maps done)" in line
                break
        assert url, "no URL printed"
        base, token = url.split("/?token=")
        with urllib.request.urlopen(f"{base}/api/store?token={token}", timeout=60) as response:
            assert len(json.loads(response.read())["rows"]) == 5
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "stopped" in out and "Traceback" not in err


def test_a_store_whose_first_image_moved_opens_on_the_next(tmp_path):
    images = tmp_path / "images"
    shutil.copytree(IMAGES, images)
    with pytest.raises(SystemExit) as info:
        main(["batch", str(images), "--out", str(tmp_path / "out")])
        raise SystemExit(0)
    assert info.value.code == 0
    store = attribution.open_store(store_at(tmp_path / "out"))
    Path(store.files[0]).unlink()  # moved since the run
    server, _ = served(tmp_path / "out")
    try:
        info = json.loads(_get(server, "/api/info")[2])
        assert info["model"] and not info["live"] and "could not be opened" in info["why"]
        assert len(json.loads(_get(server, "/api/store")[2])["rows"]) == 5  # the table still shows
        status, opened_info = _post(server, "/api/open?index=2", b"")
        assert status == 200 and opened_info["live"] and opened_info["image"] == store.files[2]
        status, _, body = _get(server, "/api/store/image.png?index=0")
        assert status == 400 and "cannot be read" in json.loads(body)["error"]
    finally:
        server.stop()
