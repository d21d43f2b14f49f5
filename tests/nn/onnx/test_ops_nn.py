"""The converters of `saliency.nn.onnx.ops_nn` against onnxruntime: one small model per case
(operator, schema version, attributes), its output compared with onnxruntime's on random float32
inputs; the input gradient of a few layers against central differences of onnxruntime's output."""
import zlib
from typing import NamedTuple

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import saliency  # noqa: E402
from saliency.nn.onnx import load_onnx, ops_nn  # noqa: E402
from saliency.nn.onnx.registry import CONVERTERS  # noqa: E402

IR_VERSION = 9
RNG = np.random.default_rng(20240611)
TOL = (1e-5, 1e-5)
# sums of a few dozen float32 products (convolutions, matrix products), accumulated in another
# order than onnxruntime's MLAS kernels: a few float32 ulps of the largest partial sum
SUMS = (1e-5, 3e-5)


class Case(NamedTuple):
    id: str
    op: str
    version: int  # the schema's since_version under test
    opset: int  # the model's opset, at which `op` has that version
    nodes: list
    x_shape: tuple
    inits: dict
    tol: tuple = TOL
    scale: float = 1.0  # of the random input


CASES = []


def add(op, version, opset, label, nodes, x_shape, inits=None, tol=TOL, scale=1.0):
    CASES.append(Case(f"{op}-v{version}-{label}", op, version, opset, nodes, tuple(x_shape), inits or {}, tol, scale))


def node(op, inputs, output="y", **attrs):
    return helper.make_node(op, list(inputs), [output], **attrs)


def rand(*shape, low=None, high=None):
    if low is not None:
        return RNG.uniform(low, high, shape).astype(np.float32)
    return RNG.standard_normal(shape).astype(np.float32)


def model_proto(case, elem=TensorProto.FLOAT):
    inits = [numpy_helper.from_array(v, k) for k, v in case.inits.items()]
    graph = helper.make_graph(case.nodes, "g", [helper.make_tensor_value_info("x", elem, list(case.x_shape))],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)], ir_version=IR_VERSION)


def save(case, path, **kw):
    onnx.save(model_proto(case, **kw), str(path))
    return str(path)


def session(path):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def load(case, path):
    return load_onnx(path, layout="NCHW" if len(case.x_shape) == 4 else None)


# ---- convolutions ---------------------------------------------------------------------------

CONV_VERSIONS = ((1, 10), (11, 13), (22, 22))


def conv_cases():
    x = (2, 4, 7, 8)
    sets = [
        ("plain", {}, (3, 4, 3, 3), True),
        ("no-bias", {}, (3, 4, 3, 3), False),
        ("groups2", {"group": 2}, (6, 2, 3, 3), True),
        ("depthwise", {"group": 4}, (4, 1, 3, 3), True),
        ("strides", {"strides": [2, 3]}, (3, 4, 3, 3), True),
        ("dilations", {"dilations": [2, 1]}, (3, 4, 3, 3), True),
        ("sym-pads", {"pads": [1, 2, 1, 2]}, (3, 4, 3, 3), True),
        ("asym-pads", {"pads": [0, 1, 2, 1]}, (3, 4, 3, 3), True),
        ("asym-pads-strides-groups", {"pads": [2, 0, 1, 1], "strides": [2, 2], "group": 2}, (4, 2, 3, 2), True),
        ("same-upper", {"auto_pad": "SAME_UPPER"}, (3, 4, 4, 2), True),
        ("same-lower", {"auto_pad": "SAME_LOWER"}, (3, 4, 4, 2), True),
        ("same-upper-strides", {"auto_pad": "SAME_UPPER", "strides": [2, 3]}, (3, 4, 4, 3), True),
        ("same-lower-strides", {"auto_pad": "SAME_LOWER", "strides": [2, 1]},
         (3, 4, 4, 3), True),
        ("valid", {"auto_pad": "VALID", "strides": [2, 2]}, (3, 4, 3, 3), True),
        ("kernel-shape", {"kernel_shape": [3, 2], "pads": [1, 0, 1, 0]}, (3, 4, 3, 2), True),
    ]
    for version, opset in CONV_VERSIONS:
        for label, attrs, w, bias in sets:
            inits = {"W": rand(*w)}
            if bias:
                inits["B"] = rand(w[0])
            add("Conv", version, opset, label, [node("Conv", ["x", *inits], **attrs)], x, inits, SUMS)


