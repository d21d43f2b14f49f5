"""`saliency.nn.load_onnx`: the model a file becomes (its layers named after the graph's nodes,
frozen weights, Grad-CAM's layer, hooks, the randomisation check), its input (size, NHWC layout,
shape arithmetic per input size), and the files it refuses in one line without allocating what
they only declare (truncated, damaged, hostile external data, unsupported operators)."""
import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import saliency as sl  # noqa: E402
from saliency import nn  # noqa: E402
from saliency.attribution import gradcam, gradient, randomisation_check, seeds  # noqa: E402
from saliency.nn.onnx import OnnxError, load_onnx  # noqa: E402

RNG = np.random.default_rng(0)


def _init(name, shape, scale=0.5):
    return numpy_helper.from_array((scale * RNG.standard_normal(shape)).astype(np.float32), name)


def _save(graph, path, opset=17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    onnx.save(model, str(path))
    return path


def _classifier(path, dims=(1, 3, 12, 12), classes=5):
    """Conv -> Relu -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, as an exporter names them."""
    nodes = [helper.make_node("Conv", ["image", "c1.w", "c1.b"], ["a"], name="/features/conv1/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="/features/relu1/Relu"),
             helper.make_node("Conv", ["b", "c2.w", "c2.b"], ["c"], name="/features/conv2/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["d"], name="/features/relu2/Relu"),
             helper.make_node("GlobalAveragePool", ["d"], ["e"], name="/pool/GlobalAveragePool"),
             helper.make_node("Flatten", ["e"], ["f"], name="/flatten/Flatten"),
             helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="/fc/Gemm", transB=1)]
    inits = [_init("c1.w", (4, 3, 3, 3)), _init("c1.b", (4,)), _init("c2.w", (6, 4, 3, 3)), _init("c2.b", (6,)),
             _init("fc.w", (classes, 6)), _init("fc.b", (classes,))]
    graph = helper.make_graph(nodes, "classifier",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(dims))],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], inits)
    return _save(graph, path)


