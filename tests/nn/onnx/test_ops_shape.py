"""The converters of `saliency.nn.onnx.ops_shape` against onnxruntime: one small model per (operator,
version), run on two random inputs of one shape (the second run uses the shape's plan), shape
arithmetic folded per input shape, and input gradients of the linear ops against onnxruntime's."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import saliency as sl  # noqa: E402
from saliency.nn.onnx import OnnxError, ops_shape  # noqa: E402
from saliency.nn.onnx.registry import CONVERTERS  # noqa: E402

from _graphs import load, normal, opset_for, save, session  # noqa: E402

INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
N = helper.make_node


def i64(*values):
    return np.array(values, np.int64)


def check(tmp_path, nodes, shape, opset, inits=None, more=(), runs=2, rtol=1e-5, atol=1e-5, reference=None):
    """Our model's output against onnxruntime's (or `reference`'s: an object with a session's `run`) on
    `runs` inputs of `shape` and of each of the `more` shapes (the file's input dimensions then free)."""
    dims = [f"d{i}" for i in range(len(shape))] if more else list(shape)
    path = save(tmp_path, nodes, dims, opset, inits)
    ours = load(path, len(shape))
    theirs = reference or session(path)
    rng = np.random.default_rng(0)
    for s in (shape, *more):
        for _ in range(runs):
            x = normal(rng, s)
            want = theirs.run(None, {"x": x})[0]
            got = ours(sl.tensor(x))
            assert isinstance(got, sl.Tensor)
            assert tuple(got.shape) == want.shape
            np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=atol)
    return ours


