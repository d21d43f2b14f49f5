"""The shipped models: loading, attributes, quality reproduced on fresh held-out data, training.

Held-out sets here are drawn with seeds that neither training nor the recorded measurement used,
so a model that only memorised its evaluation set would fail.
"""
import importlib.util
import io

import numpy as np
import pytest
from typer.testing import CliRunner

import saliency as sl
from saliency.cli.main import app
from saliency.models import data, train, zoo
from saliency.models.architectures import n_parameters

HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None
FRESH_SEED = 424242


def test_every_model_is_shipped_small_and_loads_in_eval_mode():
    assert zoo.available() == ["shapes", "digits", "depth"]
    for name in zoo.available():
        model = zoo.load(name)
        assert not model.training and all(not m.training for m in model.modules())
        assert model.task in ("classification", "depth") and model.input_shape == zoo.SPECS[name].input_shape
        assert n_parameters(model) < 1_000_000
        assert (zoo.WEIGHTS_DIR / f"{name}.npz").stat().st_size < 2 * 1024 ** 2
        assert model.metrics == zoo.card(name)["metrics"]
    assert zoo.load("shapes").classes == list(data.SHAPE_CLASSES)
    assert zoo.load("digits").classes == [str(d) for d in range(10)]


def test_layers_are_named_for_grad_cam():
    model = zoo.load("shapes")
    names = dict(model.named_modules())
    assert names["features.block3.conv"] is model.features.block3.conv
    assert "features.block1.conv.weight" in model.state_dict()
    depth = zoo.load("depth")
    assert {"enc1", "enc5", "dec1", "head"} <= set(dict(depth.named_children()))


def test_shapes_accuracy_reproduces_on_fresh_images():
    recorded = zoo.card("shapes")["metrics"]["accuracy"]
    got = train.evaluate(zoo.load("shapes"), "shapes", n=600, seed=FRESH_SEED)["accuracy"]
    assert recorded >= 0.97
    assert got >= recorded - 0.015          # 600 images: one standard error is about 0.3%


@pytest.mark.skipif(not HAS_SKLEARN, reason="scikit-learn (the 'train' extra) holds the digits")
def test_digits_accuracy_reproduces_on_the_test_split():
    recorded = zoo.card("digits")["metrics"]["accuracy"]
    got = train.evaluate(zoo.load("digits"), "digits")["accuracy"]
    assert recorded >= 0.97
    assert abs(got - recorded) <= 1 / 359 + 1e-12   # the same 359 images: at most one flips on rounding


@pytest.mark.slow
def test_depth_quality_reproduces_on_fresh_scenes():
    recorded = zoo.card("depth")["metrics"]
    assert recorded["abs_rel"] <= 0.10 and recorded["delta1"] >= 0.90
    assert recorded["abs_rel"] <= recorded["baseline_abs_rel"] / 2
    got = train.evaluate(zoo.load("depth"), "depth", n=24, seed=FRESH_SEED)
    assert got["abs_rel"] <= recorded["abs_rel"] + 0.02
    assert got["delta1"] >= recorded["delta1"] - 0.03
    assert got["abs_rel"] <= got["baseline_abs_rel"] / 2


def test_depth_output_is_metres_and_positive():
    images, depths, _ = data.scenes(2, seed=FRESH_SEED + 1)
    with sl.no_grad():
        pred = zoo.load("depth")(sl.tensor(images)).numpy()
    assert pred.shape == depths.shape and (pred > 0).all() and np.isfinite(pred).all()
    assert 0.5 < np.median(pred / depths) < 2


@pytest.mark.parametrize("name", ["shapes", "depth"] + (["digits"] if HAS_SKLEARN else []))
def test_a_few_adam_steps_lower_the_loss(name):
    images, targets = train.held_out(name, n=8, seed=FRESH_SEED + 2)
    sl.manual_seed(0)
    model = zoo.build(name).train()
    opt = sl.optim.Adam(model.parameters(), lr=3e-3)
    x = sl.tensor(images[:8])
    losses = []
    for _ in range(6):
        loss = train._loss(model, model.task, x, targets[:8])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


@pytest.mark.slow
def test_training_is_deterministic_per_seed():
    def weights(seed):
        model, _ = train.train("shapes", epochs=1, per_epoch=48, seed=seed, stream=io.StringIO())
        return model.state_dict()

    a, b, c = weights(3), weights(3), weights(4)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["fc.weight"], c["fc.weight"])


