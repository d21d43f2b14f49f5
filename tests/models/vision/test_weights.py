"""torchvision's weight sets as data (models/vision/weights.json and the category lists), the
preprocessing a weights file gets by its name, the hub-cache look-up, and `models.load(NAME)` of
an architecture with torchvision's own file."""
import re
import warnings

import numpy as np
import pytest
from _torchvision import torchvision

from saliency import models, viz
from saliency.models import zoo
from saliency.models.vision import ARCHITECTURES
from saliency.models.vision import weights as published


def test_known_file_names_get_their_weight_set_s_preprocessing():
    v1 = published.choose("resnet50", "/x/resnet50-0676ba61.pth")
    v2 = published.choose("resnet50", "resnet50-11ad3fa6.pth")
    assert (v1.weight_set.title, v1.preprocess, v1.note) == (
        "ResNet50_Weights.IMAGENET1K_V1", viz.Preprocess.imagenet(256, 224), None)
    assert (v2.weight_set.title, v2.preprocess) == ("ResNet50_Weights.IMAGENET1K_V2", viz.Preprocess.imagenet(232, 224))
    assert v2.weight_set.default and not v1.weight_set.default
    assert v2.weight_set.metrics == {"dataset": "ImageNet-1K", "acc@1": 80.858, "acc@5": 95.434}
    assert len(v1.classes) == 1000 and v1.classes[:2] == ["tench", "goldfish"]
    swag = published.choose("vit_b_16", "vit_b_16_swag-9ac1b537.pth")
    assert swag.preprocess == viz.Preprocess.imagenet(384, 384, "bicubic") and swag.build == {"image_size": 384}
    seg = published.choose("deeplabv3_resnet50", "deeplabv3_resnet50_coco-cd0a2569.pth")
    assert (seg.preprocess.resize, seg.preprocess.crop, seg.preprocess.input_shape) == (520, None, None)
    assert seg.classes[:3] == ["__background__", "aeroplane", "bicycle"] and seg.build == {"aux_loss": True}
    assert published.choose("googlenet", "googlenet-1378be20.pth").build == {
        "transform_input": True, "aux_logits": True, "init_weights": False}


def test_an_unknown_file_name_gets_the_family_s_default_with_a_note():
    mine = published.choose("resnet50", "/x/my-finetuned.pth")
    assert mine.weight_set is None and mine.preprocess == viz.Preprocess.imagenet(256, 224)
    assert mine.note == ("my-finetuned.pth is not a file torchvision publishes for resnet50 (resnet50-0676ba61.pth, "
                         "resnet50-11ad3fa6.pth), so it is preprocessed as ResNet50_Weights.IMAGENET1K_V1's "
                         "(ImageNet-1k classes): resize 256 (shorter side, bilinear), centre crop 224x224, ImageNet "
                         "mean and std")
    assert len(mine.classes) == 1000 and published.choose("resnet50", "m.pth", num_classes=10).classes == []
    seg = published.choose("fcn_resnet50", "mine.pth")
    assert seg.preprocess.resize == 520 and seg.preprocess.crop is None and len(seg.classes) == 21
    other = published.choose("no_such_net", "mine.pth")   # no published set: ImageNet's usual
    assert other.preprocess == viz.Preprocess.imagenet(256, 224) and "ImageNet's usual" in other.note


def test_another_architecture_s_file_is_named():
    with pytest.raises(LookupError, match=re.escape("resnet50-0676ba61.pth is torchvision's "
                                                    "ResNet50_Weights.IMAGENET1K_V1 for resnet50, not for resnet18; "
                                                    "load it with resnet50")):
        published.choose("resnet18", "resnet50-0676ba61.pth")


def test_category_lists_have_their_lengths():
    assert len(published.categories("imagenet")) == 1000
    assert len(published.categories("voc")) == 21
    assert len(set(published.categories("voc"))) == 21
    for w in published.table().values():
        assert w.categories in ("imagenet", "voc", None), w.file
        assert w.task == ("segmentation" if w.categories == "voc" else "classification"), w.file
        assert len(w.classes()) == {"imagenet": 1000, "voc": 21, None: 0}[w.categories]


