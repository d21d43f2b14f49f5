"""What the converter tests of test_ops_math.py and test_ops_shape.py share: one node's graph saved
at an opset of the version under test, onnxruntime's session of it, and ours. Import it after
`pytest.importorskip("onnx")` and `("onnxruntime")`."""
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, defs, helper, numpy_helper

from saliency.nn.onnx import load_onnx

IR_VERSION = 10
MAX_OPSET = 25


def opset_for(op, version):
    """An opset whose schema of `op` is `version`: the newest up to 21 (the helper nodes' schemas
    are then their newest), else the oldest."""
    found = []
    for opset in range(7, MAX_OPSET + 1):
        try:
            if defs.get_schema(op, opset).since_version == version:
                found.append(opset)
        except Exception:  # noqa: BLE001: no such operator at this opset
            pass
    assert found, (op, version)
    below = [o for o in found if o <= 21]
    return below[-1] if below else found[0]


def save(tmp_path, nodes, dims, opset, inits=None, outputs=("y",), elem=TensorProto.FLOAT, name="m.onnx"):
    """The graph of `nodes` with input "x" of `dims` and `outputs`, saved in tmp_path; its path."""
    x = helper.make_tensor_value_info("x", elem, dims)
    outs = [helper.make_tensor_value_info(o, elem, None) for o in outputs]
    graph = helper.make_graph(nodes, "g", [x], outs,
                              initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def session(path):
    """onnxruntime's kernels, without its graph rewrites (ORT 1.32 rewrites Gather(x, Range(5, -7, -2))
    into a Slice that keeps 3 of the 6 columns)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def load(path, rank):
    """Our model of the file, an input of `rank` dimensions (4: images)."""
    return load_onnx(path, layout="NCHW" if rank == 4 else None)


def normal(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)