def check_grad(tmp_path, nodes, shape, opset, inits=None):
    """Our input gradient of a linear op against onnxruntime's: d(sum(v * f(x)))/dx_i = sum(v * f(e_i))
    for each basis vector e_i (central differences of step 1 are exact for a linear f), exact up to
    float32 rounding of the values (about 1e-7 of them)."""
    path = save(tmp_path, nodes, list(shape), opset, inits, name="grad.onnx")
    run = session(path)
    rng = np.random.default_rng(1)
    x = normal(rng, shape)
    v = rng.standard_normal(run.run(None, {"x": x})[0].shape).astype(np.float32)
    want = np.zeros(shape)
    for i in np.ndindex(shape):
        e = np.zeros(shape, np.float32)
        e[i] = 1
        want[i] = np.sum(v * run.run(None, {"x": e})[0])
    xs = sl.tensor(x, requires_grad=True)
    y = load(path, len(shape))(xs)
    y.backward(sl.tensor(v))
    np.testing.assert_allclose(y.numpy(), run.run(None, {"x": x})[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xs.grad.numpy(), want, rtol=1e-5, atol=1e-5)


class Unchanged:
    """A reference whose output is its input."""

    def run(self, names, feeds):
        return [feeds["x"]]


def unsqueeze(inp, out, axes, opset, inits):
    if opset < 13:
        return N("Unsqueeze", [inp], [out], axes=list(axes))
    inits[out + "_axes"] = i64(*axes)
    return N("Unsqueeze", [inp, out + "_axes"], [out])


def dim(i, out, opset, inits):
    """Nodes making x.shape[i] as a 1-D int64 tensor: Shape -> Gather (scalar) -> Unsqueeze."""
    inits[out + "_at"] = np.array(i, np.int64)
    return [N("Shape", ["x"], [out + "_shape"]), N("Gather", [out + "_shape", out + "_at"], [out + "_s"], axis=0),
            unsqueeze(out + "_s", out, [0], opset, inits)]


# ---- reshapes -------------------------------------------------------------------------------------

RESHAPE = [("Reshape", v) for v in (5, 13, 14, 19, 21, 23, 24, 25)]


@pytest.mark.parametrize("target", [(0, -1), (0, 0, -1), (-1, 8), (2, 3, 2, 2, 4), (0, 3, 0, 4), (-1,)])
@pytest.mark.parametrize("op, version", RESHAPE)
def test_reshape(tmp_path, op, version, target):
    check(tmp_path, [N("Reshape", ["x", "shape"], ["y"])], (2, 3, 4, 4), opset_for(op, version),
          {"shape": i64(*target)})


@pytest.mark.parametrize("op, version", [r for r in RESHAPE if r[1] >= 14])
def test_reshape_allowzero(tmp_path, op, version):
    """allowzero=1: a 0 in the shape is a dimension of 0, not the input's; with none, as usual."""
    check(tmp_path, [N("Reshape", ["x", "shape"], ["y"], allowzero=1)], (2, 3, 4, 4), opset_for(op, version),
          {"shape": i64(2, -1, 4)})
    path = save(tmp_path, [N("Reshape", ["x", "shape"], ["y"], allowzero=1)], [2, 3, 4, 4], opset_for(op, version),
                {"shape": i64(0, 3, 4, 4)}, name="zero.onnx")
    with pytest.raises(ValueError, match="number of elements"):
        load(path, 4)(sl.tensor(np.zeros((2, 3, 4, 4), np.float32)))


@pytest.mark.parametrize("op, version", RESHAPE)
def test_reshape_by_shape_arithmetic(tmp_path, op, version):
    """x.view(x.size(0), -1) as exporters write it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
    folded for each input shape."""
    opset = opset_for(op, version)
    inits = {"minus1": i64(-1)}
    nodes = dim(0, "n", opset, inits) + [N("Concat", ["n", "minus1"], ["shape"], axis=0),
                                         N("Reshape", ["x", "shape"], ["y"])]
    check(tmp_path, nodes, (2, 3, 4, 4), opset, inits, more=[(1, 3, 5, 4), (3, 2, 2, 2)])


FLATTEN = [("Flatten", v) for v in (1, 9, 11, 13, 21, 23, 24, 25)]


@pytest.mark.parametrize("op, version, axis", [
    (op, v, a) for op, v in FLATTEN for a in (0, 1, 2, 4, -1, -3) if a >= 0 or v >= 11])  # negative axes from 11
def test_flatten(tmp_path, op, version, axis):
    check(tmp_path, [N("Flatten", ["x"], ["y"], axis=axis)], (2, 3, 4, 5), opset_for(op, version))


def test_flatten_default_axis(tmp_path):
    check(tmp_path, [N("Flatten", ["x"], ["y"])], (2, 3, 4, 5), 13)


TRANSPOSE = [("Transpose", v) for v in (1, 13, 21, 23, 24, 25)]


@pytest.mark.parametrize("perm", [None, (0, 2, 3, 1), (3, 1, 0, 2)])
@pytest.mark.parametrize("op, version", TRANSPOSE)
def test_transpose(tmp_path, op, version, perm):
    attrs = {} if perm is None else {"perm": list(perm)}
    check(tmp_path, [N("Transpose", ["x"], ["y"], **attrs)], (2, 3, 4, 5), opset_for(op, version))


SQUEEZE = [("Squeeze", v) for v in (1, 11, 13, 21, 23, 24, 25)]
UNSQUEEZE = [("Unsqueeze", v) for v in (1, 11, 13, 21, 23, 24, 25)]


def axes_node(op, version, axes, inits, inp="x", out="y"):
    if axes is None:
        return N(op, [inp], [out])
    if version < 13:
        return N(op, [inp], [out], axes=list(axes))
    inits["axes"] = i64(*axes)
    return N(op, [inp, "axes"], [out])


@pytest.mark.parametrize("op, version, axes", [
    (op, v, a) for op, v in SQUEEZE for a in (None, (0,), (0, 2), (-2, 0), (2, -4))
    if v >= 11 or a is None or min(a) >= 0])  # negative axes from Squeeze 11
def test_squeeze(tmp_path, op, version, axes):
    inits = {}
    check(tmp_path, [axes_node(op, version, axes, inits)], (1, 3, 1, 4), opset_for(op, version), inits)


@pytest.mark.parametrize("op, version, axes", [
    (op, v, a) for op, v in UNSQUEEZE for a in ((0,), (4,), (1, 3), (-1, 0), (-1,), (2, -3, 0))
    if v >= 11 or min(a) >= 0])  # negative axes from Unsqueeze 11
def test_unsqueeze(tmp_path, op, version, axes):
    inits = {}
    check(tmp_path, [axes_node(op, version, axes, inits)], (2, 3, 4, 5), opset_for(op, version), inits)


def test_squeeze_of_an_axis_not_of_size_one_is_refused(tmp_path):
    path = save(tmp_path, [N("Squeeze", ["x", "axes"], ["y"])], [1, 3, 1, 4], 13, {"axes": i64(1)})
    with pytest.raises(OnnxError, match="not of size 1"):
        load(path, 4)(sl.tensor(np.zeros((1, 3, 1, 4), np.float32)))


EXPAND = [("Expand", 8), ("Expand", 13)]


@pytest.mark.parametrize("shape, target", [((1, 3, 1, 4), (2, 3, 5, 4)), ((1, 3, 1, 4), (5, 1)),
                                           ((1, 3, 1, 4), (2, 1, 1, 1, 1)), ((2, 3, 4, 4), (1,))])
@pytest.mark.parametrize("op, version", EXPAND)
def test_expand(tmp_path, op, version, shape, target):
    check(tmp_path, [N("Expand", ["x", "shape"], ["y"])], shape, opset_for(op, version), {"shape": i64(*target)})


@pytest.mark.parametrize("op, version", EXPAND)
def test_expand_to_a_shape_of_ones_made_by_constant_of_shape(tmp_path, op, version):
    """torch's expand as exported: a constant broadcast to the input's shape, ConstantOfShape ->
    Mul -> Equal -> Where making the target, the input's shape folded per size."""
    opset = opset_for(op, version)
    inits = {"c": np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4), "minus1": i64(-1, -1, -1, -1),
             "four": i64(4)}
    nodes = [N("Shape", ["x"], ["shape"]),
             N("ConstantOfShape", ["four"], ["ones"], value=numpy_helper.from_array(i64(1))),
             N("Mul", ["ones", "minus1"], ["neg"]), N("Equal", ["shape", "neg"], ["free"]),
             N("Where", ["free", "ones", "shape"], ["target"]), N("Expand", ["c", "target"], ["e"]),
             N("Add", ["x", "e"], ["y"])]
    check(tmp_path, nodes, (2, 3, 5, 4), opset, inits, more=[(1, 2, 3, 4)])


TILE = [("Tile", 6), ("Tile", 13)]


@pytest.mark.parametrize("repeats", [(1, 2, 1, 3), (2, 1, 1, 1), (1, 1, 1, 1)])
@pytest.mark.parametrize("op, version", TILE)
def test_tile(tmp_path, op, version, repeats):
    check(tmp_path, [N("Tile", ["x", "repeats"], ["y"])], (2, 3, 2, 4), opset_for(op, version),
          {"repeats": i64(*repeats)})


DEPTH_TO_SPACE = [("DepthToSpace", 11), ("DepthToSpace", 13)]


