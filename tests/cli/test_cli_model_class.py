"""`--model path/to/file.py:Name` where Name is a Module class written as a PyTorch model file is
(its three import lines changed), built with `--model-args` JSON, with its weights from a file."""
import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

import saliency as sl
from saliency.cli.main import app, main
from saliency.models import zoo

runner = CliRunner()

MODEL_FILE = '''\
import saliency as torch
import saliency.nn as nn
import saliency.nn.functional as F


class Net(nn.Module):
    def __init__(self, num_classes=10, width=8):
        super().__init__()
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.fc = nn.Linear(width, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                m.weight.data.normal_(0, 0.5)
                m.bias.data.zero_()

    def forward(self, x):
        x = F.relu(self.conv(x.to(self.device)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
'''


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "net.py").write_text(MODEL_FILE)
    rng = np.random.default_rng(0)
    Image.fromarray((rng.random((20, 24, 3)) * 255).astype(np.uint8)).save(tmp_path / "in.png")
    return tmp_path


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_class_is_built_with_the_json_arguments_and_its_weights(files):
    args = json.dumps({"num_classes": 3, "width": 5})
    model = zoo.load_user(f"{files / 'net.py'}:Net", args=args)
    assert model.fc.out_features == 3 and model.conv.out_channels == 5 and not model.training
    sl.nn.save(model, files / "net.npz")
    result = _run("map", files / "in.png", "--model", f"{files / 'net.py'}:Net", "--model-args", args,
                  "--weights", files / "net.npz", "--out", files / "map.png")
    assert result.exit_code == 0, result.output
    assert (files / "map.png").is_file()
    # the prediction printed is the one the model gives the image with these weights
    x = sl.tensor(np.asarray(Image.open(files / "in.png"), dtype=np.float32).transpose(2, 0, 1)[None] / 255)
    logits = model(x).numpy()[0]
    assert f"prediction: {int(logits.argmax())} " in result.output


def test_positional_arguments_as_a_json_array(files):
    model = zoo.load_user(f"{files / 'net.py'}:Net", args="[4, 2]")
    assert (model.fc.out_features, model.conv.out_channels) == (4, 2)


@pytest.mark.parametrize("model_args, message", [
    ('{"num_class": 3}', "building the model with Net(num_class=3) from"),
    ("{num", "--model-args is not valid JSON"),
    ('"text"', "--model-args must be a JSON object of keyword arguments or an array"),
])
def test_bad_model_arguments_are_one_line(files, capsys, model_args, message):
    with pytest.raises(SystemExit) as info:
        main(["map", str(files / "in.png"), "--model", f"{files / 'net.py'}:Net", "--model-args", model_args,
              "--out", str(files / "map.png")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not (files / "map.png").exists()


def test_a_zoo_model_takes_no_arguments(files, capsys):
    with pytest.raises(SystemExit):
        main(["map", str(files / "in.png"), "--model", "shapes", "--model-args", "[1]"])
    assert "the zoo model 'shapes' takes none" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["receptive-field", "--pixel", "3,3"], ["look-distance", "--stride", "8"]])
def test_the_dense_commands_take_model_arguments_too(files, command):
    (files / "dense.py").write_text(
        "import saliency.nn as nn\n"
        "class Dense(nn.Module):\n"
        "    def __init__(self, width):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, 1, 3, padding=1))\n"
        "    def forward(self, x):\n"
        "        return self.body(x)\n")
    result = _run(command[0], files / "in.png", *command[1:], "--model", f"{files / 'dense.py'}:Dense",
                  "--model-args", '{"width": 4}', "--out", files / "d.png")
    assert result.exit_code == 0, result.output
    assert (files / "d.png").is_file()
