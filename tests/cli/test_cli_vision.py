"""The command line with torchvision's architectures and their own `.pth` files (torchvision's random
initialisation saved by torch under torchvision's real file name), and a model file of one's own
with preprocessing options."""
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from _cli import run_cli
from PIL import Image

import saliency as sl
from saliency import attribution, models, nn, viz
from saliency.attribution import store as stores
from saliency.models.vision import ARCHITECTURES
from saliency.models.vision import weights as published

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models" / "vision"))
from _torchvision import torchvision  # noqa: E402

SMALL = next((n for n in ("mobilenet_v3_small", "resnet18") if n in ARCHITECTURES), None)
SEGMENTER = next((n for n in ("lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50")
                  if n in ARCHITECTURES), None)


def _file_of(name):
    """torchvision's file name of `name`'s DEFAULT weights."""
    return published.preferred(name)[0].file


def _saved(name, folder, **kwargs):
    """(torchvision's `name`, randomly initialised, eval mode; its state dict saved by torch in `folder`
    under torchvision's file name)."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tv = torchvision()
    torch.manual_seed(0)
    net = tv.models.get_model(name, weights=None, **kwargs).eval()
    path = folder / _file_of(name)
    torch.save(net.state_dict(), path)
    return net, path


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    if SMALL is None:
        pytest.skip("neither mobilenet_v3_small nor resnet18 is registered yet")
    return _saved(SMALL, tmp_path_factory.mktemp("weights"))


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    """A 150x200 'photo': smooth colour gradients with a bright disc."""
    rows, cols = np.mgrid[0:150, 0:200] / 150.0
    disc = ((rows - 0.5) ** 2 + (cols - 0.7) ** 2 < 0.08)
    rgb = np.stack([rows, cols / 1.4, 0.5 + 0.5 * disc], -1)
    path = tmp_path_factory.mktemp("images") / "photo.jpg"
    Image.fromarray((np.clip(rgb, 0, 1) * 255).astype(np.uint8)).save(path, quality=95)
    return path


def _top3(net, x):
    """The names of torch model `net`'s three most probable ImageNet classes for the input x (C, H, W)."""
    import torch

    with torch.no_grad():
        logits = net(torch.tensor(x[None]))[0].numpy()
    names = published.categories("imagenet")
    return [names[k] for k in np.argsort(-logits)[:3]]


def test_map_with_torchvision_s_file_prints_the_top_three_imagenet_classes(small, photo, tmp_path, capsys):
    theirs, path = small
    code, out, err = run_cli(capsys, "map", photo, "--model", SMALL, "--weights", path, "--out", tmp_path / "m.png")
    assert code == 0, err
    lines = out.splitlines()
    prep = published.table()[path.name].preprocess()
    height, width = prep.output_size(150, 200)
    assert lines[0] == f"resized 200x150 -> {width}x{height} (bilinear); centre crop 224x224"
    prediction = next(line for line in lines if line.startswith("prediction: "))
    x = prep(photo)
    names = [re.sub(r" [0-9.]+%$", "", part) for part in prediction[len("prediction: "):].split(", ")]
    assert names == _top3(theirs, x)
    assert (tmp_path / "m.png").stat().st_size > 0 and lines[-1] == "wrote " + str(tmp_path / "m.png")


def test_map_finds_torchvision_s_file_in_the_hub_cache(small, photo, tmp_path, capsys, monkeypatch):
    theirs, path = small
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    code, _, err = run_cli(capsys, "map", photo, "--model", SMALL, "--out", tmp_path / "none.png")
    assert code == 2 and err.startswith(f"error: no weights given for {SMALL}, and none of torchvision's files for "
                                        f"it ({_file_of(SMALL)}")
    hub = tmp_path / "torch" / "hub" / "checkpoints"
    hub.mkdir(parents=True)
    (hub / path.name).symlink_to(path)
    code, out, err = run_cli(capsys, "map", photo, "--model", SMALL, "--out", tmp_path / "m.png")
    assert code == 0, err
    title = published.table()[path.name].title
    assert out.splitlines()[0] == f"note: weights {hub / path.name} ({title}), found in PyTorch's hub cache"
    code, listing, _ = run_cli(capsys, "models")
    row = next(line for line in listing.splitlines() if line.startswith(SMALL + " "))
    assert row.split()[1:3] == ["classification", path.name]


