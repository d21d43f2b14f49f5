"""The converters of `saliency.nn.onnx.ops_math` against onnxruntime: one small model per (operator,
version), run on two random inputs of one shape (the second run uses the shape's plan), and input
gradients against finite differences of onnxruntime's output."""
import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import saliency as sl  # noqa: E402
from saliency.nn.onnx import OnnxError, ops_math  # noqa: E402
from saliency.nn.onnx.registry import CONVERTERS  # noqa: E402

from _graphs import load, normal, opset_for, save, session  # noqa: E402

N = helper.make_node


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape).astype(np.float32)


def check(tmp_path, nodes, shape, opset, inits=None, make=normal, rtol=1e-5, atol=1e-5, runs=2):
    """Our model's output against onnxruntime's on `runs` inputs of `shape` (one plan)."""
    path = save(tmp_path, nodes, shape, opset, inits)
    ours, theirs = load(path, len(shape)), session(path)
    rng = np.random.default_rng(0)
    for _ in range(runs):
        x = make(rng, shape)
        want = theirs.run(None, {"x": x})[0]
        got = ours(sl.tensor(x))
        assert isinstance(got, sl.Tensor)
        assert tuple(got.shape) == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=atol)
    return ours


def affine_grad(path, x, v):
    """d(sum(v * f(x)))/dx of an affine f (onnxruntime's float32 model): sum(v * (f(e_i) - f(0))) for each
    basis vector e_i, exact up to float32 rounding (about 1e-7 of the values)."""
    run = session(path)
    base = run.run(None, {"x": np.zeros_like(x)})[0].astype(np.float64)
    g = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = 1
        g[i] = np.sum(v * (run.run(None, {"x": e})[0] - base))
    return g


def numeric_grad(path, x, v, eps=1e-6):
    """d(sum(v * f(x)))/dx of onnxruntime's float64 model by central differences."""
    run = session(path)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (np.sum(v * run.run(None, {"x": hi})[0]) - np.sum(v * run.run(None, {"x": lo})[0])) / (2 * eps)
    return g


def our_grad(path, x, v):
    model = load(path, x.ndim)
    xs = sl.tensor(x, requires_grad=True)
    y = model(xs)
    y.backward(sl.tensor(v))
    return y.numpy(), xs.grad.numpy()


def grad_against_ort(tmp_path, nodes, shape, opset, inits=None, make=None):
    """Our input gradient (float64 model, float64 input) against central differences (eps 1e-6) of
    onnxruntime's float64 model: their truncation (eps^2 times a third derivative, about 1e-12 here)
    and rounding (1e-16 / eps, about 1e-10) errors stay far below rtol 1e-6."""
    inits64 = {k: (np.asarray(a, np.float64) if np.asarray(a).dtype == np.float32 else a) for k, a in
               (inits or {}).items()}
    path = save(tmp_path, nodes, shape, opset, inits64, elem=TensorProto.DOUBLE, name="grad.onnx")
    rng = np.random.default_rng(1)
    x = (make or (lambda r, s: r.standard_normal(s)))(rng, shape).astype(np.float64)
    want_y = session(path).run(None, {"x": x})[0]
    v = rng.standard_normal(want_y.shape)
    y, got = our_grad(path, x, v)
    np.testing.assert_allclose(y, want_y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, numeric_grad(path, x, v), rtol=1e-6, atol=1e-8)


