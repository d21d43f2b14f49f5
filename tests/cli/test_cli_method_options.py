"""Every method option on the command line, generated from the methods' records: the maps they
give are the library's with the same options, they are checked once with one-line errors, listed
per method in --help, recorded in a batch store and compared on --resume."""
import dataclasses
import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from _cli import run_cli

from saliency import attribution, models
from saliency.attribution import registry
from saliency.attribution import store as stores
from saliency.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def shapes():
    return models.load("shapes")


@pytest.fixture()
def folder(tmp_path):
    path = tmp_path / "in"
    path.mkdir()
    for i, chw in enumerate(models.data.shapes(3, seed=9)[0]):
        Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(path / f"img{i}.png")
    return path


def test_help_lists_every_methods_options_under_its_name():
    result = runner.invoke(app, ["map", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for m in registry.METHODS.values():
        for o in m.options:
            assert o.cli_flag in result.output
        if m.options:
            assert f"Options of {m.name}" in result.output or f"{m.name} and" in result.output \
                or f"and {m.name}" in result.output


@pytest.mark.parametrize("args, method, options", [
    (["--method", "smoothgrad", "--samples", "3", "--noise", "0.3"], "smoothgrad", {"n": 3, "noise": 0.3}),
    (["--method", "vargrad", "--samples", "2"], "vargrad", {"n": 2}),
    (["--method", "integrated_gradients", "--steps", "5", "--baseline", "blur:2"], "integrated_gradients",
     {"steps": 5, "baseline": attribution.baselines.Blur(2.0)}),
    (["--method", "occlusion", "--window", "16", "--stride", "16", "--baseline", "0.5"], "occlusion",
     {"window": 16, "stride": 16, "baseline": 0.5}),
    (["--method", "gradcam", "--layer", "features.block2.conv"], "gradcam", {"layer": "features.block2.conv"}),
])
def test_batch_maps_with_options_are_the_librarys(shapes, folder, tmp_path, capsys, args, method, options):
    code, _, err = run_cli(capsys, "batch", folder, "--out", tmp_path / "out", *args)
    assert code == 0, err
    store = attribution.open_store(stores.store_path(tmp_path / "out"))
    want = attribution.batch(shapes, sorted(folder.iterdir()), method, **options)
    np.testing.assert_array_equal(np.asarray(store.maps), want.maps)
    assert store.attrs["options"] == registry.get(method).record(options)


@pytest.mark.parametrize("args, message", [
    (["--window", "4"], "error: --window is an option of occlusion, not of gradient"),
    (["--method", "smoothgrad", "--samples", "x"], "error: --samples takes an int, got 'x'"),
    (["--method", "smoothgrad", "--variant", "max"], "error: --variant must be one of mean, squared, vargrad, got "
                                                     "'max'"),
    (["--method", "integrated_gradients", "--steps", "0"], "error: --steps must be a finite number >= 1, got 0"),
    (["--method", "integrated_gradients", "--baseline", "grey"], "error: --baseline takes a parse_baseline, got "
                                                                 "'grey' (a baseline is a number (0: black), blur or "
                                                                 "blur:SIGMA)"),
    (["--method", "gradcam", "--layer", "block9"], "error: the model has no layer 'block9'; its convolutions are: "
                                                   "features.block1.conv"),
    (["--method", "lime"], "error: unknown method 'lime'; choose one of: gradient"),
])
def test_a_bad_option_is_one_line_before_any_work(folder, tmp_path, capsys, args, message):
    code, _, err = run_cli(capsys, "map", folder / "img0.png", "--out", tmp_path / "m.png", *args)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "m.png").exists()


def test_map_with_an_option_draws_the_librarys_map(shapes, folder, tmp_path, capsys):
    from saliency.cli.mapping import compute

    code, out, err = run_cli(capsys, "map", folder / "img1.png", "--method", "smoothgrad", "--samples", "2",
                             "--out", tmp_path / "m.png")
    assert code == 0 and "method: smoothgrad" in out and (tmp_path / "m.png").is_file()
    x, attr, _ = compute(shapes, folder / "img1.png", "smoothgrad", None, {"n": 2})
    np.testing.assert_array_equal(attr.map, attribution.smoothgrad(shapes, x, n=2).map)


def test_resume_with_other_options_is_refused_and_evaluate_uses_the_recorded_ones(folder, tmp_path, capsys,
                                                                                  monkeypatch):
    out = tmp_path / "out"
    assert run_cli(capsys, "batch", folder, "--out", out, "--method", "integrated_gradients", "--steps", "3",
                   "--baseline", "blur")[0] == 0
    code, _, err = run_cli(capsys, "batch", folder, "--out", out, "--method", "integrated_gradients", "--steps", "4",
                           "--baseline", "blur", "--resume")
    assert code == 2 and err == (f"error: --resume: the store in {out} was made with other steps (3 then, 4 now); "
                                 f"give the same images and options, or run without --resume to start again\n")
    seen = []
    real = attribution.integrated_gradients

    def spy(model, x, seed=None, **options):
        seen.append(options)
        return real(model, x, seed, **options)

    monkeypatch.setitem(registry.METHODS, "integrated_gradients",
                        dataclasses.replace(registry.get("integrated_gradients"), function=spy))
    code, _, err = run_cli(capsys, "evaluate", out, "--out", tmp_path / "r", "--steps", "2", "--sample", "2")
    assert code == 0, err
    assert seen and all(o == {"steps": 3, "baseline": attribution.baselines.Blur()} for o in seen)
    assert json.loads((tmp_path / "r" / "evaluation.json").read_text())