MODEL_FILE = '''import saliency as torch
import saliency.nn as nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(self.pool(torch.relu(self.conv(x))).flatten(1))
'''
_DEFINED = {}
exec(MODEL_FILE, _DEFINED)  # the class the model file defines, to compute here what the command should give
TinyNet = _DEFINED["TinyNet"]


@pytest.fixture
def own_model(tmp_path):
    """(the model, its model file's --model spec, its .npz weights, a labels file of 3 names)."""
    (tmp_path / "tiny.py").write_text(MODEL_FILE)
    sl.manual_seed(3)
    model = TinyNet().eval()
    nn.save(model.state_dict(), tmp_path / "tiny.npz")
    (tmp_path / "labels.txt").write_text("cat\ndog\n\nbird\n")
    return model, f"{tmp_path / 'tiny.py'}:TinyNet", tmp_path / "tiny.npz", tmp_path / "labels.txt"


OPTIONS = ("--resize", "40", "--crop", "32", "--normalize", "imagenet")


def test_a_model_file_s_preprocessing_options(own_model, photo, tmp_path, capsys):
    model, spec, weights, labels = own_model
    prep = viz.Preprocess.imagenet(resize=40, crop=32)
    x = prep(photo)
    output = model(sl.tensor(x[None])).numpy()[0]
    expected = [["cat", "dog", "bird"][k] for k in np.argsort(-output)]
    code, out, err = run_cli(capsys, "map", photo, "--model", spec, "--weights", weights, *OPTIONS,
                             "--classes", labels, "--out", tmp_path / "m.png")
    assert code == 0, err
    assert "resized 200x150 -> 53x40 (bilinear); centre crop 32x32" in out.splitlines()
    prediction = next(line for line in out.splitlines() if line.startswith("prediction: "))
    assert [re.sub(r" [0-9.]+%$", "", p) for p in prediction[len("prediction: "):].split(", ")] == expected

    folder = tmp_path / "images"
    folder.mkdir()
    (folder / "photo.jpg").write_bytes(photo.read_bytes())
    code, _, err = run_cli(capsys, "batch", folder, "--out", tmp_path / "maps", "--model", spec, "--weights", weights,
                           *OPTIONS, "--classes", labels)
    assert code == 0, err
    store = attribution.open_store(stores.store_path(tmp_path / "maps"))
    assert store.attrs["preprocess"] == prep.record() | {"mean": list(prep.mean), "std": list(prep.std)}
    np.testing.assert_allclose(store.maps[0], attribution.gradient(model, x).map, rtol=1e-5, atol=1e-7)
    assert store.attrs["seed"] == "default"

    code, _, err = run_cli(capsys, "batch", folder, "--out", tmp_path / "maps", "--model", spec, "--weights", weights,
                           "--resize", "40", "--crop", "30", "--normalize", "imagenet", "--resume")
    assert code == 2 and "crop (32 then, 30 now)" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "evaluate", tmp_path / "maps", "--out", tmp_path / "report", "--model", spec,
                           "--weights", weights, "--crop", "30", "--sample", "0", "--steps", "2")
    assert code == 2 and "were read with resize 40 (shorter side, bilinear), centre crop 32x32" in err