@pytest.mark.parametrize("mode, blocksize", [("DCR", 2), ("CRD", 2), (None, 2), ("DCR", 3), ("CRD", 3)])
@pytest.mark.parametrize("op, version", DEPTH_TO_SPACE)
def test_depth_to_space(tmp_path, op, version, mode, blocksize):
    attrs = {"blocksize": blocksize} | ({} if mode is None else {"mode": mode})
    check(tmp_path, [N("DepthToSpace", ["x"], ["y"], **attrs)], (2, 2 * blocksize ** 2, 3, 2), opset_for(op, version))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_gradient(tmp_path, mode):
    check_grad(tmp_path, [N("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode)], (1, 8, 2, 2), 13)


SPACE_TO_DEPTH = [("SpaceToDepth", 1), ("SpaceToDepth", 13)]


@pytest.mark.parametrize("blocksize", [2, 3])
@pytest.mark.parametrize("op, version", SPACE_TO_DEPTH)
def test_space_to_depth(tmp_path, op, version, blocksize):
    check(tmp_path, [N("SpaceToDepth", ["x"], ["y"], blocksize=blocksize)], (2, 3, 2 * blocksize, 3 * blocksize),
          opset_for(op, version))


# ---- joining and cutting ----------------------------------------------------------------------------

CONCAT = [("Concat", v) for v in (4, 11, 13)]


CONCATS = [(("x", "t"), 1), (("x", "x", "t"), 3), (("c", "x"), 1), (("x", "c", "t"), 1), (("x", "t"), -1),
           (("x", "row"), -2)]


@pytest.mark.parametrize("op, version, inputs, axis", [
    (op, v, i, a) for op, v in CONCAT for i, a in CONCATS if a >= 0 or v >= 11])  # negative axes from Concat 11
def test_concat(tmp_path, op, version, inputs, axis):
    """Parts from the image and constant parts (initializers)."""
    inits = {"c": np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2) * np.ones((2, 1, 1, 1), np.float32),
             "row": np.full((2, 3, 1, 2), 0.5, np.float32)}
    nodes = [N("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]), N("Concat", list(inputs), ["y"], axis=axis)]
    check(tmp_path, nodes, (2, 3, 2, 2), opset_for(op, version), {k: v for k, v in inits.items() if k in inputs})


def test_concat_with_an_empty_part(tmp_path):
    """An empty part (a (2, 0, 2, 2) initializer) adds nothing."""
    nodes = [N("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]), N("Concat", ["x", "empty", "t"], ["y"], axis=1)]
    check(tmp_path, nodes, (2, 3, 2, 2), 13, {"empty": np.zeros((2, 0, 2, 2), np.float32)})


SPLIT = [("Split", v) for v in (2, 11, 13, 18)]


def split_graph(version, axis, outputs, split=None, num_outputs=None):
    """Split of x joined back in reverse order along its axis (so every part reaches the output)."""
    inits, attrs, ins = {}, {"axis": axis}, ["x"]
    if split is not None and version < 13:
        attrs["split"] = list(split)
    elif split is not None:
        inits["split"] = i64(*split)
        ins.append("split")
    if num_outputs is not None:
        attrs["num_outputs"] = num_outputs
    names = [f"p{i}" for i in range(outputs)]
    return [N("Split", ins, names, **attrs), N("Concat", names[::-1], ["y"], axis=axis)], inits


SPLITS = [(1, 3, None), (1, 2, (1, 2)), (3, 3, (2, 1, 3)), (-1, 2, (4, 2)), (2, 2, None)]


@pytest.mark.parametrize("op, version, axis, outputs, split", [
    (op, v, a, n, p) for op, v in SPLIT for a, n, p in SPLITS
    if (a >= 0 or v >= 11) and (p is not None or v < 18)])  # Split 18 needs split or num_outputs
def test_split(tmp_path, op, version, axis, outputs, split):
    nodes, inits = split_graph(version, axis, outputs, split)
    check(tmp_path, nodes, (2, 3, 4, 6), opset_for(op, version), inits)


@pytest.mark.parametrize("length, parts", [(6, 3), (7, 3), (5, 2), (8, 3)])
def test_split_18_num_outputs(tmp_path, length, parts):
    """num_outputs: equal parts of ceil(length / n), the last smaller."""
    nodes, inits = split_graph(18, 3, parts, num_outputs=parts)
    check(tmp_path, nodes, (1, 2, 3, length), 18, inits)


def test_split_outputs_are_the_parts(tmp_path):
    """Each output by itself (the model's output is the graph's first): part k of the axis."""
    x = normal(np.random.default_rng(0), (1, 6, 2, 2))
    for k in range(3):
        outs = [f"p{i}" for i in range(3)]
        outs.insert(0, outs.pop(k))
        path = save(tmp_path, [N("Split", ["x", "split"], ["p0", "p1", "p2"], axis=1)], [1, 6, 2, 2], 13,
                    {"split": i64(1, 3, 2)}, outputs=outs, name=f"part{k}.onnx")
        np.testing.assert_array_equal(load(path, 4)(sl.tensor(x)).numpy(), session(path).run(None, {"x": x})[0])


SLICE = [("Slice", v) for v in (10, 11, 13)]
SLICES = {
    "positive": ((1, 1), (3, 4), (2, 3), None),
    "negative-starts": ((-3, -2), (-1, INT64_MAX), (2, 3), None),
    "ends-past-the-axis": ((0,), (INT64_MAX,), (3,), (2,)),
    "ends-far-past": ((1,), (100,), (1,), None),
    "step-2": ((0, 1), (INT64_MAX, INT64_MAX), (2, 3), (2, 2)),
    "reverse-to-beginning": ((-1,), (INT64_MIN,), (3,), (-1,)),
    "reverse-to-minus-int64-max": ((INT64_MAX,), (-INT64_MAX,), (2,), (-1,)),
    "reverse-step-2": ((4, -2), (0, INT64_MIN), (3, 2), (-2, -1)),
    "reverse-start-before-the-axis": ((-100,), (INT64_MIN,), (3,), (-1,)),
    "reverse-start-past": ((100,), (1,), (3,), (-2,)),
    "empty": ((3,), (1,), (3,), None),
    "axes-omitted": ((0, 1, 1), (1, 3, INT64_MAX), None, None),
    "negative-axes": ((1,), (-1,), (-1,), None),
}


@pytest.mark.parametrize("op, version, case", [
    (op, v, c) for op, v in SLICE for c in SLICES if v >= 11 or c != "negative-axes"])
def test_slice(tmp_path, op, version, case):
    starts, ends, axes, steps = SLICES[case]
    inits = {"starts": i64(*starts), "ends": i64(*ends)}
    ins = ["x", "starts", "ends"]
    if axes is not None:
        inits["axes"] = i64(*axes)
        ins.append("axes")
    if steps is not None:
        if axes is None:
            ins.append("")
        inits["steps"] = i64(*steps)
        ins.append("steps")
    check(tmp_path, [N("Slice", ins, ["y"])], (2, 3, 5, 6), opset_for(op, version), inits)


def test_slice_gradient(tmp_path):
    inits = {"starts": i64(-1, 0), "ends": i64(INT64_MIN, INT64_MAX), "axes": i64(2, 3), "steps": i64(-2, 2)}
    check_grad(tmp_path, [N("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])], (1, 2, 4, 3), 13, inits)


GATHER = [("Gather", v) for v in (1, 11, 13)]
INDICES = {"scalar": np.array(1, np.int64), "negative-scalar": np.array(-1, np.int64), "1-D": i64(2, 0, 2),
           "negative-1-D": i64(-1, 0, -3), "2-D": np.array([[0, 1], [-1, 1]], np.int64),
           "int32": np.array([1, 0], np.int32)}


@pytest.mark.parametrize("op, version, indices, axis", [
    (op, v, i, a) for op, v in GATHER for i in INDICES for a in (0, 1, 3, -1)
    if v >= 11 or a >= 0 and INDICES[i].min() >= 0])  # negative axes and indices from Gather 11
def test_gather(tmp_path, op, version, indices, axis):
    idx = INDICES[indices]
    check(tmp_path, [N("Gather", ["x", "idx"], ["y"], axis=axis)], (3, 3, 2, 4), opset_for(op, version),
          {"idx": idx})


@pytest.mark.parametrize("axis, indices", [(1, np.array([[2, 2], [-1, 0]], np.int64)), (3, np.array(-2, np.int64))])
def test_gather_gradient(tmp_path, axis, indices):
    """Repeated indices add their gradients."""
    check_grad(tmp_path, [N("Gather", ["x", "idx"], ["y"], axis=axis)], (1, 3, 2, 3), 13, {"idx": indices})


def test_gather_of_indices_from_the_image_is_refused(tmp_path):
    nodes = [N("Cast", ["x"], ["i"], to=TensorProto.INT64), N("Gather", ["x", "i"], ["y"], axis=0)]
    path = save(tmp_path, nodes, [1, 1, 1, 1], 13)
    with pytest.raises(OnnxError, match="indices"):
        load(path, 4)(sl.tensor(np.zeros((1, 1, 1, 1), np.float32)))


# ---- padding --------------------------------------------------------------------------------------

PAD = [("Pad", v) for v in (2, 11, 13, 18, 19, 21, 23, 24, 25)]
PADS = {
    "constant": ("constant", (0, 0, 1, 2, 0, 0, 2, 1), 0.0),
    "constant-value": ("constant", (0, 1, 1, 0, 0, 0, 0, 3), -1.5),
    "constant-batch": ("constant", (1, 0, 0, 0, 0, 0, 0, 1), 2.0),
    "constant-negative": ("constant", (0, 0, -1, 2, 0, 0, 1, -2), 0.5),
    "reflect": ("reflect", (0, 0, 1, 2, 0, 0, 2, 1), None),
    "reflect-negative": ("reflect", (0, 0, -1, 2, 0, 0, 2, -1), None),
    "edge": ("edge", (0, 0, 3, 0, 0, 0, 1, 4), None),
    "edge-negative": ("edge", (0, 0, 2, -1, 0, 0, -2, 1), None),
    "wrap": ("wrap", (0, 0, 1, 2, 0, 0, 2, 3), None),
}


def pad_graph(version, mode, pads, value, axes=None):
    attrs = {} if mode == "constant" and value is None else {"mode": mode}
    if version < 11:
        if value is not None:
            attrs["value"] = value
        return [N("Pad", ["x"], ["y"], pads=list(pads), **attrs)], {}
    inits = {"pads": i64(*pads)}
    ins = ["x", "pads"]
    if value is not None:
        inits["value"] = np.array(value, np.float32)
        ins.append("value")
    if axes is not None:
        inits["axes"] = i64(*axes)
        ins += [""] * (3 - len(ins)) + ["axes"]
    return [N("Pad", ins, ["y"], **attrs)], inits


@pytest.mark.parametrize("op, version, case", [(op, v, c) for op, v in PAD for c in PADS if v >= 19 or c != "wrap"])
def test_pad(tmp_path, op, version, case):
    mode, pads, value = PADS[case]
    nodes, inits = pad_graph(version, mode, pads, value)
    check(tmp_path, nodes, (2, 3, 4, 5), opset_for(op, version), inits)


@pytest.mark.parametrize("version, axes, pads, mode", [
    (v, a, p, m) for v in (18, 19, 21) for a, p in (((2, 3), (1, 2, 2, 1)), ((-1,), (2, 1)), ((3, 1), (1, 0, 2, 0)))
    for m in ("constant", "reflect", "edge", "wrap") if (v >= 19 or m != "wrap") and (m == "constant" or 1 not in a)])
def test_pad_axes(tmp_path, version, axes, pads, mode):
    nodes, inits = pad_graph(version, mode, pads, 0.25 if mode == "constant" else None, axes)
    check(tmp_path, nodes, (2, 3, 4, 5), opset_for("Pad", version), inits)


def test_pad_by_shape_arithmetic(tmp_path):
    """SAME padding as TensorFlow's exporters write it: pads computed from the input's width, per size."""
    inits = {"three": i64(3), "eight": i64(8), "zero": i64(0), "two": i64(2)}
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W"], axis=0),
             N("Sub", ["eight", "W"], ["d"]), N("Max", ["d", "zero"], ["total"]), N("Div", ["total", "two"], ["lo"]),
             N("Sub", ["total", "lo"], ["hi"]),
             N("Concat", ["zero", "zero", "zero", "lo", "zero", "zero", "zero", "hi"], ["pads"], axis=0),
             N("Pad", ["x", "pads"], ["y"], mode="reflect")]
    check(tmp_path, nodes, (1, 2, 3, 5), 13, inits, more=[(1, 2, 3, 6), (2, 1, 4, 8)])


def test_pad_reflect_gradient(tmp_path):
    nodes, inits = pad_graph(13, "reflect", (0, 0, 2, 1, 0, 0, 1, 2), None)
    check_grad(tmp_path, nodes, (1, 2, 3, 4), 13, inits)


def test_pad_reflect_of_channels_is_refused(tmp_path):
    nodes, inits = pad_graph(13, "reflect", (0, 1, 0, 0, 0, 1, 0, 0), None)
    path = save(tmp_path, nodes, [1, 3, 2, 2], 13, inits)
    with pytest.raises(OnnxError, match="last two"):
        load(path, 4)(sl.tensor(np.zeros((1, 3, 2, 2), np.float32)))


# ---- resizing -------------------------------------------------------------------------------------

RESIZE = [("Resize", v) for v in (10, 11, 13, 18, 19)]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
COORDINATES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
TARGETS = {"scales-2": ("scales", (1, 1, 2, 2)), "scales-1.5": ("scales", (1, 1, 1.5, 1.5)),
           "scales-0.6": ("scales", (1, 1, 0.6, 0.6)), "scales-mixed": ("scales", (1, 1, 3, 0.5)),
           "sizes": ("sizes", (2, 3, 7, 4)), "sizes-to-one": ("sizes", (2, 3, 1, 3))}


def resize_graph(version, target, mode, coordinate=None, nearest=None, axes=None):
    kind, values = TARGETS[target] if isinstance(target, str) else target
    attrs = {"mode": mode}
    if coordinate is not None:
        attrs["coordinate_transformation_mode"] = coordinate
    if nearest is not None:
        attrs["nearest_mode"] = nearest
    if axes is not None:
        attrs["axes"] = list(axes)
    if version == 10:
        return [N("Resize", ["x", "scales"], ["y"], **attrs)], {"scales": np.array(values, np.float32)}
    inits = {"roi": np.zeros(0, np.float32)}
    if kind == "scales":
        inits["scales"] = np.array(values, np.float32)
        ins = ["x", "roi" if version == 11 else "", "scales"]
    else:
        inits["sizes"] = i64(*values)
        inits["scales"] = np.zeros(0, np.float32)
        ins = ["x", "roi", "scales", "sizes"] if version == 11 else ["x", "", "", "sizes"]
    return [N("Resize", ins, ["y"], **attrs)], inits


RESIZE_CASES = (
    [(v, t, "nearest", c, m) for v in (11, 13, 18, 19) for t in TARGETS for c in COORDINATES + ["half_pixel_symmetric"]
     for m in NEAREST_MODES if (v == 19 or t in ("scales-1.5", "sizes")) and (c != "half_pixel_symmetric" or v >= 19)]
    + [(v, t, "linear", c, None) for v in (11, 13, 18, 19) for t in TARGETS
       for c in COORDINATES + ["half_pixel_symmetric"] if (v == 19 or t != "sizes-to-one")
       and (c != "half_pixel_symmetric" or v >= 19)]
    + [(v, t, m, None, None) for v in (11, 13, 18, 19) for t in ("scales-2", "scales-0.6", "sizes") for m in
       ("nearest", "linear")])


@pytest.mark.parametrize("version, target, mode, coordinate, nearest", RESIZE_CASES)
def test_resize(tmp_path, version, target, mode, coordinate, nearest):
    nodes, inits = resize_graph(version, target, mode, coordinate, nearest)
    check(tmp_path, nodes, (2, 3, 5, 6), opset_for("Resize", version), inits)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("target", ["scales-2", "scales-1.5", "scales-0.6"])
def test_resize_10(tmp_path, target, mode):
    nodes, inits = resize_graph(10, target, mode)
    check(tmp_path, nodes, (2, 3, 5, 6), 10, inits)


@pytest.mark.parametrize("version", [18, 19])
@pytest.mark.parametrize("kind, values", [("scales", (2.0, 1.5)), ("sizes", (7, 4))])
def test_resize_axes(tmp_path, version, kind, values):
    """Resize 18's axes: scales or sizes of the last two axes only."""
    nodes, inits = resize_graph(version, (kind, values), "linear", axes=(2, 3))
    check(tmp_path, nodes, (2, 3, 5, 6), opset_for("Resize", version), inits)
    nodes, inits = resize_graph(version, (kind, values[::-1]), "nearest", "asymmetric", "floor", axes=(-1, -2))
    check(tmp_path, nodes, (2, 3, 5, 6), opset_for("Resize", version), inits)


def test_resize_by_sizes_from_shape_arithmetic(tmp_path):
    """F.interpolate(x, scale_factor=2) as torch exports it: sizes = Concat(Shape[:2], Floor(H, W * 2))."""
    inits = {"zero": i64(0), "two": i64(2), "four": i64(4), "factor": np.array([2.0, 2.0], np.float32)}
    nodes = [N("Shape", ["x"], ["shape"]), N("Slice", ["shape", "zero", "two"], ["nc"]),
             N("Slice", ["shape", "two", "four"], ["hw"]), N("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT),
             N("Mul", ["hwf", "factor"], ["scaled"]), N("Floor", ["scaled"], ["fl"]),
             N("Cast", ["fl"], ["hwi"], to=TensorProto.INT64), N("Concat", ["nc", "hwi"], ["sizes"], axis=0),
             N("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode="half_pixel")]
    check(tmp_path, nodes, (1, 2, 3, 4), 13, inits, more=[(2, 2, 5, 3)])


def test_upsample_by_scales_from_shape_arithmetic(tmp_path):
    """F.interpolate(x, size=(6, 8)) as torch exports it at opset 9: scales = Concat([1., 1.], size /
    Cast(Shape(x)[2:])), float constants of more than one value among shape arithmetic."""
    inits = {"hw_at": i64(2, 3), "ones": np.ones(2, np.float32), "size": np.array([6.0, 8.0], np.float32)}
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "hw_at"], ["hw"], axis=0),
             N("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT), N("Div", ["size", "hwf"], ["ratio"]),
             N("Concat", ["ones", "ratio"], ["scales"], axis=0), N("Upsample", ["x", "scales"], ["y"], mode="nearest")]
    check(tmp_path, nodes, (1, 2, 3, 4), 9, inits, more=[(2, 1, 2, 4), (1, 1, 6, 2)])


@pytest.mark.parametrize("coordinate", ["half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("target", ["scales-2", "scales-0.6", "sizes"])
def test_resize_linear_gradient(tmp_path, target, coordinate):
    nodes, inits = resize_graph(13, target if target != "sizes" else ("sizes", (1, 2, 5, 3)), "linear", coordinate)
    check_grad(tmp_path, nodes, (1, 2, 3, 4), 13, inits)


UPSAMPLE = [("Upsample", v) for v in (7, 9, 10)]


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 2, 3), (1, 1, 1.5, 2.5)])
@pytest.mark.parametrize("op, version", UPSAMPLE)
def test_upsample(tmp_path, op, version, scales, mode):
    """onnxruntime refuses Upsample 10 (deprecated at opset 10): ours against its Upsample 9, the same
    operator."""
    scales = [float(s) for s in scales]
    if version == 7:
        nodes, inits = [N("Upsample", ["x"], ["y"], mode=mode, scales=scales)], {}
    else:
        nodes, inits = [N("Upsample", ["x", "scales"], ["y"], mode=mode)], {"scales": np.array(scales, np.float32)}
    reference = session(save(tmp_path, nodes, [2, 3, 3, 4], 9, inits, name="nine.onnx")) if version == 10 else None
    check(tmp_path, nodes, (2, 3, 3, 4), opset_for(op, version), inits, reference=reference)


# ---- values of no gradient: identity, dropout, casts, constants, shapes -----------------------------

IDENTITY = [("Identity", v) for v in (1, 13, 14, 16, 19, 21, 23, 24, 25)]


@pytest.mark.parametrize("op, version", IDENTITY)
def test_identity(tmp_path, op, version):
    model = check(tmp_path, [N("Identity", ["x"], ["i"]), N("Mul", ["i", "two"], ["y"])], (2, 3, 4, 4),
                  opset_for(op, version), {"two": np.array(2.0, np.float32)})
    x = sl.tensor(normal(np.random.default_rng(1), (1, 3, 4, 4)), requires_grad=True)
    model(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((1, 3, 4, 4), 2.0, np.float32))


DROPOUT = [("Dropout", v) for v in (7, 10, 12, 13, 22)]


@pytest.mark.parametrize("op, version, mask, inputs", [
    (op, v, m, i) for op, v in DROPOUT for m in (False, True) for i in ("x", "ratio", "training")
    if v >= 12 or i == "x"])  # ratio and training_mode inputs from Dropout 12
def test_dropout(tmp_path, op, version, mask, inputs):
    """Eval mode: the input as it is, and a mask of ones (float before Dropout 10, bool after), as
    ONNX's reference implementation; onnxruntime gives Dropout 7 and 10 a mask of zeros, so with their
    mask the model's output is checked to be x * 1."""
    opset = opset_for(op, version)
    ins = {"x": ["x"], "ratio": ["x", "ratio"], "training": ["x", "ratio", "training"]}[inputs]
    inits = {"ratio": np.array(0.3, np.float32), "training": np.array(False)}
    attrs = {"ratio": 0.3} if version < 12 else {}
    if not mask:
        nodes = [N("Dropout", ins, ["d"], **attrs), N("Identity", ["d"], ["y"])]
    elif version < 10:
        nodes = [N("Dropout", ins, ["d", "m"], **attrs), N("Mul", ["d", "m"], ["y"])]
    else:
        nodes = [N("Dropout", ins, ["d", "m"], **attrs), N("Cast", ["m"], ["mf"], to=TensorProto.FLOAT),
                 N("Mul", ["d", "mf"], ["y"])]
    inits = {k: v for k, v in inits.items() if k in ins}
    check(tmp_path, nodes, (2, 3, 4, 4), opset, inits, reference=Unchanged() if mask and version < 12 else None)


def test_dropout_in_training_mode_is_refused(tmp_path):
    path = save(tmp_path, [N("Dropout", ["x", "ratio", "training"], ["y"])], [1, 3, 4, 4], 13,
                {"ratio": np.array(0.3, np.float32), "training": np.array(True)})
    with pytest.raises(OnnxError, match="training"):
        load(path, 4)(sl.tensor(np.zeros((1, 3, 4, 4), np.float32)))


CAST = [("Cast", v) for v in (6, 9, 13, 19, 21, 23, 24, 25)]


@pytest.mark.parametrize("chain", ["float", "double", "int32", "int64", "bool"])
@pytest.mark.parametrize("op, version", CAST)
def test_cast_of_the_image(tmp_path, op, version, chain):
    """Cast(Cast(3x, to), float) * x: float to float keeps the value; to an integer truncates (no
    gradient), to bool is x != 0, and the value is the image's (each input its own)."""
    to = {"float": TensorProto.FLOAT, "double": TensorProto.DOUBLE, "int32": TensorProto.INT32,
          "int64": TensorProto.INT64, "bool": TensorProto.BOOL}[chain]
    nodes = [N("Mul", ["x", "three"], ["x3"]), N("Cast", ["x3"], ["c"], to=to),
             N("Cast", ["c"], ["back"], to=TensorProto.FLOAT), N("Mul", ["back", "x"], ["y"])]
    tol = 1e-5 if chain != "double" else 1e-6
    check(tmp_path, nodes, (2, 3, 4, 4), opset_for(op, version), {"three": np.array(3.0, np.float32)},
          rtol=tol, atol=tol, runs=3)


@pytest.mark.parametrize("op, version", CAST)
def test_cast_on_shape_arithmetic(tmp_path, op, version):
    """W as float, halved, back to int64 (truncated): the width's repeats in a Tile, per input size."""
    inits = {"three": i64(3), "ones": i64(1, 1, 1), "half": np.array([0.5], np.float32)}
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W"], axis=0),
             N("Cast", ["W"], ["Wf"], to=TensorProto.FLOAT), N("Mul", ["Wf", "half"], ["h"]),
             N("Cast", ["h"], ["r"], to=TensorProto.INT64), N("Concat", ["ones", "r"], ["repeats"], axis=0),
             N("Tile", ["x", "repeats"], ["y"])]
    check(tmp_path, nodes, (1, 2, 3, 5), opset_for(op, version), inits, more=[(1, 2, 3, 4)])


CONSTANT = [("Constant", v) for v in (9, 11, 12, 13, 19, 21, 23, 24, 25)]
CONSTANT_VALUES = {
    "value": {"value": numpy_helper.from_array(np.arange(3, dtype=np.float32).reshape(1, 3, 1, 1) - 1)},
    "value-scalar": {"value": numpy_helper.from_array(np.array(2.5, np.float32))},
    "value_float": {"value_float": -0.75},
    "value_floats": {"value_floats": [1.0, -2.0, 0.5, 3.0]},
}


@pytest.mark.parametrize("op, version, kind", [
    (op, v, k) for op, v in CONSTANT for k in CONSTANT_VALUES
    if v >= 12 or not k.startswith("value_")])  # value_float(s) from Constant 12
def test_constant_added(tmp_path, op, version, kind):
    nodes = [N("Constant", [], ["c"], **CONSTANT_VALUES[kind]), N("Add", ["x", "c"], ["y"])]
    check(tmp_path, nodes, (2, 3, 4, 4), opset_for(op, version))


@pytest.mark.parametrize("op, version, kind", [
    (op, v, k) for op, v in CONSTANT for k in ("value", "value_int", "value_ints")
    if v >= 12 or k == "value"])  # value_int(s) from Constant 12
def test_constant_as_a_shape(tmp_path, op, version, kind):
    """An integer Constant as Reshape's shape (value_int: Unsqueezed first)."""
    opset = opset_for(op, version)
    inits = {}
    if kind == "value":
        nodes = [N("Constant", [], ["shape"], value=numpy_helper.from_array(i64(0, -1, 4)))]
    elif kind == "value_ints":
        nodes = [N("Constant", [], ["shape"], value_ints=[0, 12, -1])]
    else:
        inits["minus1"] = i64(0, -1)
        nodes = [N("Constant", [], ["four"], value_int=4), unsqueeze("four", "four1", [0], opset, inits),
                 N("Concat", ["minus1", "four1"], ["shape"], axis=0)]
    nodes.append(N("Reshape", ["x", "shape"], ["y"]))
    check(tmp_path, nodes, (2, 3, 4, 4), opset, inits)


CONSTANT_OF_SHAPE = [("ConstantOfShape", v) for v in (9, 20, 21, 23, 24, 25)]


@pytest.mark.parametrize("value", [None, np.array([0.5], np.float32), np.array([3], np.int64)])
@pytest.mark.parametrize("op, version", CONSTANT_OF_SHAPE)
def test_constant_of_shape(tmp_path, op, version, value):
    """ConstantOfShape(Shape(x)) added to x (cast to float first when its value is an integer)."""
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    nodes = [N("Shape", ["x"], ["shape"]), N("ConstantOfShape", ["shape"], ["c"], **attrs)]
    if value is not None and value.dtype == np.int64:
        nodes += [N("Cast", ["c"], ["cf"], to=TensorProto.FLOAT), N("Add", ["x", "cf"], ["y"])]
    else:
        nodes.append(N("Add", ["x", "c"], ["y"]))
    check(tmp_path, nodes, (2, 3, 4, 4), opset_for(op, version), more=[(1, 2, 3, 5)])


SHAPE_OPS = [("Shape", v) for v in (1, 13, 15, 19, 21, 23, 24, 25)]


@pytest.mark.parametrize("op, version, start, end", [
    (op, v, s, e) for op, v in SHAPE_OPS for s, e in ((None, None), (0, 2), (-2, None), (1, -1), (-10, 10), (2, 100))
    if v >= 15 or (s, e) == (None, None)])  # start and end from Shape 15
def test_shape(tmp_path, op, version, start, end):
    """Reshape(x, Concat(Shape(x)[start:end], [-1])), folded per input shape."""
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    nodes = [N("Shape", ["x"], ["s"], **attrs), N("Concat", ["s", "minus1"], ["shape"], axis=0),
             N("Reshape", ["x", "shape"], ["y"])]
    check(tmp_path, nodes, (2, 3, 4, 5), opset_for(op, version), {"minus1": i64(-1)}, more=[(1, 2, 3, 4)])


SIZE = [("Size", v) for v in (1, 13, 19, 21, 23, 24, 25)]


@pytest.mark.parametrize("op, version", SIZE)
def test_size(tmp_path, op, version):
    """Reshape(x, [N, Size(x) / N]), folded per input shape."""
    opset = opset_for(op, version)
    inits = {}
    nodes = [N("Size", ["x"], ["size"]), unsqueeze("size", "size1", [0], opset, inits)] + dim(0, "n", opset, inits) + \
        [N("Div", ["size1", "n"], ["rest"]), N("Concat", ["n", "rest"], ["shape"], axis=0),
         N("Reshape", ["x", "shape"], ["y"])]
    check(tmp_path, nodes, (2, 3, 4, 5), opset, inits, more=[(3, 1, 2, 2)])


RANGE = [("Range", 11)]


@pytest.mark.parametrize("start, delta", [(0, 1), (1, 2), (-1, -1), (5, -2)])
def test_range_gathers(tmp_path, start, delta):
    """Gather(x, Range(start, W or -W - 1, delta), axis=3): indices made from the input's width."""
    inits = {"three": i64(3), "start": np.array(start, np.int64), "delta": np.array(delta, np.int64),
             "minus1": np.array(-1, np.int64)}
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W1"], axis=0),
             N("Squeeze", ["W1"], ["W"])]
    if delta < 0:
        nodes += [N("Neg", ["W"], ["mW"]), N("Add", ["mW", "minus1"], ["limit"])]
    else:
        nodes.append(N("Identity", ["W"], ["limit"]))
    nodes += [N("Range", ["start", "limit", "delta"], ["idx"]), N("Gather", ["x", "idx"], ["y"], axis=3)]
    check(tmp_path, nodes, (1, 2, 3, 6), 13, inits, more=[(2, 1, 2, 9)])


def test_range_of_floats(tmp_path):
    """A float Range added to the image's last axis."""
    inits = {"start": np.array(0.5, np.float32), "limit": np.array(3.0, np.float32),
             "delta": np.array(0.5, np.float32)}
    nodes = [N("Range", ["start", "limit", "delta"], ["r"]), N("Add", ["x", "r"], ["y"])]
    check(tmp_path, nodes, (1, 2, 3, 5), 13, inits)


def test_constants_fold_at_load(tmp_path):
    """A weight rearranged by the exporter (Transpose, Reshape, Slice, Concat, Gather on initializers) is
    computed once at load: the model runs only the Add."""
    inits = {"w": np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4), "shape": i64(1, 4, 2, 3),
             "starts": i64(1), "ends": i64(INT64_MAX), "axes": i64(1), "idx": i64(0, 0, 1, 2)}
    nodes = [N("Transpose", ["w"], ["wt"], perm=[0, 3, 1, 2]), N("Reshape", ["wt", "shape"], ["wr"]),
             N("Slice", ["wr", "starts", "ends", "axes"], ["ws"]), N("Concat", ["ws", "wr"], ["wc"], axis=1),
             N("Gather", ["wc", "idx"], ["wg"], axis=1), N("Add", ["x", "wg"], ["y"])]
    model = check(tmp_path, nodes, (2, 4, 2, 3), 13, inits)
    assert [m.op_type for _, m in model.named_children()] == ["Add"]


# ---- every converter of ops_shape has cases -------------------------------------------------------

COVERED = set(RESHAPE + FLATTEN + TRANSPOSE + SQUEEZE + UNSQUEEZE + EXPAND + TILE + DEPTH_TO_SPACE + SPACE_TO_DEPTH
              + CONCAT + SPLIT + SLICE + GATHER + PAD + RESIZE + UPSAMPLE + IDENTITY + DROPOUT + CAST + CONSTANT
              + CONSTANT_OF_SHAPE + SHAPE_OPS + SIZE + RANGE)


def test_every_converter_of_ops_shape_is_tested():
    ours = {key for key, build in CONVERTERS.items() if build.__module__ == ops_shape.__name__}
    assert ours - COVERED == set()
    assert COVERED - ours == set()