C = 3
SHAPE = (2, C, 4, 4)
CHANNEL = np.array([0.5, -1.5, 2.0], np.float32).reshape(1, C, 1, 1)
TRANSPOSED = N("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2])


def first_channel():
    """x[:, :1] (a Tensor that broadcasts against x) by Slice, as "s"."""
    return N("Slice", ["x", "s_start", "s_end", "s_axis"], ["s"]), \
        {"s_start": np.array([0], np.int64), "s_end": np.array([1], np.int64), "s_axis": np.array([1], np.int64)}


# ---- elementwise binary ------------------------------------------------------------------------

BINARY = [(op, v) for op in ("Add", "Sub", "Mul", "Div") for v in (7, 13, 14)]
FORMS = ["tensor-tensor", "tensor-broadcast-tensor", "tensor-constant", "constant-tensor", "tensor-scalar",
         "scalar-tensor"]


def binary_graph(op, form):
    inits = {}
    nodes = []
    if form == "tensor-tensor":
        nodes.append(TRANSPOSED)
        a, b = "x", "t"
    elif form == "tensor-broadcast-tensor":
        node, inits = first_channel()
        nodes.append(node)
        a, b = "x", "s"
    elif form in ("tensor-constant", "constant-tensor"):
        inits["c"] = CHANNEL
        a, b = ("x", "c") if form == "tensor-constant" else ("c", "x")
    else:
        inits["c"] = np.array(1.75, np.float32)
        a, b = ("x", "c") if form == "tensor-scalar" else ("c", "x")
    nodes.append(N(op, [a, b], ["y"]))
    return nodes, inits


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("op, version", BINARY)
def test_binary(tmp_path, op, version, form):
    opset = opset_for(op, version)
    nodes, inits = binary_graph(op, form)
    make = positive if op == "Div" and form in ("tensor-broadcast-tensor", "constant-tensor", "scalar-tensor") \
        else normal
    check(tmp_path, nodes, SHAPE, opset, inits, make=make)


@pytest.mark.parametrize("form", ["tensor-tensor", "tensor-broadcast-tensor", "constant-tensor"])
def test_div_gradient(tmp_path, form):
    nodes, inits = binary_graph("Div", form)
    grad_against_ort(tmp_path, nodes, (1, C, 2, 2), 14, inits, make=lambda r, s: r.uniform(0.5, 2.0, s))


def shape_chain(op, a, b):
    """Slice of x on its width, from 0 to end = op(a, b) computed on int64 constants (the input's
    width folded per shape when `a` is "W")."""
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W"], axis=0),
             N(op, [a, b], ["end"]), N("Slice", ["x", "zero", "end", "three"], ["y"])]
    return nodes, {"three": np.array([3], np.int64), "zero": np.array([0], np.int64)}


@pytest.mark.parametrize("op, a, b, width", [
    ("Add", "W", "minus3", 5), ("Sub", "W", "two", 5), ("Mul", "W", "minus1", 5), ("Div", "W", "two", 7),
    ("Div", "minus7", "two", 6), ("Div", "W", "minus1", 6)])
def test_binary_on_shape_arithmetic(tmp_path, op, a, b, width):
    """Integer arithmetic on a shape, folded per input shape (integer Div truncates: -7 / 2 is -3)."""
    nodes, inits = shape_chain(op, a, b)
    inits.update(minus3=np.array([-3], np.int64), two=np.array([2], np.int64), minus1=np.array([-1], np.int64),
                 minus7=np.array([-7], np.int64))
    check(tmp_path, nodes, (1, 2, 3, width), 13, inits)


# ---- Pow ----------------------------------------------------------------------------------------

POW = [("Pow", v) for v in (7, 12, 13, 15)]


EXPONENTS = {"2": np.array(2.0, np.float32), "3": np.array(3.0, np.float32), "0.5": np.array(0.5, np.float32),
             "-1": np.array(-1.0, np.float32), "int-2": np.array(2, np.int64),
             "per-channel": np.array([1.0, 2.0, 0.5], np.float32).reshape(1, C, 1, 1),
             "rank-5-scalar": np.full((1, 1, 1, 1, 1), 2.0, np.float32)}


@pytest.mark.parametrize("op, version, exponent", [(op, v, e) for op, v in POW for e in EXPONENTS
                                                   if v > 7 or e != "int-2"])  # Pow 7: float exponents only
def test_pow(tmp_path, op, version, exponent):
    check(tmp_path, [N("Pow", ["x", "p"], ["y"])], SHAPE, opset_for(op, version), {"p": EXPONENTS[exponent]},
          make=positive)


def test_pow_of_negative_bases_by_integer_exponents(tmp_path):
    for p in (2.0, 3.0):
        check(tmp_path, [N("Pow", ["x", "p"], ["y"])], SHAPE, 15, {"p": np.array(p, np.float32)})


def test_pow_on_constants(tmp_path):
    """W ** 2 on the shape (int64), folded: x[..., :W*W - 20]."""
    nodes, inits = shape_chain("Pow", "W", "two")
    nodes.insert(3, N("Sub", ["end", "twenty"], ["end2"]))
    nodes[-1] = N("Slice", ["x", "zero", "end2", "three"], ["y"])
    inits.update(two=np.array([2], np.int64), twenty=np.array([20], np.int64))
    check(tmp_path, nodes, (1, 2, 3, 5), 15, inits)


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5])
def test_pow_gradient(tmp_path, exponent):
    grad_against_ort(tmp_path, [N("Pow", ["x", "p"], ["y"])], (1, C, 2, 2), 15, {"p": np.array(exponent)},
                     make=lambda r, s: r.uniform(0.5, 2.0, s))