def test_a_model_file_without_options_reads_the_image_as_before(own_model, photo, tmp_path, capsys):
    model, spec, weights, _ = own_model
    folder = tmp_path / "images"
    folder.mkdir()
    (folder / "photo.jpg").write_bytes(photo.read_bytes())
    code, _, err = run_cli(capsys, "batch", folder, "--out", tmp_path / "maps", "--model", spec, "--weights", weights)
    assert code == 0, err
    store = attribution.open_store(stores.store_path(tmp_path / "maps"))
    assert store.attrs["preprocess"] is None
    x = viz.load_image(photo)[0]
    np.testing.assert_allclose(store.maps[0], attribution.gradient(model, x).map, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("args, message", [
    (("--resize", "0"), "--resize must be N or H,W with positive integers, got '0'"),
    (("--crop", "a,b"), "--crop must be N or H,W with positive integers, got 'a,b'"),
    (("--size", "3"), "--size must be H,W with positive integers, got '3'"),
    (("--size", "4,4", "--crop", "3"), "--size stretches the image to the model's input; give --size, or --resize"),
    (("--mean", "1,2"), "--mean must be R,G,B (three numbers) or one number, got '1,2'"),
    (("--std", "0,1,1"), "--std must be positive (it divides), got '0,1,1'"),
    (("--normalize", "coco"), "--normalize must be imagenet or none, got 'coco'"),
    (("--normalize", "imagenet", "--std", "1"), "--normalize sets the mean and std; give --normalize, or --mean"),
    (("--classes", "missing.txt"), "--classes file missing.txt does not exist"),
])
@pytest.mark.parametrize("command", ["map", "receptive-field", "look-distance"])
def test_bad_preprocessing_options_are_one_line_and_exit_2(photo, tmp_path, capsys, monkeypatch, command, args,
                                                           message):
    monkeypatch.chdir(tmp_path)
    extra = ("--pixel", "1,1") if command == "receptive-field" else ()
    code, _, err = run_cli(capsys, command, photo, *extra, *args)
    assert code == 2 and err.startswith(f"error: {message}") and err.count("\n") == 1


def test_class_names_that_do_not_fit_the_model_are_one_line(own_model, photo, tmp_path, capsys):
    _, spec, weights, _ = own_model
    (tmp_path / "two.txt").write_text("cat\ndog\n")
    code, _, err = run_cli(capsys, "map", photo, "--model", spec, "--weights", weights, "--classes",
                           tmp_path / "two.txt", "--out", tmp_path / "m.png")
    assert (code, err) == (2, "error: 2 class names for a model of 3 output classes; give one name a line for each\n")


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory):
    if SEGMENTER is None:
        pytest.skip("no segmentation architecture is registered yet")
    return _saved(SEGMENTER, tmp_path_factory.mktemp("weights"), weights_backbone=None,
                  **published.preferred(SEGMENTER)[0].build)


def test_a_segment_seed_is_the_gradient_of_the_class_k_logits_of_the_pixels_predicted_k(
        segmenter, photo, tmp_path, capsys):
    import torch

    theirs, path = segmenter
    ours = models.load(SEGMENTER, weights=path)
    x = viz.Preprocess(resize=48, mean=ours.preprocess.mean, std=ours.preprocess.std)(photo)
    y = ours(sl.tensor(x[None])).numpy()
    predicted = y.argmax(axis=1)
    k = int(np.bincount(predicted.ravel()).argmax())
    folder = tmp_path / "images"
    folder.mkdir()
    (folder / "photo.jpg").write_bytes(photo.read_bytes())
    code, _, err = run_cli(capsys, "batch", folder, "--out", tmp_path / "maps", "--model", SEGMENTER, "--weights",
                           path, "--resize", "48", "--seed", f"segment:{k}")
    assert code == 0, err
    store = attribution.open_store(stores.store_path(tmp_path / "maps"))
    assert store.attrs["seed"].startswith(f"class {k} ({published.categories('voc')[k]}) where predicted")
    xt = torch.tensor(x[None], requires_grad=True)
    out = theirs(xt)["out"]
    assert (out.argmax(1).numpy() == predicted).mean() > 0.99
    (out[:, k] * torch.tensor(predicted == k)).sum().backward()
    want = xt.grad.numpy()[0]
    np.testing.assert_allclose(store.maps[0], want, rtol=1e-3, atol=1e-4 * np.abs(want).max())

    code, out, err = run_cli(capsys, "map", photo, "--model", SEGMENTER, "--weights", path, "--resize", "48",
                             "--seed", f"segment:{k}", "--out", tmp_path / "seg.png")
    assert code == 0, err
    assert "prediction: a 48x64 map of 21 classes, most pixels: " in out
    assert f"seed: class {k} ({published.categories('voc')[k]}) where predicted" in out