def test_loading_mismatched_weights_names_the_arrays(tmp_path):
    state = {k: np.asarray(v) for k, v in zoo.load("digits").state_dict().items()}
    del state["fc.bias"]
    state["extra.weight"] = np.zeros(3, np.float32)
    state["features.block1.conv.weight"] = np.zeros((2, 1, 3, 3), np.float32)
    path = tmp_path / "bad.npz"
    sl.nn.save(state, path)
    with pytest.raises(zoo.ZooError) as info:
        zoo.load("digits", weights=path)
    msg = str(info.value)
    assert "fc.bias" in msg and "extra.weight" in msg and "features.block1.conv.weight" in msg
    assert "\n" not in msg


def test_weights_of_another_model_are_one_short_line_saying_what_the_file_is(tmp_path):
    other = {f"layers.{i}.weight": np.zeros((4, 4), np.float32) for i in range(40)}
    sl.nn.save(other, tmp_path / "other.npz")
    with pytest.raises(zoo.ZooError) as info:
        zoo.load("shapes", weights=tmp_path / "other.npz")
    msg = str(info.value)
    assert msg == (f"{tmp_path / 'other.npz'} (an .npz archive) does not fit the 'shapes' model: 26 of the model's "
                   "26 keys are missing (features.block1.conv.weight, features.block1.bn.weight, "
                   "features.block1.bn.bias and 23 more); 40 of the file's 40 keys are not the model's "
                   "(layers.0.weight, layers.1.weight, layers.2.weight and 37 more)")
    state = {k: np.asarray(v) for k, v in zoo.load("shapes").state_dict().items()}
    state["fc.weight"] = np.zeros((3, 3), np.float32)
    sl.nn.save_safetensors(state, tmp_path / "resized.safetensors")
    with pytest.raises(zoo.ZooError, match=r"\(a safetensors file\) does not fit the 'shapes' model: 1 key has "
                                           r"another shape \(fc.weight \(3, 3\) for \(8, 96\)\)$"):
        zoo.load("shapes", weights=tmp_path / "resized.safetensors")