def test_pow_of_an_exponent_from_the_image_is_refused(tmp_path):
    path = save(tmp_path, [N("Pow", ["c", "x"], ["y"])], SHAPE, 15, {"c": np.array(2.0, np.float32)})
    with pytest.raises(OnnxError, match="exponent"):
        load(path, len(SHAPE))(sl.tensor(positive(np.random.default_rng(0), SHAPE)))


# ---- elementwise unary --------------------------------------------------------------------------

UNARY = [(op, v) for op in ("Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal") for v in (6, 13)] + \
    [("Erf", 9), ("Erf", 13)]


@pytest.mark.parametrize("op, version", UNARY)
def test_unary(tmp_path, op, version):
    make = positive if op in ("Sqrt", "Log", "Reciprocal") else normal
    check(tmp_path, [N(op, ["x"], ["y"])], SHAPE, opset_for(op, version), make=make)


@pytest.mark.parametrize("op", ["Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal"])
def test_unary_gradient(tmp_path, op):
    grad_against_ort(tmp_path, [N(op, ["x"], ["y"])], (1, 2, 2, 2), 13, make=lambda r, s: r.uniform(0.5, 2.0, s) *
                     (1 if op in ("Sqrt", "Log") else r.choice([-1, 1], s)))


def test_erf_gradient(tmp_path):
    """onnxruntime has no float64 Erf: the gradient against erf's derivative 2/sqrt(pi) exp(-x^2),
    in float64 on a float64 input (our model computes in the input's dtype)."""
    path = save(tmp_path, [N("Erf", ["x"], ["y"])], (1, 2, 3, 3), 13)
    rng = np.random.default_rng(2)
    x, v = rng.standard_normal((1, 2, 3, 3)) * 1.5, rng.standard_normal((1, 2, 3, 3))
    y, g = our_grad(path, x, v)
    np.testing.assert_allclose(y, np.vectorize(math.erf)(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g, v * 2 / math.sqrt(math.pi) * np.exp(-x * x), rtol=1e-12, atol=1e-14)


ROUNDING = [(op, v) for op in ("Floor", "Ceil") for v in (6, 13)]


@pytest.mark.parametrize("op, version", ROUNDING)
def test_rounding_on_shape_arithmetic(tmp_path, op, version):
    """Floor and Ceil on a float shape (W * 0.5, folded per shape) as exporters write a scale's size."""
    opset = opset_for(op, version)
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W"], axis=0),
             N("Cast", ["W"], ["Wf"], to=TensorProto.FLOAT), N("Mul", ["Wf", "half"], ["Wh"]),
             N(op, ["Wh"], ["Wr"]), N("Cast", ["Wr"], ["end"], to=TensorProto.INT64),
             N("Slice", ["x", "zero", "end", "three"], ["y"])]
    inits = {"three": np.array([3], np.int64), "zero": np.array([0], np.int64), "half": np.array([0.5], np.float32)}
    check(tmp_path, nodes, (1, 2, 3, 7), opset, inits)


@pytest.mark.parametrize("op", ["Floor", "Ceil"])
def test_rounding_of_the_image_is_refused(tmp_path, op):
    path = save(tmp_path, [N(op, ["x"], ["y"])], SHAPE, 13)
    with pytest.raises(OnnxError, match=op):
        load(path, len(SHAPE))(sl.tensor(normal(np.random.default_rng(0), SHAPE)))


# ---- variadic -----------------------------------------------------------------------------------

VARIADIC = [("Max", 8), ("Max", 12), ("Max", 13), ("Min", 8), ("Min", 12), ("Min", 13), ("Sum", 8), ("Sum", 13),
            ("Mean", 8), ("Mean", 13)]


