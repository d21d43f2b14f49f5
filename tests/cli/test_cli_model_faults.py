"""A user's model that fails is the user's input, not a bug of saliency: every way a model file's
forward can go wrong is one line and exit code 2 (a ModelError in the library), in `map` and in
`batch`, where an image the model fails on is recorded and the others go on, whichever batch it
is in."""

import numpy as np
import pytest
from PIL import Image

from _cli import run_cli

from saliency import attribution
from saliency.attribution import store as stores

HEADER = '''\
import sys
import numpy as np
import saliency as torch
import saliency.nn as nn
import saliency.nn.functional as F


class Net(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, num_classes)

    def features(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.conv(x)), 1), 1))

    def forward(self, x):
'''

FORWARDS = {
    "a tuple": ("return self.features(x), x", "must return a Tensor, got a tuple of 2"),
    "a dict": ("return {'out': self.features(x)}", "must return a Tensor, got a dict with keys 'out'"),
    "an int": ("return 3", "must return a Tensor, got a value of type int"),
    "None": ("self.features(x)", "must return a Tensor, got None"),
    "an ndarray": ("return self.features(x).numpy()", "must return a Tensor, got a value of type ndarray"),
    "a scalar": ("return self.features(x).sum()", "has no batch dimension matching the input's 1 images"),
    "a detached output": ("return self.features(x).detach()", "the model output does not depend on x"),
    "an argmax": ("return self.features(x).argmax(dim=1)", "a map needs a floating-point output"),
    "ValueError": ("raise ValueError('the answer is 42')", "the model failed on an input of shape (1, 3, 8, 8): "
                   "ValueError: the answer is 42"),
    "RecursionError": ("return self.forward(x)", "RecursionError: maximum recursion depth exceeded"),
    "GeneratorExit": ("raise GeneratorExit", "the model failed on an input of shape (1, 3, 8, 8): GeneratorExit"),
    "sys.exit": ("sys.exit(3)", "the model called sys.exit(3) on an input of shape (1, 3, 8, 8)"),
}


@pytest.fixture()
def image(tmp_path):
    path = tmp_path / "in.png"
    Image.fromarray((np.random.default_rng(0).random((8, 8, 3)) * 255).astype(np.uint8)).save(path)
    return path


def _model_file(tmp_path, body, name="net.py"):
    path = tmp_path / name
    path.write_text(HEADER + "        " + body + "\n")
    return f"{path}:Net"


@pytest.mark.parametrize("case", list(FORWARDS))
def test_a_forward_that_goes_wrong_is_one_line_and_exit_code_2(tmp_path, image, capsys, case):
    body, message = FORWARDS[case]
    code, _, err = run_cli(capsys, "map", image, "--model", _model_file(tmp_path, body), "--random-seed", "1",
                           "--out", tmp_path / "m.png")
    lines = [line for line in err.splitlines() if not line.startswith("note:")]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "m.png").exists()


def test_a_forward_raising_memory_error_is_one_line_and_exit_code_2(tmp_path, image, capsys):
    code, _, err = run_cli(capsys, "map", image, "--model", _model_file(tmp_path, "raise MemoryError"),
                           "--out", tmp_path / "m.png")
    assert code == 2 and err.splitlines()[-1].startswith("error: out of memory; try a smaller"), err


def test_a_model_with_no_classes_is_one_line(tmp_path, image, capsys):
    code, _, err = run_cli(capsys, "map", image, "--model", _model_file(tmp_path, "return self.features(x)"),
                           "--model-args", '{"num_classes": 0}', "--out", tmp_path / "m.png")
    assert code == 2 and "error: the model's output of shape (1, 0) is empty" in err


def test_deeply_nested_model_arguments_are_one_line(tmp_path, image, capsys):
    nested = "[" * 100_000 + "]" * 100_000
    code, _, err = run_cli(capsys, "map", image, "--model", _model_file(tmp_path, "return self.features(x)"),
                           "--model-args", nested, "--out", tmp_path / "m.png")
    assert code == 2 and err.strip() == ("error: --model-args nests too deeply to read; give a flat JSON object "
                                         "such as '{\"num_classes\": 10}'")


def test_the_library_raises_model_error_with_the_models_own_exception_as_cause():
    def model(t):
        raise KeyError("layer4")

    with pytest.raises(attribution.ModelError, match="KeyError: 'layer4'") as info:
        attribution.gradient(model, np.zeros((3, 4, 4), np.float32))
    assert isinstance(info.value.__cause__, KeyError)


def test_ctrl_c_inside_the_model_is_not_a_model_error():
    def model(t):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        attribution.gradient(model, np.zeros((3, 4, 4), np.float32))


def _folder(tmp_path, n=6):
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i in range(n):
        Image.fromarray((rng.random((8, 8, 3)) * 255).astype(np.uint8)).save(folder / f"img{i}.png")
    return folder


FAILS_ON_BRIGHT = ("if (x.numpy().mean(axis=(1, 2, 3)) > 0.52).any():\n            raise ValueError('too bright')\n"
                   "        return self.features(x)")


@pytest.mark.parametrize("batch_size", ["1", "2", "6"])
def test_batch_records_each_image_the_model_fails_on_in_whatever_batch(tmp_path, capsys, batch_size):
    folder = _folder(tmp_path)
    means = [np.asarray(Image.open(p), np.float32).mean() / 255 for p in sorted(folder.iterdir())]
    bright = [m > 0.52 for m in means]
    assert any(bright) and not all(bright)
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "batch", folder, "--out", out, "--model",
                                _model_file(tmp_path, FAILS_ON_BRIGHT), "--random-seed", "3",
                                "--batch-size", batch_size)
    store = attribution.open_store(stores.store_path(out))
    assert code == 2 and f"wrote {len(means) - sum(bright)} of {len(means)} maps" in stdout
    assert [bool(e) for e in store.errors] == bright
    assert all("ValueError: too bright" in e for e, b in zip(store.errors, bright) if b)
    assert store.done.all()
    maps = np.asarray(store.maps)
    assert np.isnan(maps[bright]).all() and np.isfinite(maps[~np.array(bright)]).all()


def test_batch_on_a_model_that_fails_everywhere_records_every_image(tmp_path, capsys):
    folder = _folder(tmp_path, 3)
    code, _, err = run_cli(capsys, "batch", folder, "--out", tmp_path / "out", "--batch-size", "1", "--model",
                           _model_file(tmp_path, "sys.exit(3)"), "--random-seed", "3")
    assert code == 2 and "3 images failed" in err and err.count("called sys.exit(3)") == 3


@pytest.mark.slow
def test_ctrl_c_during_a_long_map_says_interrupted(image, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    if os.name != "posix":
        pytest.skip("sends SIGINT")
    proc = subprocess.Popen([sys.executable, "-m", "saliency.cli.main", "map", str(image), "--method", "smoothgrad",
                             "--samples", "1000000", "--out", str(tmp_path / "m.png")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "interrupted", err
    assert not (tmp_path / "m.png").exists()
