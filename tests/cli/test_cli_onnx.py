"""`--model net.onnx` in every command that takes a model: map (with --classes), batch then
evaluate (the store records the file, which runs no code, so evaluate opens it unnamed),
receptive-field, look-distance and explore; and the one line a file the engine cannot run gives."""
import json
from pathlib import Path

import numpy as np
import pytest
from _cli import run_cli

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from saliency import attribution, nn  # noqa: E402
from saliency.attribution import seeds  # noqa: E402
from saliency.cli.explore import explorer  # noqa: E402
from saliency.viz import load_image  # noqa: E402

IMAGES = Path(__file__).resolve().parents[2] / "samples" / "images"
RNG = np.random.default_rng(3)


def _init(name, shape):
    return numpy_helper.from_array((0.5 * RNG.standard_normal(shape)).astype(np.float32), name)


def _save(nodes, inits, out_dims, path, in_dims=(1, 3, 32, 32)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(in_dims))],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_dims)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(path))
    return path


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "classifier.onnx"
    nodes = [helper.make_node("Conv", ["image", "w1", "b1"], ["a"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="/relu/Relu"),
             helper.make_node("MaxPool", ["b"], ["c"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["c", "w2", "b2"], ["d"], name="/conv2/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["d"], ["e"], name="/gap/GlobalAveragePool"),
             helper.make_node("Flatten", ["e"], ["f"], name="/flatten/Flatten"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["out"], name="/fc/Gemm", transB=1)]
    inits = [_init("w1", (6, 3, 3, 3)), _init("b1", (6,)), _init("w2", (8, 6, 3, 3)), _init("b2", (8,)),
             _init("wf", (4, 8)), _init("bf", (4,))]
    return _save(nodes, inits, [1, 4], path)


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "dense.onnx"
    nodes = [helper.make_node("Conv", ["image", "w1", "b1"], ["a"], name="/enc/Conv", pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("Relu", ["a"], ["b"], name="/enc/Relu"),
             helper.make_node("Resize", ["b", "", "scales"], ["c"], name="/up/Resize", mode="linear",
                              coordinate_transformation_mode="half_pixel"),
             helper.make_node("Conv", ["c", "w2", "b2"], ["out"], name="/head/Conv", pads=[1, 1, 1, 1])]
    alive = numpy_helper.from_array(np.full(4, 2.0, np.float32), "b1")  # no ReLU dead at every pixel
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    inits = [_init("w1", (4, 3, 3, 3)), alive, _init("w2", (1, 4, 3, 3)), _init("b2", (1,)), scales]
    return _save(nodes, inits, [1, 1, 32, 32], path)


def test_a_map_of_an_onnx_classifier_with_its_class_names(classifier, tmp_path, capsys):
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\nbird\nfish\n")
    code, out, err = run_cli(capsys, "map", IMAGES / "star.png", "--model", classifier, "--classes", labels,
                             "--out", tmp_path / "star.png")
    assert code == 0, err
    model = nn.load_onnx(classifier)
    x, _ = load_image(IMAGES / "star.png", size=(32, 32))
    k = int(np.argmax(model(x[None]).numpy()))
    assert f"prediction: {['cat', 'dog', 'bird', 'fish'][k]}" in out and (tmp_path / "star.png").is_file()


@pytest.mark.parametrize("extra, message", [
    (["--weights", "w.pth"], "holds its weights; --weights is for model files"),
    (["--model-args", "{}"], "--model-args is for a model file"),
])
def test_weights_or_arguments_with_an_onnx_file_are_one_line(classifier, capsys, extra, message):
    code, out, err = run_cli(capsys, "map", IMAGES / "star.png", "--model", classifier, *extra)
    assert code == 2 and message in err and "Traceback" not in err


def test_an_onnx_file_the_engine_cannot_run_is_one_line(tmp_path, capsys):
    bad = _save([helper.make_node("LSTM", ["image", "w", "r"], ["out"], name="/rnn/LSTM", hidden_size=2)],
                [_init("w", (1, 8, 3)), _init("r", (1, 8, 2))], None, tmp_path / "rnn.onnx", in_dims=(5, 1, 3))
    code, out, err = run_cli(capsys, "map", IMAGES / "star.png", "--model", bad)
    assert code == 2 and "operator LSTM version" in err and "node '/rnn/LSTM'" in err and "Traceback" not in err
    code, out, err = run_cli(capsys, "map", IMAGES / "star.png", "--model", tmp_path / "missing.onnx")
    assert code == 2 and "does not exist" in err
    (tmp_path / "text.onnx").write_text("not a model")
    code, out, err = run_cli(capsys, "map", IMAGES / "star.png", "--model", tmp_path / "text.onnx")
    assert code == 2 and "is not an ONNX model" in err


def test_batch_then_evaluate_an_onnx_model(classifier, tmp_path, capsys):
    code, out, err = run_cli(capsys, "batch", IMAGES, "--model", classifier, "--out", tmp_path / "out")
    assert code == 0, err
    store = attribution.open_store(next(p for p in (tmp_path / "out").iterdir() if p.name.startswith("maps")))
    model = nn.load_onnx(classifier)
    x, _ = load_image(Path(store.files[2]), size=(32, 32))
    k = int(store.predicted[2])
    np.testing.assert_allclose(store.maps[2], attribution.gradient(model, x, seeds.one_hot(k)).map, rtol=1e-5,
                               atol=1e-6)
    code, out, err = run_cli(capsys, "evaluate", tmp_path / "out", "--out", tmp_path / "report", "--sample", "0")
    assert code == 0, err  # the store's model is the ONNX file: no --model needed
    report = json.loads((tmp_path / "report" / "evaluation.json").read_text())
    assert len(next(iter(report.values()))["deletion_auc"]) == len(store)


def test_receptive_field_look_distance_and_explore_of_an_onnx_dense_model(dense, tmp_path, capsys):
    code, out, err = run_cli(capsys, "receptive-field", IMAGES / "scene.png", "--model", dense, "--pixel", "10,12",
                             "--out", tmp_path / "rf.png")
    assert code == 0 and "50% of the gradient mass lies within" in out and "nan" not in out, err
    code, out, err = run_cli(capsys, "look-distance", IMAGES / "scene.png", "--model", dense, "--stride", "8",
                             "--out", tmp_path / "look.png")
    assert code == 0 and (tmp_path / "look.png").is_file(), err
    made, notes, what = explorer(str(IMAGES / "scene.png"), str(dense), None, None, None, None, None)
    info = made.info()
    assert info["live"] and info["output_shape"] == [1, 32, 32]
    attr = made.map_of({"seed": "pixel:10,12"})
    x, _ = load_image(IMAGES / "scene.png", size=(32, 32))
    want = attribution.gradient(nn.load_onnx(dense), x, seeds.pixel(10, 12)).map
    np.testing.assert_allclose(attr.map, want, rtol=1e-5, atol=1e-7)