@pytest.mark.parametrize("inputs", [("x",), ("x", "t"), ("x", "c"), ("c", "x", "s"), ("x", "t", "c", "s")])
@pytest.mark.parametrize("op, version", VARIADIC)
def test_variadic(tmp_path, op, version, inputs):
    opset = opset_for(op, version)
    slice_node, inits = first_channel()
    inits["c"] = CHANNEL
    check(tmp_path, [TRANSPOSED, slice_node, N(op, list(inputs), ["y"])], SHAPE, opset, inits)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum"])
def test_variadic_gradient(tmp_path, op):
    slice_node, inits = first_channel()
    inits["c"] = CHANNEL
    grad_against_ort(tmp_path, [TRANSPOSED, slice_node, N(op, ["x", "t", "c", "s"], ["y"])], (1, C, 2, 2), 13, inits)


def test_mean_gradient(tmp_path):
    """onnxruntime has no float64 Mean: Mean is affine, its gradient from onnxruntime's float32 outputs on
    basis vectors."""
    slice_node, inits = first_channel()
    inits["c"] = CHANNEL
    path = save(tmp_path, [TRANSPOSED, slice_node, N("Mean", ["x", "t", "c", "s"], ["y"])], (1, C, 2, 2), 13, inits)
    rng = np.random.default_rng(3)
    x = normal(rng, (1, C, 2, 2))
    v = rng.standard_normal((1, C, 2, 2)).astype(np.float32)
    _, g = our_grad(path, x, v)
    np.testing.assert_allclose(g, affine_grad(path, x, v), rtol=1e-5, atol=1e-6)


def test_max_min_on_shape_arithmetic(tmp_path):
    """Max(W - 9, 0) and Min(W, 4) on the shape, as SAME padding's amounts are written."""
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W"], axis=0),
             N("Sub", ["W", "nine"], ["d"]), N("Max", ["d", "zero"], ["pad"]), N("Min", ["W", "four"], ["end"]),
             N("Slice", ["x", "pad", "end", "three"], ["y"])]
    inits = {"three": np.array([3], np.int64), "zero": np.array([0], np.int64), "nine": np.array([9], np.int64),
             "four": np.array([4], np.int64)}
    check(tmp_path, nodes, (1, 2, 3, 7), 13, inits)
    check(tmp_path, nodes, (1, 2, 3, 11), 13, inits)


# ---- comparisons, Not, Where ----------------------------------------------------------------------

COMPARE = [("Equal", 11), ("Equal", 13), ("Equal", 19), ("Greater", 9), ("Greater", 13), ("Less", 9), ("Less", 13)]


@pytest.mark.parametrize("form", ["tensor-tensor", "tensor-constant", "constant-tensor"])
@pytest.mark.parametrize("op, version", COMPARE)
def test_comparison_of_the_image_selects_by_where(tmp_path, op, version, form):
    """Where(op(a, b), x, -2x): the condition depends on the image's values, so each input gets its own
    (x == x transposed holds on the diagonal)."""
    opset = opset_for(op, version)
    a, b = {"tensor-tensor": ("x", "t"), "tensor-constant": ("x", "c"), "constant-tensor": ("c", "x")}[form]
    c = CHANNEL * 0 if op == "Equal" else CHANNEL * 0.2
    nodes = [TRANSPOSED, N(op, [a, b], ["cond"]), N("Mul", ["x", "m2"], ["other"]),
             N("Where", ["cond", "x", "other"], ["y"])]
    make = normal if op != "Equal" or form == "tensor-tensor" else \
        (lambda r, s: np.where(r.random(s) < 0.5, 0, r.standard_normal(s)).astype(np.float32))
    check(tmp_path, nodes, SHAPE, opset, {"c": c, "m2": np.array(-2.0, np.float32)}, make=make, runs=3)


@pytest.mark.parametrize("op, version", COMPARE)
def test_comparison_as_a_mask(tmp_path, op, version):
    """Cast(op(x, 0)) * x: a comparison's output as a float mask."""
    opset = opset_for(op, version)
    nodes = [N(op, ["x", "zero"], ["cond"]), N("Cast", ["cond"], ["mask"], to=TensorProto.FLOAT),
             N("Mul", ["mask", "x"], ["y"])]
    make = (lambda r, s: np.where(r.random(s) < 0.5, 0, r.standard_normal(s)).astype(np.float32))
    check(tmp_path, nodes, SHAPE, opset, {"zero": np.array(0.0, np.float32)}, make=make, runs=3)


