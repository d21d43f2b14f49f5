"""`saliency look-distance` through typer's CliRunner: a PNG and a summary, or one line and exit code 2."""
import re

import numpy as np
import pytest
from PIL import Image
from saliency.cli.main import app, main
from saliency.models import data
from typer.testing import CliRunner

runner = CliRunner()


def _png(path, chw):
    Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8).squeeze()).save(path)
    return path


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    images, _, _ = data.scenes(1, seed=41)
    return _png(tmp_path_factory.mktemp("img") / "scene.png", images[0])


@pytest.fixture(scope="module")
def star(tmp_path_factory):
    images, _ = data.shapes(1, seed=42)
    return _png(tmp_path_factory.mktemp("img") / "star.png", images[0])


@pytest.mark.parametrize("fraction", ["0.5", "0.9"])
def test_look_distance_writes_a_png_and_prints_the_median_radius(scene, tmp_path, fraction):
    out = tmp_path / "look.png"
    result = runner.invoke(app, ["look-distance", str(scene), "--stride", "16", "--fraction", fraction,
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert re.search(r"model: depth +stride: 16 \(8x8 of the 128x128 output pixels\) +time: [0-9.]+ s",
                     result.output), result.output
    pct = f"{100 * float(fraction):g}%"
    median = re.search(rf"median radius holding {pct} of the gradient mass: ([0-9.]+) input px", result.output)
    assert median and 0 < float(median.group(1)) < 128 * np.sqrt(2)
    assert f"wrote {out}" in result.output
    picture = np.asarray(Image.open(out))
    assert picture.ndim == 3 and picture.shape[0] > 100 and picture.std() > 10


@pytest.mark.slow
def test_the_default_stride_and_output_name(scene, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["look-distance", str(scene)])
    assert result.exit_code == 0, result.output
    assert "stride: 4 (32x32 of the 128x128 output pixels)" in result.output
    assert (tmp_path / "scene_look_distance.png").is_file()


@pytest.mark.parametrize("args, message", [
    (["{star}", "--model", "shapes"], "look_distance needs a model with a dense output"),
    (["{scene}", "--stride", "0"], "--stride must be a positive integer"),
    (["{scene}", "--fraction", "1.5"], "--fraction must be in (0, 1]"),
    (["{text}"], "not an image"),
    (["{tmp}/missing.png"], "does not exist"),
    (["{scene}", "--model", "resnet"], "unknown model 'resnet'"),
    (["{scene}", "--out", "{tmp}/look.jpg"], "--out must be a file name ending in .png"),
])
def test_bad_input_is_one_clear_line(scene, star, tmp_path, capsys, args, message):
    text = tmp_path / "t.png"
    text.write_text("hello")
    args = ["look-distance"] + [a.format(scene=scene, star=star, text=text, tmp=tmp_path) for a in args]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = [e for e in err if e.startswith("error: ")]
    assert len(line) == 1 and message in line[0], err
    assert all(e.startswith("error: ") or e.strip() in ("", "pixel seeds") for e in err), err
