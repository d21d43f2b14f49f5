"""`saliency batch`: every image gets its own complete map, failures are listed, Ctrl-C and --resume."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from saliency._write import is_part
from saliency.cli.main import main
from saliency.models import data


def _png(path, chw):
    Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(path)
    return path


@pytest.fixture(scope="module")
def shapes():
    return data.shapes(40, seed=41)[0]


def _folder(path, images, names=None):
    path.mkdir()
    for i, chw in enumerate(images):
        _png(path / (names[i] if names else f"img{i:02d}.png"), chw)
    return path


def _batch(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(["batch", *map(str, args)])
        raise SystemExit(0)                  # main returns normally when every map was written
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def _record(out):
    return json.loads((out / "batch.json").read_text())


def _decodes(path):
    with Image.open(path) as img:
        img.load()
    return img.size


def test_images_with_one_stem_get_one_map_each(shapes, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    _png(folder / "x.png", shapes[0])
    Image.fromarray((np.moveaxis(shapes[1], 0, -1) * 255).astype(np.uint8)).save(folder / "x.jpg")
    _png(folder / "y.png", shapes[2])
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "out")
    assert code == 0, err
    assert "wrote 3 of 3 maps" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "batch.json", "x.jpg_gradient.png", "x.png_gradient.png", "y_gradient.png"]


def test_no_two_images_share_a_map_name_even_when_names_nest_or_differ_in_case(shapes, tmp_path, capsys):
    from saliency.cli.batch import output_names

    folder = _folder(tmp_path / "in", shapes[:3], ["x.png", "x.png.png", "X.PNG"])
    Image.fromarray((np.moveaxis(shapes[3], 0, -1) * 255).astype(np.uint8)).save(folder / "x.jpg")
    names = output_names(sorted(folder.iterdir()), "gradient")
    assert len({n.lower() for n in names.values()}) == 4
    assert names == {folder / "X.PNG": "X.PNG_gradient.png", folder / "x.jpg": "x.jpg_gradient.png",
                     folder / "x.png": "x.png_2_gradient.png", folder / "x.png.png": "x.png_3_gradient.png"}
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "out")
    assert code == 0, err
    assert "wrote 4 of 4 maps" in out
    assert len(list((tmp_path / "out").glob("*.png"))) == 4


def test_failures_are_summed_up_recorded_and_set_the_exit_code(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:3])
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    out_dir = tmp_path / "deep" / "out"                  # missing folders are created
    code, out, err = _batch(capsys, folder, "--out", out_dir)
    assert code == 2
    assert "wrote 3 of 4 maps" in out
    assert err.strip().splitlines()[-2:] == [f"1 image failed (listed in {out_dir / 'batch.json'}):",
                                             f"  broken.png: {_record(out_dir)['failed'][0]['error']}"]
    record = _record(out_dir)
    assert record["state"] == "complete" and record["written"] == 3 and record["images"] == 4
    assert [f["file"] for f in record["failed"]] == [str(folder / "broken.png")]
    assert "cannot read image" in record["failed"][0]["error"]


def test_an_error_of_the_model_on_one_image_does_not_stop_the_others(shapes, tmp_path, capsys):
    (tmp_path / "net.py").write_text(
        "import saliency.nn as nn\n"
        "def build():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 5), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),"
        " nn.Linear(4, 2))\n")
    folder = _folder(tmp_path / "in", shapes[:2])
    Image.new("RGB", (1, 1)).save(folder / "dot.png")     # no input_shape: a 1x1 image reaches a 5x5 convolution
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "out", "--model", f"{tmp_path / 'net.py'}:build")
    assert code == 2 and "wrote 2 of 3 maps" in out
    assert "dot.png: conv2d output would be empty" in err


def test_a_map_that_cannot_be_written_does_not_stop_the_others(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:3])
    out_dir = tmp_path / "out"
    (out_dir / "img01_gradient.png").mkdir(parents=True)    # the map's name is taken by a folder
    code, out, err = _batch(capsys, folder, "--out", out_dir)
    assert code == 2 and "wrote 2 of 3 maps" in out
    assert "img01.png: cannot write" in err
    assert _decodes(out_dir / "img00_gradient.png") and _decodes(out_dir / "img02_gradient.png")
    assert _record(out_dir)["state"] == "complete"


def test_an_output_folder_that_cannot_be_created_is_one_line(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:1])
    (tmp_path / "file").write_text("")
    code, out, err = _batch(capsys, folder, "--out", tmp_path / "file" / "out")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: cannot create the output folder {tmp_path / 'file' / 'out'}: "
                                        "Not a directory"]


def test_bad_options_stop_before_any_work(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:1])
    (tmp_path / "file").write_text("")
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "file")
    assert code == 2 and "is a file; batch writes one PNG per image into a folder" in err
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "out", "--resume")
    assert code == 2 and "holds no batch.json from an earlier run" in err
    assert _batch(capsys, folder, "--out", tmp_path / "out")[0] == 0
    code, _, err = _batch(capsys, folder, "--out", tmp_path / "out", "--resume", "--sign", "all")
    assert code == 2 and "--sign 'abs' then, 'all' now" in err


def test_existing_maps_are_overwritten_without_resume(shapes, tmp_path, capsys):
    folder = _folder(tmp_path / "in", shapes[:1])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "img00_gradient.png").write_text("an old file")
    assert _batch(capsys, folder, "--out", out_dir)[0] == 0
    assert _decodes(out_dir / "img00_gradient.png")


def _wait_for_maps(out_dir, count, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if out_dir.is_dir() and len([p for p in out_dir.glob("*.png") if not is_part(p)]) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {count} maps appeared in {out_dir}")


def _maps(out_dir):
    return {p.name: p.read_bytes() for p in sorted(out_dir.glob("*.png"))}


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")
def test_ctrl_c_keeps_complete_maps_and_resume_finishes_the_same_maps(shapes, tmp_path):
    folder = _folder(tmp_path / "in", shapes)  # all 40: the run must not finish between the 3rd map and Ctrl-C
    n = len(shapes)
    command = [sys.executable, "-m", "saliency.cli.main", "batch", str(folder), "--method", "smoothgrad"]
    stopped = tmp_path / "stopped"
    proc = subprocess.Popen(command + ["--out", str(stopped)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _wait_for_maps(stopped, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    record = _record(stopped)
    done = sorted(p.name for p in stopped.glob("*.png"))
    assert record["state"] == "interrupted" and 3 <= record["written"] == len(done) < n
    assert f"interrupted: {len(done)} of {n} maps are in {stopped}, each complete" in err
    assert [p.name for p in stopped.iterdir() if is_part(p)] == []
    for name in done:
        _decodes(stopped / name)
    first = {name: (stopped / name).stat().st_mtime_ns for name in done}

    resumed = subprocess.run(command + ["--out", str(stopped), "--resume"], capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"wrote {n - len(done)} of {n} maps to {stopped} ({len(done)} already there)" in resumed.stdout
    assert {name: (stopped / name).stat().st_mtime_ns for name in done} == first   # not computed again
    assert _record(stopped)["state"] == "complete"

    whole = tmp_path / "whole"
    subprocess.run(command + ["--out", str(whole)], capture_output=True, check=True, timeout=300)
    assert _maps(stopped) == _maps(whole)