@pytest.mark.parametrize("op, version", COMPARE)
def test_comparison_on_shape_arithmetic(tmp_path, op, version):
    """Where(op(W, 5), W, 2) as the slice's end: on the shape, folded per input shape."""
    opset = opset_for(op, version)
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W"], axis=0),
             N(op, ["W", "five"], ["cond"]), N("Where", ["cond", "W", "two"], ["end"]),
             N("Slice", ["x", "zero", "end", "three"], ["y"])]
    inits = {"three": np.array([3], np.int64), "zero": np.array([0], np.int64), "five": np.array([5], np.int64),
             "two": np.array([2], np.int64)}
    for width in (4, 5, 6):
        check(tmp_path, nodes, (1, 2, 3, width), opset, inits, runs=1)


def test_not(tmp_path):
    """Not(Less(x, 0.3)) selecting, and Not on a constant (Not(Equal(W, 5)) choosing the slice's end)."""
    nodes = [N("Less", ["x", "c"], ["lt"]), N("Not", ["lt"], ["cond"]), N("Where", ["cond", "x", "zero"], ["y"])]
    check(tmp_path, nodes, SHAPE, 13, {"c": np.array(0.3, np.float32), "zero": np.array(0.0, np.float32)}, runs=3)
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "three"], ["W"], axis=0),
             N("Equal", ["W", "five"], ["eq"]), N("Not", ["eq"], ["cond"]), N("Where", ["cond", "W", "two"], ["end"]),
             N("Slice", ["x", "zero", "end", "three"], ["y"])]
    inits = {"three": np.array([3], np.int64), "zero": np.array([0], np.int64), "five": np.array([5], np.int64),
             "two": np.array([2], np.int64)}
    for width in (4, 5):
        check(tmp_path, nodes, (1, 2, 3, width), 13, inits, runs=1)


WHERE = [("Where", 9), ("Where", 16)]
WHERE_FORMS = {  # k, kc: constant conditions; g: x > 0; t: x transposed; c, s_scalar: constant branches
    "constant-condition": ["k", "x", "t"],
    "constant-condition-constant-branch": ["k", "x", "c"],
    "image-condition": ["g", "x", "t"],
    "image-condition-constant-branches": ["g", "c", "s_scalar"],
    "image-condition-constant-first": ["g", "c", "x"],
    "broadcast-condition": ["kc", "x", "s_scalar"],
}


@pytest.mark.parametrize("form", list(WHERE_FORMS))
@pytest.mark.parametrize("op, version", WHERE)
def test_where(tmp_path, op, version, form):
    opset = opset_for(op, version)
    rng = np.random.default_rng(5)
    inits = {"k": rng.random((1, 1, 4, 4)) < 0.5, "kc": np.array([True, False, True]).reshape(1, C, 1, 1),
             "c": CHANNEL, "s_scalar": np.array(-0.25, np.float32), "zero": np.array(0.0, np.float32)}
    nodes = [TRANSPOSED, N("Greater", ["x", "zero"], ["g"]), N("Where", WHERE_FORMS[form], ["y"])]
    check(tmp_path, nodes, SHAPE, opset, inits, runs=3)


@pytest.mark.parametrize("condition", ["constant", "image"])
def test_where_gradient(tmp_path, condition):
    """Where picks: the gradient goes to the branch picked, x's and t's (x transposed) summed."""
    rng = np.random.default_rng(6)
    inits = {"k": rng.random((1, 1, 3, 3)) < 0.5, "zero": np.array(0.0)}
    nodes = [TRANSPOSED, N("Greater", ["x", "zero"], ["g"]),
             N("Where", ["k" if condition == "constant" else "g", "x", "t"], ["y"])]
    grad_against_ort(tmp_path, nodes, (1, 2, 3, 3), 16, inits)


# ---- reductions ---------------------------------------------------------------------------------

REDUCE = [("ReduceMean", 11), ("ReduceMean", 13), ("ReduceMean", 18), ("ReduceSum", 11), ("ReduceSum", 13),
          ("ReduceMax", 11), ("ReduceMax", 12), ("ReduceMax", 13), ("ReduceMax", 18), ("ReduceMax", 20),
          ("ReduceMin", 11), ("ReduceMin", 12), ("ReduceMin", 13), ("ReduceMin", 18), ("ReduceMin", 20),
          ("ReduceL2", 11), ("ReduceL2", 13), ("ReduceL2", 18)]
