"""`saliency map` and `saliency batch` through typer's CliRunner and as a real subprocess."""
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

import saliency as sl
from saliency.cli.main import app, main
from saliency.models import data, zoo

runner = CliRunner()


def _png(path, chw):
    Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8).squeeze()).save(path)
    return path


@pytest.fixture(scope="module")
def star(tmp_path_factory):
    images, labels = data.shapes(40, seed=31)
    i = int(np.flatnonzero(labels == data.SHAPE_CLASSES.index("star"))[0])
    return _png(tmp_path_factory.mktemp("img") / "star.png", images[i])


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    images, _, _ = data.scenes(1, seed=32)
    return _png(tmp_path_factory.mktemp("img") / "scene.png", images[0])


def test_default_map_names_the_shape_and_writes_a_png(star, tmp_path):
    out = tmp_path / "m.png"
    result = runner.invoke(app, ["map", str(star), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "prediction: star" in result.output
    assert "seed: predicted class 3 (star)" in result.output and "method: gradient" in result.output
    picture = np.asarray(Image.open(out))
    assert picture.ndim == 3 and picture.shape[0] > 100 and picture.std() > 10


@pytest.mark.parametrize("method", ["input_x_gradient", "smoothgrad", "integrated_gradients", "guided_backprop",
                                    "gradcam", "occlusion", "lrp", "deeplift",
                                    "deeplift_shap --baselines uniform:3", "gradient_shap --baselines 0,1 --draws 4",
                                    "lrp --composite epsilon_gamma_box --low 0 --high 1 --zero-bias true"])
def test_every_method_runs_from_the_command_line(star, tmp_path, method):
    method, *options = method.split()
    out = tmp_path / f"{method}.png"
    result = runner.invoke(app, ["map", str(star), "--method", method, *options, "--seed", "class:0", "--sign",
                                 "all", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"method: {method}" in result.output and "class 0 (circle)" in result.output
    assert out.is_file()


def test_the_map_is_the_gradient_the_api_computes(star, tmp_path):
    """What the PNG shows comes from the same numbers as the Python API (checked on the map itself)."""
    from saliency.cli.mapping import compute

    model = zoo.load("shapes")
    x, attr, _ = compute(model, star, "gradient", "class:5")
    xt = sl.tensor(x[None], requires_grad=True)
    model(xt)[0, 5].backward()
    np.testing.assert_allclose(attr.map, xt.grad.numpy()[0], rtol=1e-5, atol=1e-7)


def test_depth_map_with_a_pixel_seed(scene, tmp_path):
    out = tmp_path / "d.png"
    result = runner.invoke(app, ["map", str(scene), "--model", "depth", "--seed", "pixel:100,64", "--overlay",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "prediction: a 128x128 map" in result.output and " m," in result.output
    assert "pixel (100, 64)" in result.output and out.is_file()


def test_depth_map_with_rgb_reduce_shows_its_one_channel_output_beside_three_panels(scene, tmp_path):
    out = tmp_path / "d.png"
    result = runner.invoke(app, ["map", str(scene), "--model", "depth", "--reduce", "rgb", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file()


def test_any_image_is_resized_with_a_note(tmp_path):
    rgba = np.zeros((90, 120, 4), np.uint8)
    rgba[20:60, 30:90] = (255, 0, 0, 255)
    Image.fromarray(rgba).save(tmp_path / "big.png")
    Image.fromarray(rgba[..., 0]).save(tmp_path / "grey.png")
    for name in ("big.png", "grey.png"):
        result = runner.invoke(app, ["map", str(tmp_path / name), "--out", str(tmp_path / "o.png")])
        assert result.exit_code == 0, result.output
        assert "resized 120x90 -> 64x64" in result.output


@pytest.mark.parametrize("args, message", [
    (["map", "/no/such.png"], "image file /no/such.png does not exist"),
    (["map", "{text}"], "not an image"),
    (["map", "{star}", "--model", "resnet"], "unknown model 'resnet'"),
    (["map", "{star}", "--seed", "klass:3"], "klass:3"),
    (["map", "{star}", "--seed", "class:12"], "class 12 is out of range for an output with 8 classes (valid: 0..7)"),
    (["map", "{star}", "--seed", "pixel:3,4"], "needs a dense output"),
    (["map", "{scene}", "--model", "depth", "--seed", "pixel:300,4"], "outside"),
    (["map", "{star}", "--method", "lime"], "unknown method 'lime'"),
    (["map", "{star}", "--method", "deeplift_shap"], "deeplift_shap needs --baselines"),
    (["map", "{star}", "--method", "lrp", "--composite", "zplus"], "--composite must be one of epsilon_plus_flat"),
    (["map", "{star}", "--method", "deeplift", "--composite", "epsilon"],
     "--composite is an option of lrp, not of deeplift"),
    (["map", "{star}", "--sign", "both"], "unknown sign 'both'"),
    (["map", "{star}", "--weights", "{weights}"], "does not fit the 'shapes' model"),
    (["map", "{star}", "--out", "{tmp}/x.jpg"], "ending in .png"),
    (["map", "{star}", "--seed", "classes:0,1"], "seed classes:0,1 makes 2 maps and saliency map draws one; "
                                                 "for K maps per image use saliency batch"),
    (["batch", "/no/such/dir", "--out", "{tmp}"], "folder /no/such/dir does not exist"),
    (["batch", "{star}", "--out", "{tmp}"], "is not a folder"),
    (["map", "{tmp}"], "is a folder, not an image file (for every image in a folder: saliency batch)"),
    (["map", "{star}", "--out", "{tmp}"], "is a folder; give a file name ending in .png, e.g. {tmp}/star_gradient.png"),
    (["receptive-field", "{scene}", "--pixel", "3,3", "--out", "{tmp}"], "is a folder; give a file name"),
    (["look-distance", "{scene}", "--out", "{tmp}"], "is a folder; give a file name"),
])
def test_bad_input_is_one_clear_line(star, scene, tmp_path, capsys, args, message):
    text = tmp_path / "t.png"
    text.write_text("hello")
    weights = tmp_path / "w.npz"
    sl.nn.save({"fc.weight": np.zeros((3, 3), np.float32)}, weights)
    args = [a.format(star=star, scene=scene, text=text, weights=weights, tmp=tmp_path) for a in args]
    message = message.format(tmp=tmp_path)
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err


_NET = ("import saliency.nn as nn\n"
        "def net():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))\n")


def _shapes_weights(path, change):
    state = {k: np.asarray(v) for k, v in zoo.load("shapes").state_dict().items()}
    key = "features.block1.conv.weight"
    state[key] = change(state[key])
    sl.nn.save(state, path)
    return path


@pytest.mark.parametrize("case, message", [
    ("builder raises", "building the model with build() from {tmp}/m.py failed: RuntimeError: boom"),
    ("sys.exit at import", "importing {tmp}/m.py failed: it called sys.exit(3)"),
    ("sys.exit in build", "building the model with build() from {tmp}/m.py failed: it called sys.exit(3)"),
    ("complex weights", "has dtype complex64; expected a numeric array"),
    ("string weights", "is not a readable .npz file: member 'features.block1.conv.weight.npy' has dtype '<U1'"),
    ("integer weights", "has dtype int64 but the model's features.block1.conv.weight is float32; integer weights "
                        "are refused"),
    ("nan weights", "hold NaN or infinite values in 1 tensor (features.block1.conv.weight)"),
    ("nan in the model file", "the model's output for star.png holds 2 NaN or infinite values; its weights hold NaN "
                              "or infinite values in 0.weight"),
])
def test_model_and_weights_failures_are_one_line_with_exit_code_2(star, tmp_path, capsys, case, message):
    model, weights = "shapes", None
    if case == "builder raises":
        (tmp_path / "m.py").write_text("def build():\n    raise RuntimeError('boom')\n")
    elif case == "sys.exit at import":
        (tmp_path / "m.py").write_text("import sys\nsys.exit(3)\n")
    elif case == "sys.exit in build":
        (tmp_path / "m.py").write_text("import sys\ndef build():\n    sys.exit(3)\n")
    elif case == "nan in the model file":
        (tmp_path / "m.py").write_text(_NET + "def build():\n    m = net()\n    m[0].weight.data.fill_(float('nan'))\n"
                                       "    return m\n")
    else:
        change = {"complex weights": lambda w: w.astype(np.complex64), "string weights": lambda w: np.full(w.shape, "a"),
                  "integer weights": lambda w: w.astype(np.int64), "nan weights": lambda w: w * np.nan}[case]
        weights = _shapes_weights(tmp_path / "w.npz", change)
    if (tmp_path / "m.py").exists():
        model = f"{tmp_path / 'm.py'}:build"
    args = ["map", str(star), "--model", model, "--out", str(tmp_path / "o.png")]
    with pytest.raises(SystemExit) as info:
        main(args + (["--weights", str(weights)] if weights else []))
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message.format(tmp=tmp_path) in err and "\n" not in err, err


def test_a_viz_error_is_a_user_error(star, tmp_path, capsys, monkeypatch):
    from saliency.cli import mapping

    def refuse(*args):
        raise sl.viz.VizError("a map the picture cannot show")

    monkeypatch.setattr(mapping, "run", refuse)
    with pytest.raises(SystemExit) as info:
        main(["map", str(star)])
    assert info.value.code == 2
    assert capsys.readouterr().err == "error: a map the picture cannot show\n"


def test_a_users_own_model_from_a_file(star, tmp_path):
    (tmp_path / "mine.py").write_text(
        "import saliency as sl\n"
        "def build():\n"
        "    return sl.nn.Sequential(sl.nn.Conv2d(3, 4, 3, padding=1), sl.nn.ReLU(), sl.nn.AdaptiveAvgPool2d(1),\n"
        "                            sl.nn.Flatten(), sl.nn.Linear(4, 2))\n")
    sl.manual_seed(0)
    import importlib.util
    spec = importlib.util.spec_from_file_location("mine", tmp_path / "mine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sl.nn.save(mod.build().state_dict(), tmp_path / "mine.npz")
    result = runner.invoke(app, ["map", str(star), "--model", f"{tmp_path / 'mine.py'}:build",
                                 "--weights", str(tmp_path / "mine.npz"), "--out", str(tmp_path / "o.png")])
    assert result.exit_code == 0, result.output
    assert "prediction: " in result.output and (tmp_path / "o.png").is_file()
    with pytest.raises(SystemExit) as info:
        main(["map", str(star), "--model", f"{tmp_path / 'mine.py'}:nothing"])
    assert info.value.code == 2


def test_real_subprocess_error_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "saliency.cli.main", "map", str(tmp_path / "missing.png")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: image file") and "Traceback" not in proc.stderr


def test_receptive_field_command_reports_radii_and_box(scene, tmp_path):
    out = tmp_path / "rf.png"
    result = runner.invoke(app, ["receptive-field", str(scene), "--pixel", "90,40", "--out", str(out)])
    assert result.exit_code == 0, result.output
    radii = [float(r) for r in re.findall(r"within ([0-9.]+) px", result.output)]
    assert len(radii) == 2 and 0 < radii[0] <= radii[1]
    assert "theoretical receptive field:" in result.output and out.is_file()


@pytest.mark.parametrize("args, message", [
    (["receptive-field", "{scene}", "--pixel", "3"], "--pixel must be two integers ROW,COL"),
    (["receptive-field", "{star}", "--pixel", "3,3", "--model", "shapes"], "needs a dense output"),
    (["receptive-field", "{scene}", "--pixel", "128,0"], "outside"),
])
def test_receptive_field_command_errors(star, scene, capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main([a.format(star=star, scene=scene) for a in args])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err


def test_gradcam_layer_by_name(star, tmp_path, capsys):
    result = runner.invoke(app, ["map", str(star), "--method", "gradcam", "--layer", "features.block2.conv",
                                 "--out", str(tmp_path / "g.png")])
    assert result.exit_code == 0, result.output
    with pytest.raises(SystemExit) as info:
        main(["map", str(star), "--method", "gradcam", "--layer", "block9"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "the model has no layer 'block9'; its convolutions are: features.block1.conv" in err


def test_a_model_whose_first_layer_takes_other_channels_is_one_line(star, tmp_path, capsys):
    (tmp_path / "four.py").write_text(
        "import saliency.nn as nn\n"
        "def build():\n"
        "    return nn.Sequential(nn.Conv2d(4, 2, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())\n")
    with pytest.raises(SystemExit) as info:
        main(["map", str(star), "--model", f"{tmp_path / 'four.py'}:build", "--out", str(tmp_path / "o.png")])
    assert info.value.code == 2
    assert capsys.readouterr().err == "error: the model's first layer takes 4 channels; the input has 3 " \
                                      "(shape (1, 3, 64, 64))\n"
    assert not (tmp_path / "o.png").exists()