def _npz_bomb(path, n_bytes):
    """An .npz whose one member declares n_bytes of zeros: deflate shrinks them about 1000 times."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("big.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                                     "shape": (n_bytes // 4,)})
            chunk = bytes(1 << 20)
            for _ in range(n_bytes >> 20):
                f.write(chunk)
    return path


def test_npz_names_and_shapes_are_checked_before_any_array_is_expanded(tmp_path):
    import tracemalloc

    path = _npz_bomb(tmp_path / "bomb.npz", 256 << 20)
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(zoo.ZooError, match=r"\(an \.npz archive\) does not fit the 'shapes' model: .*"
                                               r"1 of the file's 1 keys is not the model's \(big\)$"):
            zoo.load("shapes", weights=path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


@pytest.mark.parametrize("kind, message", [
    ("int", r"has dtype int64 but the model's features.block1.conv.weight is float32; integer weights are refused"),
    ("complex", r"has dtype complex64; expected a numeric array"),
    ("nan", r"the weights in .*w.npz hold NaN or infinite values in 1 tensor \(fc.bias\); a map needs finite "
            r"weights$"),
])
def test_integer_complex_and_nan_weights_are_zoo_errors(tmp_path, kind, message):
    state = {k: np.asarray(v) for k, v in zoo.load("shapes").state_dict().items()}
    if kind == "nan":
        state["fc.bias"] = state["fc.bias"].copy()
        state["fc.bias"][1] = np.nan
    else:
        key = "features.block1.conv.weight"
        state[key] = state[key].astype(np.int64 if kind == "int" else np.complex64)
    sl.nn.save(state, tmp_path / "w.npz")
    with pytest.raises(zoo.ZooError, match=message):
        zoo.load("shapes", weights=tmp_path / "w.npz")


def test_a_model_file_that_calls_sys_exit_is_a_zoo_error(tmp_path):
    (tmp_path / "at_import.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "in_build.py").write_text("import sys\ndef build():\n    sys.exit('no GPU')\n")
    with pytest.raises(zoo.ZooError, match=r"importing .*at_import.py failed: it called sys.exit\(3\)$"):
        zoo.load_user(f"{tmp_path / 'at_import.py'}:build")
    with pytest.raises(zoo.ZooError, match=r"building the model with build\(\) from .*in_build.py failed: it called "
                                           r"sys.exit\('no GPU'\)$"):
        zoo.load_user(f"{tmp_path / 'in_build.py'}:build")


def test_unknown_model_and_missing_file_are_clear():
    with pytest.raises(zoo.ZooError, match="unknown model 'resnet'; the zoo has: shapes, digits, depth"):
        zoo.load("resnet")
    with pytest.raises(zoo.ZooError, match="no weights file"):
        zoo.load("shapes", weights="/nonexistent/w.npz")


@pytest.mark.parametrize("call", [
    lambda: train.train("resnet", epochs=1, per_epoch=1, stream=io.StringIO()),
    lambda: train.held_out("resnet"),
    lambda: train.held_out("resnet", n=4, seed=FRESH_SEED),
    lambda: train.evaluate(zoo.load("digits"), "resnet", n=4),
], ids=["train", "held_out", "held_out of n images", "evaluate"])
def test_training_and_measuring_an_unknown_model_is_a_zoo_error(call):
    with pytest.raises(zoo.ZooError, match="^unknown model 'resnet'; the zoo has: shapes, digits, depth$"):
        call()


def test_every_spec_carries_its_recipe_and_its_data():
    for name, spec in zoo.SPECS.items():
        assert spec.name == name
        recipe = spec.recipe
        assert isinstance(recipe, zoo.Recipe) and min(recipe.epochs, recipe.per_epoch, recipe.batch) >= 1
        assert 0 < recipe.lr < 1 and spec.eval_batch >= 1
        assert spec.eval_count is None or spec.eval_count >= 1
        assert isinstance(spec.data, (data.Generated, data.Split)), name
    with pytest.raises(TypeError, match="recipe"):
        zoo.Spec("x", "classification", (1, 8, 8), object, data=data.Generated(data.shapes), eval_count=1)


@pytest.mark.parametrize("name", ["shapes", "depth"] + (["digits"] if HAS_SKLEARN else []))
def test_each_spec_gives_training_epochs_and_held_out_data_of_its_input_shape(name):
    spec = zoo.spec(name)
    n, epoch = spec.data.training(3)
    images, targets = epoch(FRESH_SEED, np.random.default_rng(0))
    assert images.shape == (n,) + spec.input_shape and len(targets) == n
    images, targets = train.held_out(name, n=2, seed=FRESH_SEED)
    assert images.shape == (2,) + spec.input_shape and len(targets) == 2
    if spec.task == "depth":
        assert targets.shape == (2, 1) + spec.input_shape[1:]


@pytest.mark.skipif(not HAS_SKLEARN, reason="scikit-learn (the 'train' extra) holds the digits")
def test_a_fixed_split_trains_on_all_of_it_shifted_and_is_measured_on_its_test_split():
    source = zoo.spec("digits").data
    n, epoch = source.training(5)                   # the images per epoch do not apply to a fixed split
    train_images, train_labels = data.digits("train")
    assert n == len(train_labels) == zoo.spec("digits").recipe.per_epoch
    images, labels = epoch(FRESH_SEED, np.random.default_rng(1))
    np.testing.assert_array_equal(labels, train_labels)
    np.testing.assert_array_equal(images, data.shifted(train_images, np.random.default_rng(1), 3))
    test_images, test_labels = data.digits("test")
    for n in (None, 7):
        images, labels = train.held_out("digits", n=n, seed=FRESH_SEED)
        np.testing.assert_array_equal(images, test_images[:n])
        np.testing.assert_array_equal(labels, test_labels[:n])


runner = CliRunner()


def test_models_command_prints_the_table():
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    for name in ("shapes", "digits", "depth"):
        assert name in result.output
    assert "accuracy 99" in result.output or "accuracy 98" in result.output
    assert "AbsRel" in result.output and "saliency train depth" in result.output


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SKLEARN, reason="scikit-learn (the 'train' extra) holds the digits")
def test_train_command_writes_weights_and_card(tmp_path):
    out = tmp_path / "w" / "d.npz"
    result = runner.invoke(app, ["train", "digits", "--epochs", "1", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "trained digits" in result.output and "accuracy" in result.output
    assert out.is_file() and out.with_suffix(".json").is_file()
    assert zoo.load("digits", weights=out).task == "classification"


def test_train_command_rejects_an_unknown_model():
    from saliency.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["train", "resnet"])
    assert info.value.code == 2
