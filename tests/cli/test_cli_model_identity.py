"""What a map store records about the model that made its maps (the model file's and the weights
file's SHA-256, the parameters', the random seed of a random initialisation), and what is refused
because of it: a resumed run or an evaluation with another model. Also: `evaluate` never imports
a model file the store names unless the user names it."""
import json
import os

import numpy as np
import pytest
from PIL import Image

from _cli import run_cli

import saliency as sl
from saliency import attribution
from saliency.attribution import store as stores
from saliency.models import zoo

MODEL_FILE = '''\
import pathlib
import saliency as torch
import saliency.nn as nn
import saliency.nn.functional as F

MARKER = pathlib.Path(__file__).with_name("imported.txt")
MARKER.write_text("this file ran")


class Net(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.conv(x)), 1), 1))
'''


@pytest.fixture()
def work(tmp_path):
    (tmp_path / "net.py").write_text(MODEL_FILE)
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(2)
    pixels = (rng.random((10, 10, 3)) * 255).astype(np.uint8)
    for i in range(4):  # two byte-identical images in different batches
        Image.fromarray(pixels if i in (0, 3) else (rng.random((10, 10, 3)) * 255).astype(np.uint8)).save(
            folder / f"img{i}.png")
    return tmp_path


def _store(out):
    return attribution.open_store(stores.store_path(out))


def test_a_random_initialisation_is_recorded_and_resumed_with_its_seed(work, capsys):
    model = f"{work / 'net.py'}:Net"
    code, _, err = run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--batch-size", "2")
    assert code == 0, err
    record = _store(work / "out").attrs["record"]
    seed = record["random_seed"]
    assert isinstance(seed, int) and f"random seed {seed}; --random-seed {seed} builds the same weights" in err
    maps = np.asarray(_store(work / "out").maps)
    np.testing.assert_array_equal(maps[0], maps[3])  # identical images, one model: identical maps
    # the same seed in a new process builds the same weights
    again = zoo.ModelSource(model, random_seed=seed).load()
    assert again[2]["parameters_sha256"] == record["identity"]["parameters_sha256"]

    # a stopped run: its second batch lost; --resume without --random-seed uses the store's seed
    store = _store(work / "out")
    done = store.path / "done" / "c" / "1"
    if done.exists():
        done.unlink()
    else:  # the .npy folder format
        (store.path / "batch.1.json").unlink()
    code, _, err = run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--batch-size", "2",
                           "--resume")
    assert code == 0, err
    np.testing.assert_array_equal(np.asarray(_store(work / "out").maps), maps)

    code, _, err = run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--batch-size", "2",
                           "--resume", "--random-seed", str(seed + 1))
    assert code == 2
    assert (f"the model differs from the one that made the maps in {work / 'out'}: the model's parameters" in err
            and f"the random seed of its initial weights ({seed} then, {seed + 1} now)" in err), err


def test_a_weights_file_replaced_at_the_same_path_is_refused_on_resume(work, capsys):
    model = f"{work / 'net.py'}:Net"
    weights = work / "w.npz"
    sl.manual_seed(5)
    net = zoo.load_user(model)
    sl.nn.save(net, weights)
    assert run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--weights", weights)[0] == 0
    assert "random_seed" in _store(work / "out").attrs["record"]
    before = _store(work / "out").attrs["record"]["identity"]["weights_sha256"]
    net.fc.bias.data.add_(1.0)
    sl.nn.save(net, weights)
    code, _, err = run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--weights", weights,
                           "--resume")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"the weights file's content (sha256 {before[:12]} then, sha256 " in err and "now)" in err


def test_a_changed_model_file_is_refused_on_resume(work, capsys):
    model = f"{work / 'net.py'}:Net"
    assert run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--random-seed", "4")[0] == 0
    (work / "net.py").write_text(MODEL_FILE.replace("F.relu(", "F.leaky_relu("))
    code, _, err = run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--resume")
    assert code == 2 and "the model file's content (sha256 " in err