def conv_transpose_cases():
    x = (2, 4, 5, 6)
    sets = [
        ("plain", {}, (4, 3, 3, 3), True),
        ("no-bias", {}, (4, 3, 3, 3), False),
        ("strides", {"strides": [2, 3]}, (4, 3, 3, 3), True),
        ("strides-sym-pads", {"strides": [2, 2], "pads": [1, 2, 1, 2]}, (4, 3, 3, 4), True),
        ("asym-pads", {"strides": [2, 2], "pads": [0, 1, 2, 1]}, (4, 3, 3, 3), True),
        ("output-padding", {"strides": [2, 3], "output_padding": [1, 2]}, (4, 3, 3, 3), True),
        ("output-padding-pads", {"strides": [3, 2], "pads": [1, 1, 1, 1], "output_padding": [2, 1]},
         (4, 3, 3, 3), True),
        ("output-padding-asym-pads", {"strides": [2, 2], "pads": [1, 0, 0, 2], "output_padding": [1, 1]},
         (4, 3, 3, 3), True),
        ("output-shape", {"strides": [2, 2], "output_shape": [10, 12]}, (4, 3, 3, 3), True),
        ("output-shape-odd-cut", {"strides": [2, 2], "output_shape": [9, 11]}, (4, 3, 3, 3), True),
        ("output-shape-ignores-pads", {"strides": [2, 2], "output_shape": [10, 12], "pads": [1, 1, 1, 1]},
         (4, 3, 3, 3), True),
        ("output-shape-grows", {"strides": [2, 2], "output_shape": [12, 14]}, (4, 3, 3, 3), True),
        ("output-shape-grows-one-axis", {"strides": [2, 3], "output_shape": [12, 17]}, (4, 3, 3, 3), True),
        ("same-upper-output-shape", {"strides": [2, 2], "auto_pad": "SAME_UPPER", "output_shape": [9, 11]},
         (4, 3, 3, 3), True),
        ("same-lower-output-shape", {"strides": [2, 2], "auto_pad": "SAME_LOWER", "output_shape": [9, 12]},
         (4, 3, 3, 3), True),
        ("same-lower-output-shape-grows", {"strides": [2, 2], "auto_pad": "SAME_LOWER", "output_shape": [12, 14]},
         (4, 3, 3, 3), True),
        ("same-upper-output-padding", {"strides": [3, 2], "auto_pad": "SAME_UPPER", "output_padding": [1, 1]},
         (4, 3, 2, 2), True),
        ("same-upper", {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, (4, 3, 3, 4), True),
        ("same-lower", {"strides": [2, 2], "auto_pad": "SAME_LOWER"}, (4, 3, 3, 4), True),
        ("groups2", {"group": 2, "strides": [2, 1]}, (4, 2, 3, 3), True),
        ("groups2-asym-pads", {"group": 2, "strides": [2, 2], "pads": [0, 2, 1, 0]}, (4, 3, 3, 3), True),
        ("dilations", {"dilations": [2, 1], "strides": [1, 2]}, (4, 3, 3, 3), True),
        ("dilations-pads", {"dilations": [2, 2], "strides": [2, 2], "pads": [1, 1, 2, 0]}, (4, 3, 3, 3), True),
        ("kernel-shape", {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0]}, (4, 3, 3, 2), True),
    ]
    for version, opset in CONV_VERSIONS:
        for label, attrs, w, bias in sets:
            inits = {"W": rand(*w)}
            if bias:
                inits["B"] = rand(w[1] * attrs.get("group", 1))
            add("ConvTranspose", version, opset, label, [node("ConvTranspose", ["x", *inits], **attrs)], x, inits,
                SUMS)


# ---- Gemm and MatMul ------------------------------------------------------------------------

