"""`saliency evaluate --metrics`: the field's metrics of a store's maps in the report (table, figure
and every number per image), ground-truth masks from `saliency shapes`, and one line for what does
not fit."""
import json

import numpy as np
import pytest
from PIL import Image

from saliency import attribution, models
from saliency.attribution import metrics
from saliency.models import data

from _cli import run_cli


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(folder of `saliency shapes` with 6 images, the --out of `saliency batch` on them)."""
    root = tmp_path_factory.mktemp("metrics")
    from saliency.cli.main import main

    for args in (["shapes", str(root / "data"), "-n", "6", "--random-seed", "4"],
                 ["batch", str(root / "data" / "images"), "--out", str(root / "run"), "--batch-size", "4"]):
        with pytest.raises(SystemExit) as info:
            main(args)
            raise SystemExit(0)
        assert info.value.code == 0
    return root / "data", root / "run"


def test_shapes_writes_images_masks_and_labels_and_never_overwrites(made, capsys):
    folder, _ = made
    images, labels, info = data.shapes(6, seed=4, return_info=True)
    names = sorted(p.name for p in (folder / "images").iterdir())
    assert names == [f"shape_{i:05d}.png" for i in range(6)] == sorted(p.name for p in (folder / "masks").iterdir())
    with Image.open(folder / "masks" / "shape_00003.png") as mask:
        np.testing.assert_array_equal(np.asarray(mask) == 255, info["mask"][3] >= 0.5)
    with Image.open(folder / "images" / "shape_00003.png") as image:
        assert np.abs(np.asarray(image) / 255 - np.moveaxis(images[3], 0, -1)).max() <= 0.5 / 255 + 1e-6
    rows = (folder / "labels.csv").read_text().splitlines()
    assert rows[0] == "file,class,name" and rows[4] == f"shape_00003.png,{labels[3]},{data.SHAPE_CLASSES[labels[3]]}"
    before = (folder / "labels.csv").read_text()
    code, _, err = run_cli(capsys, "shapes", folder, "-n", "2")
    assert code == 2 and err.strip() == (f"error: {folder / 'images'} already exists; give a new or empty folder "
                                         f"(nothing is overwritten)")
    assert (folder / "labels.csv").read_text() == before


def test_evaluate_all_metrics_writes_each_ones_numbers(made, tmp_path, capsys):
    folder, run = made
    code, out, err = run_cli(capsys, "evaluate", run, "--out", tmp_path / "report", "--metrics", "all",
                             "--masks", folder / "masks", "--sample", "0", "--steps", "4",
                             "--metric-option", "road.fractions=0.25,0.5", "--metric-option",
                             "max_sensitivity.samples=2", "--metric-option", "infidelity.perturbation=square",
                             "--metric-seed", "3")
    assert code == 0, err
    header = out.splitlines()[0]
    for m in metrics.METRICS.values():
        for _, label, better in m.columns:
            assert f"{label} ({better} is better)" in header
    numbers = json.loads((tmp_path / "report" / "evaluation.json").read_text())[str(run)]
    assert numbers["options"]["road"] == {"fractions": "0.25,0.5", "noise": 0.01}
    assert numbers["options"]["infidelity"]["perturbation"] == "square"
    assert len(numbers["road_lerf_curve"]) == 6 and len(numbers["road_lerf_curve_points"]) == 2
    net = models.load("shapes")
    want = attribution.evaluate_store(net, attribution.open_store(run / "maps.zarr"), metrics="all", sample=0,
                                      steps=4, masks=folder / "masks", random_seed=3,
                                      metric_options={"road": {"fractions": (0.25, 0.5)},
                                                      "max_sensitivity": {"samples": 2},
                                                      "infidelity": {"perturbation": "square"}})
    for field in ("road_morf", "max_sensitivity", "infidelity", "pointing_game", "relevance_mass", "random_logit",
                  "sparseness", "deletion_auc"):
        np.testing.assert_allclose(numbers[field], want.values[field], rtol=1e-12, err_msg=field)
    report = (tmp_path / "report" / "evaluation.md").read_text()
    assert "- **road** (fractions 0.25,0.5, noise 0.01): ROAD (Rong et al. 2022)" in report
    with Image.open(tmp_path / "report" / "evaluation.png") as figure:
        assert figure.size[0] > 1000 and figure.size[1] > 600    # 4 curve panels and 8 number panels


@pytest.mark.parametrize("args, says", [
    (["--metrics", "road,faithfulness"], "error: --metrics takes names from: deletion_insertion, randomisation, road"),
    (["--metrics", "pointing_game"], "error: pointing_game needs ground-truth masks: a folder of mask images named "
                                     "after the images (--masks FOLDER)"),
    (["--masks", "/nonexistent/masks"], "error: --masks /nonexistent/masks is not a folder"),
    (["--metric-option", "road.steps=3"], "error: the metric road has no option 'steps' (its options: fractions, "
                                          "noise)"),
    (["--metric-option", "radius=3"], "error: --metric-option takes METRIC.OPTION=VALUE with METRIC one of "),
    (["--metric-option", "max_sensitivity.radius=-1"], "error: --radius must be a finite number >= 0, got -1.0"),
    (["--metrics", "road", "--metric-option", "infidelity.samples=2"],
     "error: options given for the metric infidelity, which is not evaluated (metrics: road)"),
])
def test_evaluate_says_in_one_line_what_does_not_fit(made, tmp_path, capsys, args, says):
    _, run = made
    code, _, err = run_cli(capsys, "evaluate", run, "--out", tmp_path / "r", *args)
    assert code == 2 and err.startswith(says) and err.count("\n") == 1, err
    assert not (tmp_path / "r" / "evaluation.md").exists()


def test_masks_follow_the_stores_preprocessing(tmp_path):
    """A mask drawn at the photo's size goes through the resize and crop that made the model's input."""
    from saliency import viz
    from saliency.attribution.masks import Masks

    photo = np.zeros((40, 60), np.uint8)
    photo[10:30, 35:55] = 255                                    # the object, right of centre
    Image.fromarray(photo).save(tmp_path / "cat.png")
    prep = viz.Preprocess(resize=20, crop=16, mean=(0.5,) * 3, std=(0.2,) * 3)
    got = Masks(tmp_path, ["photos/cat.jpg"], (16, 16), prep).read([0])[0]
    want = viz.Preprocess(resize=20, crop=16, interpolation="nearest").picture(tmp_path / "cat.png")[0] >= 0.5
    np.testing.assert_array_equal(got, want)
    assert got[:, 12:].any() and not got[:, :4].any()