def test_evaluate_never_imports_a_model_file_the_store_names(work, capsys):
    model = f"{work / 'net.py'}:Net"
    assert run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", model, "--random-seed", "4")[0] == 0
    (work / "imported.txt").unlink()
    code, _, err = run_cli(capsys, "evaluate", work / "out", "--out", work / "report", "--steps", "2", "--sample", "0")
    assert code == 2 and not (work / "imported.txt").exists()
    assert err.strip() == (f"error: the maps of {_store(work / 'out').path} were made with the model file {model}; "
                           f"evaluating them runs that file, so name it yourself: --model {model}")
    # named, it runs, with the random seed the store recorded
    code, out, err = run_cli(capsys, "evaluate", work / "out", "--out", work / "report", "--steps", "2", "--sample",
                             "0", "--model", model)
    assert code == 0, err
    assert json.loads((work / "report" / "evaluation.json").read_text())


def test_evaluate_with_another_model_than_the_one_that_made_the_maps_is_one_line(work, capsys):
    assert run_cli(capsys, "batch", work / "in", "--out", work / "out")[0] == 0
    code, _, err = run_cli(capsys, "evaluate", work / "out", "--out", work / "report", "--model", "digits")
    assert code == 2 and "were made by another model than digits: the weights file's content" in err


def test_evaluate_checks_its_out_folder_and_steps_before_any_work(work, capsys, monkeypatch):
    assert run_cli(capsys, "batch", work / "in", "--out", work / "out")[0] == 0
    monkeypatch.setattr(attribution, "evaluate_store", lambda *a, **k: pytest.fail("evaluated"))
    (work / "file").write_text("")
    code, _, err = run_cli(capsys, "evaluate", work / "out", "--out", work / "file" / "report")
    assert code == 2 and "cannot write the report into --out" in err and "nothing was evaluated" in err
    code, _, err = run_cli(capsys, "evaluate", work / "out", "--out", work / "report", "--steps", "99999999999")
    assert code == 2 and "--steps 99999999999 is more than the 4096 pixels of the maps" in err


CHDIR_MODEL = MODEL_FILE.replace("    def forward(self, x):\n",
                                 "    def forward(self, x):\n        import os\n        os.chdir('/')\n")


def test_a_model_that_changes_the_working_folder_does_not_move_the_output(work, capsys, monkeypatch):
    (work / "chdir.py").write_text(CHDIR_MODEL)
    monkeypatch.chdir(work)
    code, out, err = run_cli(capsys, "map", "in/img0.png", "--model", "chdir.py:Net", "--random-seed", "1",
                             "--out", "map.png")
    os.chdir(work)
    assert code == 0, err
    assert (work / "map.png").is_file() and "wrote map.png" in out


@pytest.mark.parametrize("args, message", [
    (["--out", ""], "error: --out is empty; give a file name ending in .png"),
    (["--seed", "class:\u0663"], "error: cannot read seed 'class:\u0663'"),
])
def test_small_input_faults_are_one_line(work, capsys, args, message):
    code, _, err = run_cli(capsys, "map", work / "in" / "img0.png", *args)
    assert code == 2 and err.startswith(message), err


@pytest.mark.slow
def test_dask_workers_build_the_one_random_model_of_the_run(work, capsys, monkeypatch):
    pytest.importorskip("distributed")
    from saliency.attribution import distributed as runner

    monkeypatch.setattr(runner, "TASK_IMAGES", 1)  # a task per batch: two worker processes build the model
    code, _, err = run_cli(capsys, "batch", work / "in", "--out", work / "out", "--model", f"{work / 'net.py'}:Net",
                           "--batch-size", "1", "--workers", "2")
    assert code == 0, err
    maps = np.asarray(_store(work / "out").maps)
    np.testing.assert_array_equal(maps[0], maps[3])  # byte-identical images in different tasks


def test_a_worker_whose_model_differs_from_the_runs_is_refused(work):
    from saliency.attribution import distributed as runner

    source = zoo.ModelSource(f"{work / 'net.py'}:Net", random_seed=7)
    _, _, identity = source.load()
    pinned = source.pinned(identity)
    assert runner._model(pinned) is runner._model(pinned)  # built once per process
    other = zoo.ModelSource(f"{work / 'net.py'}:Net", random_seed=8).pinned(identity)
    with pytest.raises(zoo.ZooError, match="the model built on .* differs from the one the run was started with: "
                                           "the model's parameters"):
        runner._model(other)