def test_every_weight_set_is_torchvision_s():
    """The table against torchvision's enums: file, transforms, categories, metrics (no model is built)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tv = torchvision()
    from torchvision.models import get_model_weights

    table = published.table()
    seen = set()
    for name in {w.architecture for w in table.values()}:
        for e in get_model_weights(name):
            w = table[e.url.rsplit("/", 1)[1]]
            seen.add(w.file)
            t = e.transforms()
            default = get_model_weights(name).DEFAULT is e
            assert (w.architecture, w.enum, w.name, w.default) == (name, type(e).__name__, e.name, default)
            assert w.resize == t.resize_size[0] and w.crop == (t.crop_size[0] if hasattr(t, "crop_size") else None)
            assert (w.mean, w.std) == (tuple(t.mean), tuple(t.std)) and w.interpolation == t.interpolation.value
            assert w.classes() == list(e.meta["categories"] or [])
    assert seen == set(table)
    assert tv.__version__.startswith("0.")


def test_the_table_s_architectures_are_registered():
    named = {w.architecture: w.task for w in published.table().values()}
    missing = sorted(set(named) - set(ARCHITECTURES))
    assert not missing, f"weights.json has weight sets of architectures no family registers: {', '.join(missing)}"
    for name in named:
        assert ARCHITECTURES[name].task == named[name], name


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty hub cache in TORCH_HOME=tmp_path/torch: (its checkpoints folder)."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    folder = tmp_path / "torch" / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    return folder


def test_the_hub_cache_is_where_torch_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert published.hub_checkpoints() == tmp_path / "th" / "hub" / "checkpoints"
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert published.hub_checkpoints() == tmp_path / "xdg" / "torch" / "hub" / "checkpoints"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert published.hub_checkpoints() == tmp_path / "home" / ".cache" / "torch" / "hub" / "checkpoints"


def test_the_first_known_file_in_the_hub_cache_is_found(hub):
    assert published.find_in_hub("resnet50") is None
    (hub / "resnet50-0676ba61.pth").write_bytes(b"")
    (hub / "resnet18-f37072fd.pth").write_bytes(b"")
    assert published.find_in_hub("resnet50") == hub / "resnet50-0676ba61.pth"
    (hub / "resnet50-11ad3fa6.pth").write_bytes(b"")     # torchvision's DEFAULT comes first
    assert published.find_in_hub("resnet50") == hub / "resnet50-11ad3fa6.pth"
    assert published.in_hub("resnet50") == ["resnet50-11ad3fa6.pth", "resnet50-0676ba61.pth"]
    (hub / "resnet50-11ad3fa6.pth").unlink()
    (hub / "resnet50-11ad3fa6.pth").mkdir()                # not a file
    assert published.find_in_hub("resnet50") == hub / "resnet50-0676ba61.pth"


@pytest.mark.skipif("resnet50" not in ARCHITECTURES, reason="resnet50 is not registered yet")
def test_no_file_in_the_hub_cache_is_one_line_naming_the_files(hub):
    message = (f"no weights given for resnet50, and none of torchvision's files for it (resnet50-11ad3fa6.pth or "
               f"resnet50-0676ba61.pth) is in PyTorch's hub cache {hub}; give one with --weights FILE, or put one "
               f"there (e.g. https://download.pytorch.org/models/resnet50-11ad3fa6.pth); nothing is downloaded")
    with pytest.raises(zoo.ZooError, match="^" + re.escape(message) + "$"):
        models.load("resnet50")
    with pytest.raises(zoo.ZooError, match=re.escape("none of torchvision's files")):
        zoo.ModelSource("resnet50").load()


SMALL = next((n for n in ("mobilenet_v3_small", "resnet18", "squeezenet1_1") if n in ARCHITECTURES), None)
FILES = {"mobilenet_v3_small": "mobilenet_v3_small-047dcff4.pth", "resnet18": "resnet18-f37072fd.pth",
         "squeezenet1_1": "squeezenet1_1-b8a52dc0.pth"}


@pytest.fixture(scope="module")
def torchvision_file(tmp_path_factory):
    """(torchvision's SMALL, randomly initialised, in eval mode; its state dict saved by torch under
    torchvision's own file name)."""
    if SMALL is None:
        pytest.skip("none of mobilenet_v3_small, resnet18, squeezenet1_1 is registered yet")
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tv = torchvision()
    torch.manual_seed(0)
    net = tv.models.get_model(SMALL, weights=None).eval()
    path = tmp_path_factory.mktemp("weights") / FILES[SMALL]
    torch.save(net.state_dict(), path)
    return net, path


def test_load_with_torchvision_s_file_brings_its_preprocessing_and_categories(torchvision_file, hub):
    import shutil

    theirs, path = torchvision_file
    model = models.load(SMALL, weights=path)
    w = published.table()[path.name]
    assert (model.name, model.task, model.input_shape, model.weights_name) == (
        SMALL, "classification", (3, 224, 224), w.title)
    assert model.preprocess == w.preprocess() and len(model.classes) == 1000 and model.notes == []
    assert model.metrics == w.metrics and not model.training
    shutil.copy(path, hub / path.name)                   # the same file, found in the hub cache
    found = models.load(SMALL)
    assert found.weights_file == str(hub / path.name) and found.weights_name == w.title
    renamed = hub.parent / "mine.pth"
    shutil.copy(path, renamed)
    assert models.load(SMALL, weights=renamed).notes[0].startswith("mine.pth is not a file torchvision publishes")


def test_the_output_is_torchvision_s_on_its_own_transforms(torchvision_file, tmp_path):
    """The whole way: an image file through `model.preprocess` and the model, against torchvision's
    model on `weights.transforms()` of the Pillow image."""
    import torch
    from PIL import Image

    theirs, path = torchvision_file
    rng = np.random.default_rng(0)
    Image.fromarray((rng.random((120, 90, 3)) * 255).astype(np.uint8)).save(tmp_path / "photo.png")
    ours = models.load(SMALL, weights=path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchvision.models import get_model_weights

        weights = next(e for e in get_model_weights(SMALL) if e.url.endswith(path.name))
        with Image.open(tmp_path / "photo.png") as img:
            x = weights.transforms()(img.convert("RGB"))
    np.testing.assert_allclose(ours.preprocess(tmp_path / "photo.png"), x.numpy(), rtol=0, atol=1e-5)
    with torch.no_grad():
        want = theirs(x[None]).numpy()
    import saliency as sl

    got = ours(sl.tensor(ours.preprocess(tmp_path / "photo.png")[None])).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["googlenet", "inception_v3", "deeplabv3_mobilenet_v3_large"])
def test_the_builder_arguments_of_a_weight_set_give_torchvision_s_keys(name):
    """`build` of the table (what torchvision's builder sets for those weights: GoogLeNet's
    auxiliary classifiers, a segmenter's aux_loss) makes the state dict torchvision's files hold."""
    if name not in ARCHITECTURES:
        pytest.skip(f"{name} is not registered yet")
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tv = torchvision()
    w = published.preferred(name)[0]
    extra = {"weights_backbone": None} if w.task == "segmentation" else {}
    with torch.device("meta"):
        theirs = tv.models.get_model(name, weights=None, **w.build, **extra)
    ours = ARCHITECTURES[name].build(**w.build)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()}


@pytest.mark.skipif("googlenet" not in ARCHITECTURES, reason="googlenet is not registered yet")
def test_googlenet_s_file_loads_as_torchvision_s_builder_loads_it(tmp_path):
    """torchvision builds GoogLeNet with transform_input and its auxiliary classifiers to load its
    file, then drops the classifiers: so does models.load, and the outputs agree."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tv = torchvision()
    torch.manual_seed(0)
    theirs = tv.models.googlenet(weights=None, **published.preferred("googlenet")[0].build).eval()
    torch.save(theirs.state_dict(), tmp_path / "googlenet-1378be20.pth")
    theirs.aux_logits, theirs.aux1, theirs.aux2 = False, None, None
    ours = models.load("googlenet", weights=tmp_path / "googlenet-1378be20.pth")
    assert ours.aux1 is None and ours.aux2 is None and ours.transform_input
    assert "aux1" not in " ".join(name for name, _ in ours.named_modules() if name)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with torch.no_grad():
        want = theirs(torch.tensor(x)).numpy()
    import saliency as sl

    np.testing.assert_allclose(ours(sl.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4)