def _ort(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_a_model_is_a_module_of_named_layers_with_frozen_weights(tmp_path):
    path = _classifier(tmp_path / "net.onnx")
    model = load_onnx(path)
    names = [n for n, _ in model.named_children()]
    assert names == ["features_conv1_Conv", "features_relu1_Relu", "features_conv2_Conv", "features_relu2_Relu",
                     "pool_GlobalAveragePool", "flatten_Flatten", "fc_Gemm"]
    assert isinstance(model.features_conv2_Conv, nn.Conv2d) and isinstance(model.fc_Gemm, nn.Linear)
    assert model.input_shape == (3, 12, 12) and model.layout == "NCHW" and not model.training
    assert sorted(model.state_dict()) == ["fc_Gemm.bias", "fc_Gemm.weight", "features_conv1_Conv.bias",
                                          "features_conv1_Conv.weight", "features_conv2_Conv.bias",
                                          "features_conv2_Conv.weight"]
    assert not any(p.requires_grad for p in model.parameters())
    assert all(p.requires_grad for p in load_onnx(path, trainable=True).parameters())
    x = RNG.uniform(0, 1, (2, 3, 12, 12)).astype(np.float32)
    theirs = np.concatenate([_ort(path, x[i:i + 1]) for i in range(len(x))])  # the file declares a batch of 1
    np.testing.assert_allclose(model(x).numpy(), theirs, rtol=1e-5, atol=1e-6)


def test_grad_cam_hooks_and_the_randomisation_check_see_the_layers(tmp_path):
    model = load_onnx(_classifier(tmp_path / "net.onnx"))
    x = RNG.uniform(0, 1, (3, 12, 12)).astype(np.float32)
    cam = gradcam(model, x, seeds.one_hot(2))  # the default layer: the last Conv2d
    named = gradcam(model, x, seeds.one_hot(2), layer="features_conv2_Conv")
    np.testing.assert_array_equal(cam.map, named.map)
    listed = "its convolutions are: features_conv1_Conv, features_conv2_Conv"
    with pytest.raises(sl.attribution.InputError, match=listed):
        gradcam(model, x, seeds.one_hot(2), layer="conv2")
    seen = []
    handle = model.features_relu1_Relu.register_forward_hook(lambda m, i, o: seen.append(tuple(o.shape)))
    model(x[None])
    handle.remove()
    assert seen == [(1, 4, 12, 12)]
    check = randomisation_check(model, x[None], gradient, seeds.one_hot(2))
    assert check.layers and np.all(np.isfinite(check.correlations))
    assert np.mean(check.correlations[-1]) < 0.9  # every layer randomised: the map is another one


def test_a_free_input_size_takes_any_image_and_its_shape_arithmetic_is_folded_per_size(tmp_path):
    """Flatten written as exporters write it: Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["a"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsqueeze"),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["a", "target"], ["y"], name="reshape")]
    inits = [_init("w", (2, 3, 3, 3)), numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    free = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])
    graph = helper.make_graph(nodes, "flat", [free],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = _save(graph, tmp_path / "flat.onnx")
    model = load_onnx(path)
    assert model.input_shape is None
    for shape in ((1, 3, 5, 7), (3, 3, 6, 4), (1, 3, 5, 7)):
        x = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(model(x).numpy(), _ort(path, x), rtol=1e-5, atol=1e-6)
    assert len(model.plans) == 2  # one per input shape seen
    steps, constants = model.plans[(1, 3, 5, 7)]
    assert [s[0] for s in steps] == ["conv", "reshape"] and constants["target"].tolist() == [1, -1]
    assert load_onnx(path, input_shape=(3, 16, 16)).input_shape == (3, 16, 16)
    fixed = _classifier(tmp_path / "fixed.onnx")
    with pytest.raises(OnnxError, match="declares an input height of 12; input_shape gives 16"):
        load_onnx(fixed, input_shape=(3, 16, 12))


def test_an_nhwc_graph_takes_nchw_images(tmp_path):
    """tf2onnx's layout: NHWC input, each convolution wrapped in Transposes."""
    nodes = [helper.make_node("Transpose", ["input_1"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w", "b"], ["c"], name="model/conv2d/Conv2D", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="model/conv2d/Relu"),
             helper.make_node("Transpose", ["r"], ["back"], perm=[0, 2, 3, 1]),
             helper.make_node("ReduceMean", ["back"], ["m"], name="model/global_average_pooling2d/Mean", axes=[1, 2],
                              keepdims=0),
             helper.make_node("MatMul", ["m", "dense"], ["logits"], name="model/dense/MatMul")]
    inits = [_init("w", (4, 3, 3, 3)), _init("b", (4,)), _init("dense", (4, 3))]
    graph = helper.make_graph(nodes, "keras", [helper.make_tensor_value_info("input_1", TensorProto.FLOAT,
                                                                             ["unk__0", 10, 9, 3])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], inits)
    path = _save(graph, tmp_path / "keras.onnx", opset=13)
    model = load_onnx(path)
    assert model.layout == "NHWC" and model.input_shape == (3, 10, 9)
    x = RNG.uniform(0, 1, (2, 3, 10, 9)).astype(np.float32)
    np.testing.assert_allclose(model(x).numpy(), _ort(path, np.ascontiguousarray(x.transpose(0, 2, 3, 1))),
                               rtol=1e-5, atol=1e-6)
    assert sl.autograd.gradcheck(model.double(), (sl.tensor(x[:1].astype(np.float64), requires_grad=True),))


def _valid_bytes(tmp_path):
    return _classifier(tmp_path / "ok.onnx").read_bytes()


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:len(data) // 2], "is not an ONNX model"),
    (lambda data: b"", "is not an ONNX model"),
    (lambda data: bytes(range(256)) * 64, "is not an ONNX model"),
])
def test_a_damaged_file_is_one_line(tmp_path, damage, message):
    path = tmp_path / "bad.onnx"
    path.write_bytes(damage(_valid_bytes(tmp_path)))
    with pytest.raises(OnnxError, match=message) as info:
        load_onnx(path)
    assert "\n" not in str(info.value)


def _one_tensor_model(path, tensor):
    nodes = [helper.make_node("Add", ["x", tensor.name], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [tensor])
    return _save(graph, path)


def _tensor(name, dims, raw=None, floats=None):
    """A TensorProto as a hostile file has it (onnx.helper would refuse to make it)."""
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(dims)
    if raw is not None:
        t.raw_data = raw
    if floats is not None:
        t.float_data.extend(floats)
    return t


def test_a_tensor_that_holds_less_than_it_declares_is_refused_before_any_allocation(tmp_path):
    huge = _tensor("big", [1 << 20, 1 << 20], raw=b"\0" * 16)
    declared = r"^initializer 'big' declares shape \[1048576, 1048576\] .* and holds 16 bytes"
    with pytest.raises(OnnxError, match=declared):
        load_onnx(_one_tensor_model(tmp_path / "huge.onnx", huge))
    short = _tensor("short", [3], floats=[1.0, 2.0])
    with pytest.raises(OnnxError, match=r"declares shape \[3\] \(3 values\) and holds 2"):
        load_onnx(_one_tensor_model(tmp_path / "short.onnx", short))


def _external(path, location, offset=0, length=None):
    t = _tensor("w", [1, 3, 1, 1])
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return _one_tensor_model(path, t)


def test_external_data_is_read_only_from_files_beside_the_model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    values = np.array([1.0, 2.0, 3.0], np.float32)
    (folder / "weights.bin").write_bytes(b"\0" * 8 + values.tobytes())
    model = load_onnx(_external(folder / "ok.onnx", "weights.bin", offset=8, length=12))
    x = np.zeros((1, 3, 4, 4), np.float32)
    np.testing.assert_array_equal(model(x).numpy()[0, :, 0, 0], values)
    (tmp_path / "secret.bin").write_bytes(values.tobytes())
    os.symlink(tmp_path / "secret.bin", folder / "link.bin")
    for location, message in (("../secret.bin", "not a file name inside the model's folder"),
                              (str(tmp_path / "secret.bin"), "not a file name inside the model's folder"),
                              ("link.bin", "not a file inside the model's folder"),
                              ("missing.bin", "not a file inside the model's folder")):
        with pytest.raises(OnnxError, match=message):
            load_onnx(_external(folder / "bad.onnx", location, length=12))
    with pytest.raises(OnnxError, match="lies outside weights.bin"):
        load_onnx(_external(folder / "far.onnx", "weights.bin", offset=16, length=12))


def test_an_unsupported_operator_is_one_line_naming_it_its_version_and_its_node(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NonZero", ["a"], ["y"], name="/head/NonZero")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    with pytest.raises(OnnxError, match=r"operator NonZero version 13 \(node '/head/NonZero', opset 17\) is not "
                                        r"supported"):
        load_onnx(_save(graph, tmp_path / "nz.onnx"))
    nodes = [helper.make_node("FusedConv", ["x"], ["y"], name="fused", domain="com.microsoft")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    onnx.save(model, str(tmp_path / "ms.onnx"))
    with pytest.raises(OnnxError, match="com.microsoft.FusedConv .* is not in the standard operator set"):
        load_onnx(tmp_path / "ms.onnx")


def test_a_node_reading_a_value_nothing_makes_is_one_line(tmp_path):
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(OnnxError, match="node 'add' \\(Add\\) reads 'ghost', which no earlier node makes"):
        load_onnx(_save(graph, tmp_path / "ghost.onnx"))


@pytest.mark.parametrize("op_type, inputs, message", [
    ("Conv", ["x", ""], r"node 'n' \(Conv\) has no weight input, which ONNX requires"),
    ("BatchNormalization", ["x", "", "b", "m", "v"], r"node 'n' \(BatchNormalization\) has no scale input"),
])
def test_a_layer_without_its_required_weight_is_one_line(tmp_path, op_type, inputs, message):
    nodes = [helper.make_node(op_type, inputs, ["y"], name="n")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [_init(name, (3,)) for name in ("b", "m", "v")])
    with pytest.raises(OnnxError, match=message):
        load_onnx(_save(graph, tmp_path / "noweight.onnx"))


def test_a_model_of_two_inputs_is_refused(tmp_path):
    nodes = [helper.make_node("Add", ["x", "z"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4]),
                                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(OnnxError, match=r"takes 2 inputs \(x, z\)"):
        load_onnx(_save(graph, tmp_path / "two.onnx"))


def test_without_the_onnx_package_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    path = _classifier(tmp_path / "net.onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(OnnxError, match=r"pip install 'saliency-maps\[onnx\]'"):
        load_onnx(path)