AXES_FROM_INPUT = {("ReduceMean", 18), ("ReduceSum", 13), ("ReduceMax", 18), ("ReduceMax", 20), ("ReduceMin", 18),
                   ("ReduceMin", 20), ("ReduceL2", 18)}


def reduce_node(op, version, axes, keepdims, noop=None):
    inits, extra = {}, {}
    if noop is not None:
        extra["noop_with_empty_axes"] = noop
    if (op, version) in AXES_FROM_INPUT:
        inputs = ["x"]
        if axes is not None:
            inits["axes"] = np.array(axes, np.int64)
            inputs.append("axes")
        return N(op, inputs, ["y"], keepdims=keepdims, **extra), inits
    if axes is None:
        return N(op, ["x"], ["y"], keepdims=keepdims), inits
    return N(op, ["x"], ["y"], keepdims=keepdims, axes=axes), inits


@pytest.mark.parametrize("axes, keepdims", [((1,), 1), ((2, 3), 1), ((-1, -2), 0), ((0, 2), 0), (None, 1),
                                            (None, 0)])
@pytest.mark.parametrize("op, version", REDUCE)
def test_reduce(tmp_path, op, version, axes, keepdims):
    node, inits = reduce_node(op, version, None if axes is None else list(axes), keepdims)
    check(tmp_path, [node], SHAPE, opset_for(op, version), inits)


@pytest.mark.parametrize("op, version", sorted(AXES_FROM_INPUT))
def test_reduce_noop_with_empty_axes(tmp_path, op, version):
    """No axes and noop_with_empty_axes=1: a reduction over no axis, the input as it is (ReduceL2: |x|,
    its square root of squares without the sum)."""
    node, inits = reduce_node(op, version, None, 1, noop=1)
    check(tmp_path, [node], SHAPE, opset_for(op, version), inits)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2"])
def test_reduce_gradient(tmp_path, op):
    version = {"ReduceSum": 13, "ReduceMax": 20, "ReduceMin": 20}.get(op, 18)
    node, inits = reduce_node(op, version, [1, 3], 0)
    grad_against_ort(tmp_path, [node], (1, C, 2, 3), opset_for(op, version), inits)


@pytest.mark.parametrize("op, version", [("ReduceSum", 13), ("ReduceMax", 18), ("ReduceMin", 13),
                                         ("ReduceMean", 18)])
def test_reduce_on_shape_arithmetic(tmp_path, op, version):
    """A reduction over a shape's entries (H and W) as the slice's end."""
    opset = opset_for(op, version)
    node, inits = reduce_node(op, version, [0], 1)
    node.input[0] = "hw"
    node.output[0] = "red"
    nodes = [N("Shape", ["x"], ["shape"]), N("Gather", ["shape", "hw_at"], ["hw"], axis=0), node,
             N("Cast", ["red"], ["end"], to=TensorProto.INT64), N("Slice", ["x", "zero", "end", "three"], ["y"])]
    inits.update(hw_at=np.array([2, 3], np.int64), three=np.array([3], np.int64), zero=np.array([0], np.int64))
    check(tmp_path, nodes, (1, 2, 3, 9), opset, inits, runs=1)


@pytest.mark.parametrize("shape", [(2, 5), (2, 3, 5), (4,)])
def test_inputs_of_other_ranks(tmp_path, shape):
    """An input that is not an image (layout "other": passed as it is) through elementwise ops and a
    reduction over its last axis."""
    nodes = [N("Mul", ["x", "c"], ["m"]), N("Sub", ["m", "x"], ["s"]), N("Erf", ["s"], ["e"]),
             N("ReduceMean", ["e", "axes"], ["y"], keepdims=0)]
    inits = {"c": np.linspace(-1, 2, shape[-1], dtype=np.float32), "axes": np.array([-1], np.int64)}
    model = check(tmp_path, nodes, shape, 18, inits)
    assert model.layout == "other"


# ---- every converter of ops_math has cases --------------------------------------------------------

COVERED = set(BINARY + POW + UNARY + ROUNDING + VARIADIC + COMPARE + WHERE + REDUCE + [("Not", 1)])


def test_every_converter_of_ops_math_is_tested():
    ours = {key for key, build in CONVERTERS.items() if build.__module__ == ops_math.__name__}
    assert ours - COVERED == set()
    assert COVERED - ours == set()
