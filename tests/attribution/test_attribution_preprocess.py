"""A batch run's images read through a `viz.Preprocess` (`preprocess=`, or the model's own
`.preprocess`): each image is `preprocess(path)`, the store keeps the record, a resumed run and an
evaluation read the images the same way."""
import numpy as np
import pytest
from PIL import Image

import saliency as sl
from saliency import attribution, nn, viz
from saliency.attribution import InputError, StoreError


def _model():
    sl.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 3)).eval()


@pytest.fixture
def paths(tmp_path):
    rng = np.random.default_rng(0)
    out = []
    for i, (h, w) in enumerate([(30, 40), (50, 36), (33, 33)]):
        out.append(tmp_path / f"img{i}.png")
        Image.fromarray((rng.random((h, w, 3)) * 255).astype(np.uint8)).save(out[-1])
    return out


PREP = viz.Preprocess.imagenet(resize=24, crop=20)


def test_each_image_is_read_through_the_preprocess(paths, tmp_path):
    model = _model()
    store = attribution.batch(model, paths, out=tmp_path / "maps", preprocess=PREP, batch_size=2, use_zarr=False)
    assert store.attrs["preprocess"] == PREP.record() | {"mean": list(PREP.mean), "std": list(PREP.std)}
    x = np.stack([PREP(p) for p in paths])
    np.testing.assert_allclose(store.maps[:], attribution.gradient(model, x).map, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(store.attribution(1).input, PREP.picture(paths[1]), rtol=0, atol=1e-7)
    again = attribution.batch(model, paths, out=tmp_path / "maps", preprocess=PREP, batch_size=2, resume=True,
                              use_zarr=False)
    assert again.done.all()
    other = viz.Preprocess.imagenet(resize=24, crop=18)
    with pytest.raises(StoreError, match=r"crop \(20 then, 18 now\)"):
        attribution.batch(model, paths, out=tmp_path / "maps", preprocess=other, batch_size=2, resume=True,
                          use_zarr=False)
    report = attribution.evaluate_store(model, store, steps=2, sample=0)
    assert len(report.files) == 3


def test_the_model_s_own_preprocess_is_used_and_recorded(paths):
    model = _model()
    model.preprocess = PREP
    maps = attribution.batch(model, paths).maps
    np.testing.assert_allclose(maps, attribution.gradient(model, np.stack([PREP(p) for p in paths])).map,
                               rtol=1e-5, atol=1e-8)
    model.preprocess = "not a Preprocess"        # a model's attribute of another kind is not read
    assert attribution.batch(model, paths[:1]).maps.shape == (1, 3, 30, 40)


def test_images_of_several_shapes_without_a_crop_fail_one_by_one(paths):
    result = attribution.batch(_model(), paths, preprocess=viz.Preprocess(resize=16))
    assert result.errors[0] == "" and result.maps.shape == (3, 3, 16, 21)
    assert result.errors[1].startswith("its preprocessed size 16x22 is not the run's 21x16 (the first image's)")


def test_preprocess_is_for_image_files(paths):
    with pytest.raises(InputError, match="preprocess reads image files; an array of images is the model's input"):
        attribution.batch(_model(), np.zeros((2, 3, 8, 8), np.float32), preprocess=PREP)
    with pytest.raises(InputError, match="preprocess must be a saliency.viz.Preprocess or None, got str"):
        attribution.Run.build("gradient", preprocess="imagenet")
