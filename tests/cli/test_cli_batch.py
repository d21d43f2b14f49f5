"""`saliency batch`: every image's map in the store (and a PNG each with --png), failures listed and
recorded, Ctrl-C and --resume giving the same maps as one whole run."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from saliency import attribution, models, viz
from saliency.attribution import store as stores
from saliency.cli.main import main
from saliency.models import data


def _png(path, chw):
    Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(path)
    return path


@pytest.fixture(scope="module")
def shapes():
    return data.shapes(40, seed=41)[0]


@pytest.fixture(scope="module")
def net():
    return models.load("shapes")


def _folder(path, images, names=None):
    path.mkdir()
    for i, chw in enumerate(images):
        _png(path / (names[i] if names else f"img{i:02d}.png"), chw)
    return path


def _batch(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(["batch", *map(str, args)])
        raise SystemExit(0)                  # main returns normally when every map was made
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def _decoded(path):
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


def _store(out):
    return attribution.open_store(stores.store_path(out))


def test_the_store_holds_each_images_gradient_and_the_pngs_its_heatmap(shapes, net, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    _png(folder / "x.png", shapes[0])
    Image.fromarray((np.moveaxis(shapes[1], 0, -1) * 255).astype(np.uint8)).save(folder / "x.jpg")
    _png(folder / "y.png", shapes[2])
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "out", "--png", "--batch-size", "2")
    assert code == 0, err
    store = _store(tmp_path / "out")
    assert f"wrote 3 of 3 maps to {store.path}, their heatmap PNGs to {tmp_path / 'out'}" in out
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == [
        "x.jpg_gradient.png", "x.png_gradient.png", "y_gradient.png"]
    files = sorted(folder.iterdir())
    assert store.files == [str(p) for p in files] and store.done.all() and store.errors == ["", "", ""]
    x = np.stack([viz.load_image(p, size=(64, 64))[0] for p in files])
    want = attribution.gradient(net, x)
    np.testing.assert_allclose(np.asarray(store.maps), want.map, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(store.predicted, np.asarray(want.output).argmax(axis=1))
    assert store.attrs["method"] == "gradient" and store.attrs["record"]["model"] == "shapes"
    for p, name in zip(files, ["x.jpg_gradient.png", "x.png_gradient.png", "y_gradient.png"]):
        i = files.index(p)
        np.testing.assert_array_equal(_decoded(tmp_path / "out" / name), viz.heatmap(store.maps[i]))


def test_without_zarr_the_store_is_npy_chunks_and_the_command_says_how_to_get_zarr(shapes, tmp_path, capsys,
                                                                                   monkeypatch):
    monkeypatch.setattr(stores, "zarr_available", lambda: False)
    folder = _folder(tmp_path / "in", shapes[:3])
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "out", "--batch-size", "2")
    assert code == 0, err
    assert f"zarr is not installed, so the maps are .npy chunks in {tmp_path / 'out' / 'maps'}" in err
    assert "pip install 'saliency-maps[scale]'" in err
    assert sorted(p.name for p in (tmp_path / "out" / "maps").iterdir()) == [
        "batch.0.json", "batch.1.json", "index.json", "maps.0.npy", "maps.1.npy"]
    chunks = np.concatenate([np.load(tmp_path / "out" / "maps" / f"maps.{k}.npy") for k in (0, 1)])
    np.testing.assert_array_equal(np.asarray(_store(tmp_path / "out").maps), chunks)


def test_batched_class_seeds_store_one_map_per_class(shapes, net, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:3])
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "out", "--seed", "classes:0,4", "--png")
    assert code == 0, err
    store = _store(tmp_path / "out")
    assert store.maps.shape == (3, 2, 3, 64, 64)
    x = np.stack([viz.load_image(p)[0] for p in sorted(folder.iterdir())])
    for j, k in enumerate((0, 4)):
        want = attribution.gradient(net, x, attribution.seeds.one_hot(k)).map
        np.testing.assert_allclose(np.asarray(store.maps)[:, j], want, rtol=1e-4, atol=1e-6)
    assert sorted(p.name for p in (tmp_path / "out").glob("img00_*.png")) == ["img00_gradient_0.png",
                                                                              "img00_gradient_1.png"]


def test_failures_are_summed_up_recorded_and_set_the_exit_code(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:3])
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    out_dir = tmp_path / "deep" / "out"                  # missing folders are created
    code, out, err = _batch(capsys, folder, "--out", out_dir)
    assert code == 2
    store = _store(out_dir)
    assert f"wrote 3 of 4 maps to {store.path}" in out
    error = store.errors[0]
    assert "cannot read image" in error and store.files[0].endswith("broken.png")
    assert err.strip().splitlines()[-2:] == ["1 image failed (their errors are in the store):",
                                             f"  broken.png: {error}"]
    assert np.isnan(store.maps[0]).all() and np.isfinite(np.asarray(store.maps)[1:]).all()
    assert store.done.all() and store.predicted[0] == -1


def test_an_error_of_the_model_on_one_image_does_not_stop_the_others(shapes, tmp_path, capsys):
    (tmp_path / "net.py").write_text(
        "import saliency.nn as nn\n"
        "class Picky(nn.Module):\n"
        "    input_shape = (3, 64, 64)\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = nn.Sequential(nn.Conv2d(3, 4, 5), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),"
        " nn.Linear(4, 2))\n"
        "    def forward(self, x):\n"
        "        if (x.numpy().reshape(len(x), -1).max(axis=1) == 0).any():\n"
        "            raise ValueError('a black image')\n"
        "        return self.net(x)\n")
    folder = _folder(tmp_path / "in", shapes[:3])
    Image.new("RGB", (64, 64)).save(folder / "black.png")
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "out", "--model", f"{tmp_path / 'net.py'}:Picky")
    assert code == 2 and "wrote 3 of 4 maps" in out
    assert "black.png: the model failed on an input of shape (1, 3, 64, 64): ValueError: a black image" in err
    store = _store(tmp_path / "out")
    assert np.isfinite(np.asarray(store.maps)[1:]).all()


def test_a_png_that_cannot_be_written_is_that_images_error_and_the_others_go_on(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:3])
    out_dir = tmp_path / "out"
    (out_dir / "img01_gradient.png").mkdir(parents=True)    # the PNG's name is taken by a folder
    code, out, err = _batch(capsys, folder, "--out", out_dir, "--png")
    assert code == 2 and "wrote 2 of 3 maps" in out
    assert "img01.png: cannot write" in err
    assert _decoded(out_dir / "img00_gradient.png").shape == (64, 64, 3)
    assert _decoded(out_dir / "img02_gradient.png").shape == (64, 64, 3)


def test_an_output_folder_that_cannot_be_created_is_one_line(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:1])
    (tmp_path / "file").write_text("")
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "file" / "out")
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1] == (f"error: cannot create the output folder {tmp_path / 'file' / 'out'}: "
                                            "Not a directory")


def test_bad_options_stop_before_any_work(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:1])
    (tmp_path / "file").write_text("")
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "file")
    assert code == 2 and "is a file; the maps go into a folder" in err
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "out", "--resume")
    assert code == 2 and "holds no map store from an earlier run" in err
    assert _batch(capsys, folder, "--out", tmp_path / "out")[0] == 0
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "out", "--resume", "--sign", "all")
    assert code == 2 and "was made with other sign ('abs' then, 'all' now)" in err
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "out", "--seed", "pixels:1,2;3")
    assert code == 2 and "cannot read seed 'pixels:1,2;3'" in err


def _wait_for_batches(out_dir, count, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if _store(out_dir).done.sum() >= count:
                return
        except attribution.StoreError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"no {count} maps appeared in {out_dir}")


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")
def test_ctrl_c_keeps_complete_batches_and_resume_gives_the_maps_of_one_whole_run(shapes, tmp_path):
    folder = _folder(tmp_path / "in", shapes)  # 40 images, 10 batches: the run must not finish before Ctrl-C
    n = len(shapes)
    command = [sys.executable, "-m", "saliency.cli.main", "batch", str(folder), "--method", "smoothgrad",
               "--batch-size", "4", "--png"]
    stopped = tmp_path / "stopped"
    proc = subprocess.Popen(command + ["--out", str(stopped)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _wait_for_batches(stopped, 8, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    store = _store(stopped)
    done = int(store.done.sum())
    assert 8 <= done < n and done % 4 == 0
    assert f"interrupted: {done} of {n} images are done in {store.path}" in err

    resumed = subprocess.run(command + ["--out", str(stopped), "--resume"], capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    whole = tmp_path / "whole"
    subprocess.run(command + ["--out", str(whole)], capture_output=True, check=True, timeout=300)
    a, b = _store(stopped), _store(whole)
    assert a.done.all()
    np.testing.assert_array_equal(np.asarray(a.maps), np.asarray(b.maps))  # bit for bit
    np.testing.assert_array_equal(a.predicted, b.predicted)
    for p in sorted(whole.glob("*.png")):
        np.testing.assert_array_equal(_decoded(stopped / p.name), _decoded(p))


def test_evaluate_writes_a_report_of_each_store(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:5])
    for method in ("gradient", "input_x_gradient"):
        assert _batch(capsys, folder, "--out", tmp_path / method, "--method", method)[0] == 0
    second = _store(tmp_path / "input_x_gradient").path  # the store itself, not its folder
    with pytest.raises(SystemExit) as info:
        main(["evaluate", str(tmp_path / "gradient"), str(second), "--out", str(tmp_path / "report"),
              "--steps", "4", "--sample", "2"])
        raise SystemExit(0)
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert out.splitlines()[0].startswith("| store | method | seed | images | deletion AUC")
    numbers = json.loads((tmp_path / "report" / "evaluation.json").read_text())
    expected = attribution.evaluate_store(models.load("shapes"), _store(tmp_path / "gradient"), steps=4, sample=2)
    got = numbers[str(tmp_path / "gradient")]
    np.testing.assert_allclose(got["deletion_auc"], expected.deletion_auc, rtol=1e-6)
    assert got["method"] == "gradient" and len(got["randomisation"]["layers"]) == len(expected.layers)
    report = (tmp_path / "report" / "evaluation.md").read_text()
    assert "| input_x_gradient | default | 5 |" in report and "## Randomisation check" in report
    assert _decoded(tmp_path / "report" / "evaluation.png").ndim == 3


def test_evaluate_of_a_folder_without_a_store_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as info:
        main(["evaluate", str(tmp_path / "empty"), "--out", str(tmp_path / "r")])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == (f"error: {tmp_path / 'empty'} holds no map store; make one with: "
                                               f"saliency batch FOLDER --out {tmp_path / 'empty'}")