def gemm_cases():
    for version, opset in ((9, 9), (11, 11), (13, 13)):
        for label, attrs, x, b, c in [
            ("bias-1d", {}, (3, 4), (4, 5), (5,)),
            ("bias-1xn", {}, (3, 4), (4, 5), (1, 5)),
            ("bias-scalar", {}, (3, 4), (4, 5), ()),
            ("full-c", {}, (3, 4), (4, 5), (3, 5)),
            ("column-c", {}, (3, 4), (4, 5), (3, 1)),
            ("transb", {"transB": 1}, (3, 4), (5, 4), (5,)),
            ("transa", {"transA": 1}, (4, 3), (4, 5), (5,)),
            ("transa-transb-alpha-beta", {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, (4, 3), (5, 4),
             (1, 5)),
            ("alpha-beta-full-c", {"alpha": -1.5, "beta": 0.25}, (3, 4), (4, 5), (3, 5)),
            ("batch-1-full-c", {"alpha": 2.0, "beta": 3.0}, (1, 4), (4, 5), (1, 5)),
        ]:
            inits = {"B": rand(*b), "C": rand(*c)}
            add("Gemm", version, opset, label, [node("Gemm", ["x", "B", "C"], **attrs)], x, inits, SUMS)
        if version >= 11:
            add("Gemm", version, opset, "no-c", [node("Gemm", ["x", "B"], transB=1, alpha=3.0)], (3, 4),
                {"B": rand(5, 4)}, SUMS)
        add("Gemm", version, opset, "b-computed",
            [node("Transpose", ["x"], "xt", perm=[1, 0]), node("Gemm", ["x", "xt", "C"], alpha=0.5, beta=2.0)],
            (3, 4), {"C": rand(3, 3)}, SUMS)
        add("Gemm", version, opset, "b-computed-transb",
            [node("Gemm", ["x", "x", "C"], transB=1)], (3, 4), {"C": rand(3)}, SUMS)
        add("Gemm", version, opset, "a-constant",
            [node("Gemm", ["A", "x", "C"], transB=1, alpha=0.5)], (3, 4), {"A": rand(2, 4), "C": rand(3)}, SUMS)
        add("Gemm", version, opset, "c-computed",
            [node("Transpose", ["x"], "xt", perm=[1, 0]), node("MatMul", ["x", "xt"], "c"),
             node("Gemm", ["x", "B", "c"], beta=0.5)], (3, 4), {"B": rand(4, 3)}, SUMS)
        add("Gemm", version, opset, "via-reshape",
            [node("Reshape", ["x", "shape"], "x2"), node("Gemm", ["x2", "B", "C"], transB=1)], (2, 3, 2, 2),
            {"shape": np.array([2, 12], np.int64), "B": rand(5, 12), "C": rand(5)}, SUMS)


def matmul_cases():
    for version, opset in ((1, 8), (9, 9), (13, 13)):
        add("MatMul", version, opset, "const-2d", [node("MatMul", ["x", "W"])], (3, 4), {"W": rand(4, 5)}, SUMS)
        add("MatMul", version, opset, "const-3d-input", [node("MatMul", ["x", "W"])], (2, 3, 4), {"W": rand(4, 5)},
            SUMS)
        add("MatMul", version, opset, "const-4d-input", [node("MatMul", ["x", "W"])], (2, 3, 4, 5),
            {"W": rand(5, 2)}, SUMS)
        add("MatMul", version, opset, "const-batched", [node("MatMul", ["x", "W"])], (2, 3, 4), {"W": rand(2, 4, 5)},
            SUMS)
        add("MatMul", version, opset, "const-vector", [node("MatMul", ["x", "W"])], (3, 4), {"W": rand(4)}, SUMS)
        add("MatMul", version, opset, "const-left", [node("MatMul", ["W", "x"])], (3, 4), {"W": rand(2, 3)}, SUMS)
        add("MatMul", version, opset, "x-xt",
            [node("Transpose", ["x"], "xt", perm=[1, 0]), node("MatMul", ["x", "xt"])], (3, 4), {}, SUMS)
        add("MatMul", version, opset, "x-xt-3d",
            [node("Transpose", ["x"], "xt", perm=[0, 2, 1]), node("MatMul", ["x", "xt"])], (2, 3, 4), {}, SUMS)
        add("MatMul", version, opset, "x-xt-4d",
            [node("Transpose", ["x"], "xt", perm=[0, 1, 3, 2]), node("MatMul", ["xt", "x"])], (2, 3, 4, 5), {},
            SUMS)


# ---- normalisations -------------------------------------------------------------------------

def norm_cases():
    for version, opset in ((9, 9), (9, 13), (14, 14), (15, 15), (15, 22)):
        for label, shape, eps in (("4d", (2, 3, 4, 5), 1e-5), ("2d", (4, 3), 1e-3), ("3d", (2, 3, 6), 0.1),
                                  ("5d", (2, 3, 2, 3, 2), 1e-5), ("zero-variance", (2, 3, 4, 5), 1e-2)):
            c = shape[1]
            v = np.zeros(c, np.float32) if label == "zero-variance" else rand(c, low=0.5, high=2.0)
            inits = {"s": rand(c), "b": rand(c), "m": rand(c), "v": v}
            add("BatchNormalization", version, opset, f"{label}-opset{opset}",
                [node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=eps)], shape, inits)
    for version, opset in ((6, 7), (6, 13), (22, 22)):
        add("InstanceNormalization", version, opset, f"opset{opset}",
            [node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-3)], (2, 3, 4, 5),
            {"s": rand(3), "b": rand(3)})
        add("InstanceNormalization", version, opset, f"one-channel-opset{opset}",
            [node("InstanceNormalization", ["x", "s", "b"])], (2, 1, 4, 5), {"s": rand(1), "b": rand(1)})
        add("InstanceNormalization", version, opset, f"3d-opset{opset}",
            [node("InstanceNormalization", ["x", "s", "b"])], (2, 3, 6), {"s": rand(3), "b": rand(3)})
    for label, shape, axis, scale, bias in (
            ("axis-1", (2, 3, 5), -1, (5,), (5,)),
            ("axis1", (2, 3, 5), 1, (3, 5), (3, 5)),
            ("axis-2", (2, 3, 5), -2, (3, 5), (3, 5)),
            ("no-bias", (2, 3, 5), -1, (5,), None),
            ("4d-axis2", (2, 3, 4, 5), 2, (4, 5), (4, 5)),
            ("axis0", (2, 3, 5), 0, (2, 3, 5), (2, 3, 5)),
            ("axis1-broadcast-scale", (2, 3, 5), 1, (5,), (1, 5))):
        inits = {"s": rand(*scale)}
        if bias:
            inits["b"] = rand(*bias)
        add("LayerNormalization", 17, 17, label,
            [node("LayerNormalization", ["x", *inits], axis=axis, epsilon=1e-4)], shape, inits)
    add("LayerNormalization", 17, 22, "default-axis-opset22", [node("LayerNormalization", ["x", "s", "b"])],
        (2, 3, 5), {"s": rand(5), "b": rand(5)})
    add("GroupNormalization", 18, 18, "per-group", [node("GroupNormalization", ["x", "s", "b"], num_groups=2)],
        (2, 6, 3, 4), {"s": rand(2), "b": rand(2)})
    add("GroupNormalization", 18, 20, "per-group-eps", [node("GroupNormalization", ["x", "s", "b"], num_groups=3,
                                                             epsilon=1e-2)], (2, 6, 3, 4), {"s": rand(3), "b": rand(3)})
    add("GroupNormalization", 21, 21, "per-channel", [node("GroupNormalization", ["x", "s", "b"], num_groups=2)],
        (2, 6, 3, 4), {"s": rand(6), "b": rand(6)})
    add("GroupNormalization", 21, 22, "per-channel-groups-eq-channels",
        [node("GroupNormalization", ["x", "s", "b"], num_groups=6, epsilon=1e-3)], (2, 6, 3, 4),
        {"s": rand(6), "b": rand(6)})
    add("GroupNormalization", 18, 18, "one-group", [node("GroupNormalization", ["x", "s", "b"], num_groups=1)],
        (2, 6, 3, 4), {"s": rand(1), "b": rand(1)})
    add("GroupNormalization", 18, 18, "groups-eq-channels",
        [node("GroupNormalization", ["x", "s", "b"], num_groups=6)], (2, 6, 3, 4), {"s": rand(6), "b": rand(6)})
    add("GroupNormalization", 18, 18, "3d", [node("GroupNormalization", ["x", "s", "b"], num_groups=3)], (2, 6, 5),
        {"s": rand(3), "b": rand(3)})
    add("GroupNormalization", 21, 21, "3d", [node("GroupNormalization", ["x", "s", "b"], num_groups=3)], (2, 6, 5),
        {"s": rand(6), "b": rand(6)})
    add("GroupNormalization", 21, 21, "one-group", [node("GroupNormalization", ["x", "s", "b"], num_groups=1)],
        (2, 6, 3, 4), {"s": rand(6), "b": rand(6)})


# ---- pooling --------------------------------------------------------------------------------

def pool_cases():
    x = (2, 3, 7, 8)
    common = [
        ("k2s2", {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("k3s1", {"kernel_shape": [3, 3]}),
        ("k3-strides", {"kernel_shape": [3, 2], "strides": [2, 3]}),
        ("sym-pads", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("asym-pads", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]}),
        ("pads-over-half-kernel", {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),
        ("pads-over-half-kernel-asym", {"kernel_shape": [3, 4], "strides": [2, 1], "pads": [2, 0, 1, 3]}),
        ("same-upper", {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
        ("same-lower", {"kernel_shape": [2, 4], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
        ("valid", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ]
    ceil = [
        ("ceil", {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1}),
        ("ceil-sym-pads", {"kernel_shape": [3, 3], "strides": [2, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
        ("ceil-asym-pads", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 0], "ceil_mode": 1}),
        ("ceil-big-pads", {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [2, 2, 2, 2], "ceil_mode": 1}),
        ("ceil-right-pad-only", {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1], "ceil_mode": 1}),
        ("ceil-stride-over-kernel", {"kernel_shape": [2, 2], "strides": [3, 3], "ceil_mode": 1}),
        ("ceil-k5-pads2-s4", {"kernel_shape": [5, 5], "strides": [4, 4], "pads": [2, 2, 2, 2], "ceil_mode": 1}),
        ("ceil-same-upper", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER", "ceil_mode": 1}),
        ("ceil-same-lower", {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "SAME_LOWER", "ceil_mode": 1}),
    ]
    for version, opset in ((8, 8), (10, 10), (11, 11), (12, 13), (22, 22)):
        sets = common + (ceil if version >= 10 else [])
        if version >= 10:
            sets = sets + [("dilations", {"kernel_shape": [2, 2], "dilations": [2, 3]}),
                           ("dilations-pads", {"kernel_shape": [3, 2], "dilations": [2, 2], "pads": [1, 1, 2, 1],
                                               "strides": [2, 1]}),
                           ("dilations-big-pads-ceil", {"kernel_shape": [3, 3], "dilations": [2, 2], "strides": [3, 3],
                                                        "pads": [2, 2, 2, 2], "ceil_mode": 1})]
        for label, attrs in sets:
            add("MaxPool", version, opset, label, [node("MaxPool", ["x"], **attrs)], x)
    for version, opset in ((7, 7), (10, 10), (11, 11), (19, 19), (22, 22)):
        sets = common + (ceil if version >= 10 else [])
        for label, attrs in sets:
            for include in (0, 1):
                add("AveragePool", version, opset, f"{label}-include{include}",
                    [node("AveragePool", ["x"], count_include_pad=include, **attrs)], x)
        add("AveragePool", version, opset, "default-include",
            [node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 0, 1, 2])], x)
    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        for version, opset in ((1, 13), (22, 22)):
            add(op, version, opset, f"opset{opset}", [node(op, ["x"])], x)
            add(op, version, opset, f"3d-opset{opset}", [node(op, ["x"])], (2, 3, 6))


# ---- activations ----------------------------------------------------------------------------

def activation_cases():
    x = (2, 3, 4, 5)
    for op, versions, variants in [
        ("Relu", ((6, 7), (13, 13), (14, 14)), [("default", {})]),
        ("Sigmoid", ((6, 12), (13, 13)), [("default", {})]),
        ("Tanh", ((6, 12), (13, 13)), [("default", {})]),
        ("HardSwish", ((14, 14), (22, 22)), [("default", {})]),
        ("Softplus", ((1, 13), (22, 22)), [("default", {})]),
        ("LeakyRelu", ((6, 13), (16, 16)), [("default", {}), ("alpha", {"alpha": 0.3})]),
        ("Elu", ((6, 13), (22, 22)), [("default", {}), ("alpha", {"alpha": 0.5})]),
        ("Selu", ((6, 13), (22, 22)), [("default", {}), ("alpha-gamma", {"alpha": 1.2, "gamma": 0.8})]),
        ("HardSigmoid", ((6, 13), (22, 22)), [("default", {}), ("torch", {"alpha": 1 / 6, "beta": 0.5}),
                                              ("alpha-beta", {"alpha": 0.3, "beta": 0.4})]),
        ("Gelu", ((20, 20), (20, 22)), [("default", {}), ("none", {"approximate": "none"}),
                                        ("tanh", {"approximate": "tanh"})]),
    ]:
        for version, opset in versions:
            for label, attrs in variants:
                add(op, version, opset, f"{label}-opset{opset}", [node(op, ["x"], **attrs)], x, scale=4.0)
            add(op, version, opset, f"{variants[-1][0]}-saturated-opset{opset}",
                [node(op, ["x"], **variants[-1][1])], x, scale=40.0)
    for version, opset in ((7, 7), (9, 9), (9, 13), (16, 16)):
        for label, shape, slope in (("channel", x, (3, 1, 1)), ("channel-vector-2d", (4, 3), (3,)),
                                    ("scalar", x, (1,)), ("full", x, (3, 4, 5)), ("last-axis", (2, 3, 4, 5), (5,)),
                                    ("last-axis-equal-to-channels", (2, 3, 4, 3), (3,)),
                                    ("rows", x, (4, 1))):
            add("PRelu", version, opset, f"{label}-opset{opset}", [node("PRelu", ["x", "s"])], shape,
                {"s": rand(*slope)}, scale=4.0)
    for version, opset in ((11, 11), (12, 12), (13, 13), (13, 22)):
        for label, inputs, inits in (("min", ["x", "lo"], {"lo": np.array(-0.5, np.float32)}),
                                     ("max", ["x", "", "hi"], {"hi": np.array(0.7, np.float32)}),
                                     ("both", ["x", "lo", "hi"], {"lo": np.array(-0.3, np.float32),
                                                                  "hi": np.array(0.4, np.float32)}),
                                     ("relu", ["x", "lo"], {"lo": np.array(0.0, np.float32)}),
                                     ("relu6", ["x", "lo", "hi"], {"lo": np.array(0.0, np.float32),
                                                                   "hi": np.array(6.0, np.float32)}),
                                     ("neither", ["x"], {}),
                                     ("neither-empty-names", ["x", "", ""], {}),
                                     ("min-over-max", ["x", "lo", "hi"], {"lo": np.array(0.5, np.float32),
                                                                          "hi": np.array(-0.5, np.float32)}),
                                     ("one-element-bounds", ["x", "lo", "hi"], {"lo": np.array([-0.5], np.float32),
                                                                                "hi": np.array([0.7], np.float32)})):
            add("Clip", version, opset, f"{label}-opset{opset}", [node("Clip", inputs)], x, inits, scale=4.0)
    for op in ("Softmax", "LogSoftmax"):
        for version, opset in ((11, 11), (11, 12)):
            for label, attrs, shape in (("default-axis", {}, x), ("axis1", {"axis": 1}, x),
                                        ("axis2", {"axis": 2}, x), ("axis-1", {"axis": -1}, x),
                                        ("axis0", {"axis": 0}, (2, 3, 4)), ("axis1-2d", {"axis": 1}, (3, 5)),
                                        ("axis-2-3d", {"axis": -2}, (2, 3, 4))):
                add(op, version, opset, f"{label}-opset{opset}", [node(op, ["x"], **attrs)], shape)
            add(op, version, opset, f"large-inputs-opset{opset}", [node(op, ["x"], axis=1)], x, scale=100.0)
        for version, opset in ((13, 13), (13, 22)):
            for label, attrs, shape in (("default-axis", {}, x), ("axis1", {"axis": 1}, x),
                                        ("axis-1", {"axis": -1}, x), ("axis0", {"axis": 0}, x),
                                        ("axis-2-3d", {"axis": -2}, (2, 3, 4)), ("axis1-2d", {"axis": 1}, (3, 5))):
                add(op, version, opset, f"{label}-opset{opset}", [node(op, ["x"], **attrs)], shape)
            add(op, version, opset, f"large-inputs-opset{opset}", [node(op, ["x"], axis=1)], x, scale=100.0)


def constant_input_cases():
    """Nodes whose inputs are all constants (a Parameter through a Sigmoid or a Softmax in the exporting
    model): computed once at load, the result added to the image."""
    x = (2, 3, 4, 5)
    for op, version, opset, inputs, attrs, x_shape in [
        ("Relu", 14, 22, {}, {}, x), ("Sigmoid", 13, 22, {}, {}, x), ("Tanh", 13, 22, {}, {}, x),
        ("HardSwish", 22, 22, {}, {}, x), ("Softplus", 22, 22, {}, {}, x), ("LeakyRelu", 16, 22, {}, {}, x),
        ("Elu", 22, 22, {}, {}, x), ("Selu", 22, 22, {}, {}, x), ("HardSigmoid", 22, 22, {}, {}, x),
        ("HardSigmoid", 22, 22, {}, {"alpha": 1 / 6}, x), ("Gelu", 20, 22, {}, {}, x),
        ("Softmax", 13, 22, {}, {"axis": 1}, x), ("LogSoftmax", 13, 22, {}, {}, x),
        ("Softmax", 11, 12, {}, {}, x), ("LogSoftmax", 11, 12, {}, {}, x),
        ("GlobalAveragePool", 22, 22, {}, {}, (2, 3, 1, 1)), ("GlobalMaxPool", 22, 22, {}, {}, (2, 3, 1, 1)),
        ("MaxPool", 22, 22, {}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, x),
        ("AveragePool", 22, 22, {}, {"kernel_shape": [3, 3], "pads": [0, 1, 2, 1]}, x),
        ("PRelu", 16, 22, {"s": rand(3, 1, 1)}, {}, x),
        ("Clip", 13, 22, {"lo": np.array(-0.2, np.float32)}, {}, x),
        ("Conv", 22, 22, {"W": rand(3, 3, 3, 3)}, {"pads": [1, 1, 1, 1]}, x),
        ("ConvTranspose", 22, 22, {"W": rand(3, 3, 3, 3)}, {"pads": [1, 1, 1, 1]}, x),
        ("BatchNormalization", 15, 22, {"s": rand(3), "b": rand(3), "m": rand(3), "v": rand(3, low=0.5, high=2.0)},
         {}, x),
        ("InstanceNormalization", 22, 22, {"s": rand(3), "b": rand(3)}, {}, x),
        ("LayerNormalization", 17, 22, {"s": rand(5), "b": rand(5)}, {}, x),
        ("GroupNormalization", 21, 22, {"s": rand(3), "b": rand(3)}, {"num_groups": 3}, x),
    ]:
        inits = {"C": rand(2, 3, 4, 5), **inputs}
        label = "-".join(["constant-input", *attrs])
        add(op, version, opset, label, [node(op, list(inits), "c", **attrs), node("Add", ["x", "c"])], x_shape, inits,
            SUMS)
    for label, attrs, a in (("gemm", {}, (3, 4)), ("gemm-transa", {"transA": 1}, (4, 3)),
                            ("gemm-transb", {"transB": 1, "alpha": 2.0}, (3, 4))):
        b = rand(5, 4) if attrs.get("transB") else rand(4, 5)
        nodes = [node("Gemm", ["A", "B", "C"], "c", **attrs), node("Add", ["x", "c"])]
        add("Gemm", 13, 13, f"constant-input-{label}", nodes, (3, 5), {"A": rand(*a), "B": b, "C": rand(5)}, SUMS)
    add("MatMul", 13, 13, "constant-input", [node("MatMul", ["A", "B"], "c"), node("Add", ["x", "c"])], (3, 5),
        {"A": rand(3, 4), "B": rand(4, 5)}, SUMS)


conv_cases()
conv_transpose_cases()
gemm_cases()
matmul_cases()
norm_cases()
pool_cases()
activation_cases()
constant_input_cases()
BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "case ids must be unique"


def case_rng(case, stream=0):
    """A generator of the case's own: its inputs do not depend on which tests run."""
    return np.random.default_rng([zlib.crc32(case.id.encode()), stream])


def x_for(case):
    return (case_rng(case).standard_normal(case.x_shape) * case.scale).astype(np.float32)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_matches_onnxruntime(case, tmp_path):
    assert onnx.defs.get_schema(case.op, case.opset).since_version == case.version
    path = save(case, tmp_path / "m.onnx")
    x = x_for(case)
    want = session(path).run(["y"], {"x": x})[0]
    model = load(case, path)
    if len(case.x_shape) != 4:
        assert model.layout == "other"
    got = model(saliency.tensor(x)).numpy()
    assert got.shape == want.shape
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=case.tol[0], atol=case.tol[1])


def test_every_converter_of_ops_nn_has_a_case():
    ours = {key for key, build in CONVERTERS.items() if build.__module__ == ops_nn.__name__}
    assert ours, "no converter of ops_nn found in the registry"
    missing = ours - {(c.op, c.version) for c in CASES}
    assert not missing, f"converters of ops_nn without a test case: {sorted(missing)}"


# ---- input gradients ------------------------------------------------------------------------

GRAD_CASES = [
    "Conv-v11-groups2", "Conv-v11-asym-pads-strides-groups", "Conv-v22-same-lower-strides",
    "Conv-v1-same-upper", "Conv-v11-no-bias",
    "ConvTranspose-v11-plain", "ConvTranspose-v11-asym-pads", "ConvTranspose-v11-output-padding-asym-pads",
    "ConvTranspose-v22-output-shape-odd-cut", "ConvTranspose-v11-same-lower", "ConvTranspose-v11-groups2",
    "ConvTranspose-v11-output-shape-grows", "ConvTranspose-v1-dilations-pads",
    "Gemm-v13-bias-1d", "Gemm-v13-transa-transb-alpha-beta", "Gemm-v11-alpha-beta-full-c", "Gemm-v13-b-computed",
    "Gemm-v11-b-computed-transb",
    "MaxPool-v12-asym-pads", "MaxPool-v12-pads-over-half-kernel-asym", "MaxPool-v12-ceil-asym-pads",
    "MaxPool-v12-same-lower", "MaxPool-v12-dilations-pads", "MaxPool-v8-sym-pads", "MaxPool-v22-ceil-big-pads",
    "MaxPool-v10-ceil-right-pad-only",
    "AveragePool-v19-asym-pads-include0", "AveragePool-v19-asym-pads-include1",
    "AveragePool-v11-pads-over-half-kernel-asym-include0", "AveragePool-v11-ceil-sym-pads-include0",
    "AveragePool-v11-ceil-big-pads-include1", "AveragePool-v22-same-upper-include0",
    "AveragePool-v7-sym-pads-include0", "AveragePool-v19-ceil-right-pad-only-include0",
    "AveragePool-v22-ceil-k5-pads2-s4-include1", "AveragePool-v11-ceil-stride-over-kernel-include0",
]


def reference_vjp(case, tmp_path, x, v):
    """v . J at x, J by central differences of onnxruntime's output, one input element at a time.

    The convolutions, Gemm and AveragePool are affine in x (Gemm of x by x's transpose quadratic): a
    central difference is exact for them at any step, so the step is 1 and float32's rounding of the
    outputs (1e-7 of their size) is the only error. MaxPool is piecewise linear, run in float64 with a
    step of 1e-6 (random inputs: no two values of a window within 1e-6 of each other)."""
    if case.op == "MaxPool":
        sess, h, dtype = session(save(case, tmp_path / "m64.onnx", elem=TensorProto.DOUBLE)), 1e-6, np.float64
    else:
        sess, h, dtype = session(save(case, tmp_path / "m.onnx")), 1.0, np.float32
    base = x.astype(dtype)
    grad = np.zeros(x.size)
    for i in range(x.size):
        plus, minus = base.copy(), base.copy()
        plus.flat[i] += h
        minus.flat[i] -= h
        diff = sess.run(["y"], {"x": plus})[0].astype(np.float64) - sess.run(["y"], {"x": minus})[0]
        grad[i] = np.sum(diff * v) / (2 * h)
    return grad.reshape(x.shape)


@pytest.mark.parametrize("case_id", GRAD_CASES)
def test_input_gradient(case_id, tmp_path):
    case = BY_ID[case_id]
    case = case._replace(x_shape=(1,) + case.x_shape[1:]) if len(case.x_shape) == 4 else case
    path = save(case, tmp_path / "m.onnx")
    x0 = x_for(case)
    model = load(case, path)
    x = saliency.tensor(x0, requires_grad=True)
    y = model(x)
    v = case_rng(case, 1).standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(saliency.tensor(v))
    want = reference_vjp(case, tmp_path, x0, v.astype(np.float64))
    # a sum of a few dozen products of float32 values (and of the reference's float32 rounding)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-4, atol=1e-4)


# ---- where onnxruntime departs from the ONNX specification -------------------------------------

def spec_cases():
    """Cases onnxruntime 1.32 refuses or computes otherwise than the ONNX operator specification (and
    its reference implementation, onnx.reference): SAME padding with a dilated kernel, which
    onnxruntime refuses for Conv and pads as if undilated for MaxPool (a 7x8 input, stride 1, gives
    5x6, not 7x8), and a SAME ConvTranspose whose stride is larger than its kernel, which onnxruntime
    crops to the transposed convolution's own size instead of input x stride."""
    out = []
    for label, auto, attrs in (
            ("same-upper-dilations", "SAME_UPPER", {"kernel_shape": [3, 3], "dilations": [2, 2]}),
            ("same-lower-dilations", "SAME_LOWER", {"kernel_shape": [3, 3], "dilations": [2, 2]}),
            ("same-upper-dilations-strides", "SAME_UPPER", {"kernel_shape": [3, 2], "dilations": [2, 3],
                                                            "strides": [2, 2]})):
        out.append(Case(f"MaxPool-v12-{label}", "MaxPool", 12, 13,
                        [node("MaxPool", ["x"], auto_pad=auto, **attrs)], (2, 3, 7, 8), {}))
    for auto in ("SAME_UPPER", "SAME_LOWER"):
        for label, attrs, w in (("dilations", {"dilations": [2, 2]}, (3, 4, 3, 3)),
                                ("dilations-strides", {"dilations": [2, 3], "strides": [2, 2]}, (3, 4, 3, 2)),
                                ("dilations-stride-over-kernel", {"dilations": [1, 2], "strides": [3, 1]},
                                 (3, 4, 2, 2))):
            out.append(Case(f"Conv-v11-{auto.lower()}-{label}", "Conv", 11, 13,
                            [node("Conv", ["x", "W", "B"], auto_pad=auto, **attrs)], (2, 4, 7, 8),
                            {"W": rand(*w), "B": rand(3)}, SUMS))
    for auto in ("SAME_UPPER", "SAME_LOWER"):
        for label, attrs in (("stride-over-kernel", {"strides": [3, 3]}),
                             ("stride-over-kernel-dilations", {"strides": [3, 2], "dilations": [1, 2]})):
            out.append(Case(f"ConvTranspose-v11-{auto.lower()}-{label}", "ConvTranspose", 11, 13,
                            [node("ConvTranspose", ["x", "W", "B"], auto_pad=auto, **attrs)], (2, 4, 5, 6),
                            {"W": rand(4, 3, 2, 2), "B": rand(3)}, SUMS))
    return out


SPEC_CASES = spec_cases()


@pytest.mark.parametrize("case", SPEC_CASES, ids=[c.id for c in SPEC_CASES])
def test_matches_the_onnx_reference(case, tmp_path):
    from onnx.reference import ReferenceEvaluator

    path = save(case, tmp_path / "m.onnx")
    x = x_for(case)
    want = ReferenceEvaluator(model_proto(case)).run(None, {"x": x})[0]
    got = load(case, path)(saliency.tensor(x)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=case.tol[0], atol=case.tol[1])


# ---- what the converters refuse --------------------------------------------------------------

REFUSED = [
    ("conv-1d", [node("Conv", ["x", "W"])], (2, 4, 7), {"W": rand(3, 4, 3)}, "1-D kernel"),
    ("max-pool-1d", [node("MaxPool", ["x"], kernel_shape=[3])], (2, 4, 7), {}, "pools over 1 axes"),
    ("max-pool-indices", [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])], (2, 3, 6, 6), {},
     "indices"),
    ("average-pool-dilations", [node("AveragePool", ["x"], kernel_shape=[2, 2], dilations=[2, 2])], (2, 3, 6, 6),
     {}, "dilations"),
    ("conv-transpose-output-shape-a-stride-larger",
     [node("ConvTranspose", ["x", "W"], strides=[2, 2], output_shape=[13, 15])], (2, 4, 5, 6),
     {"W": rand(4, 3, 3, 3)}, "larger"),
    ("clip-vector-bound", [node("Clip", ["x", "lo"])], (2, 3, 4, 5), {"lo": rand(2)}, "scalar"),
]


@pytest.mark.parametrize("label, nodes, x_shape, inits, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_an_onnx_error(label, nodes, x_shape, inits, words, tmp_path):
    from saliency.nn.onnx import OnnxError

    case = Case(label, nodes[0].op_type, 0, 22 if nodes[0].op_type == "AveragePool" else 13, nodes, x_shape, inits)
    path = save(case, tmp_path / "m.onnx")
    with pytest.raises(OnnxError, match=words):
        model = load(case, path)
        model(saliency.tensor(x_for(case)))
