"""Every architecture of tests/realmodels/archs/ exported to ONNX by PyTorch's two exporters (the
TorchScript one and the dynamo one) at two opsets each, loaded with `saliency.nn.load_onnx`: its
outputs equal onnxruntime's (float32), and its input gradients (class seeds of a classifier; the
all-ones and two pixel seeds of a dense model) equal PyTorch's on the same weights (float64).

Needs torch, onnx and onnxruntime (the test extra); skipped without them.
"""
import contextlib
import functools
import importlib.util
import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from saliency.nn import load_onnx  # noqa: E402

from . import porting  # noqa: E402

# (exporter, opset): the TorchScript exporter's usual opsets, and the dynamo exporter's
EXPORTS = [("torchscript", 13), ("torchscript", 17), ("dynamo", 18), ("dynamo", 21)]
OUT_RTOL = 1e-5  # ours against onnxruntime, both float32 (relative to the output's largest value)
GRAD_RTOL = 1e-5  # ours (float64) against PyTorch (float64): the exporters fold batch norms in float32


@functools.lru_cache(maxsize=None)
def _torch_model(path):
    """The file's small model (TEST_KWARGS), built as the other real-model tests build it, float32."""
    pair = porting.build_pair(path)
    return pair.torch_model.float().eval(), pair.input_shape


def _exported(path, exporter, opset, folder):
    model, shape = _torch_model(path)
    x = torch.zeros(tuple(shape))
    target = folder / f"{porting.arch_name(path)}_{exporter}_{opset}.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(io.StringIO()):  # the dynamo exporter's progress lines
            torch.onnx.export(model, (x,), str(target), dynamo=exporter == "dynamo", opset_version=opset,
                              input_names=["image"])
    return target, tuple(x.shape)


def _cases():
    no_dynamo = pytest.mark.skipif(importlib.util.find_spec("onnxscript") is None,
                                   reason="PyTorch's dynamo exporter needs onnxscript (pip install onnxscript)")
    return [pytest.param(path, exporter, opset, id=f"{porting.arch_name(path)}-{exporter}{opset}",
                         marks=[no_dynamo] if exporter == "dynamo" else [])
            for path in porting.arch_files() for exporter, opset in EXPORTS]


@pytest.mark.parametrize("path, exporter, opset", _cases())
def test_an_exported_model_computes_what_pytorch_and_onnxruntime_do(path, exporter, opset, tmp_path):
    file, shape = _exported(path, exporter, opset, tmp_path)
    ours = load_onnx(file)
    x = porting.make_input(shape).astype(np.float32)
    session = ort.InferenceSession(str(file), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {session.get_inputs()[0].name: x})[:1]
    y = ours(x).numpy()
    np.testing.assert_allclose(y, theirs, rtol=OUT_RTOL, atol=OUT_RTOL * float(np.abs(theirs).max()))

    model, _ = _torch_model(path)
    model64, ours64 = model.double(), ours.double()
    try:
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        xs = porting.saliency.tensor(x.astype(np.float64), requires_grad=True)
        yt, ys = model64(xt), ours64(xs)
        seeds = porting.dense_seeds(tuple(yt.shape)) if porting.is_dense(yt) else porting.class_seeds(yt)
        for name, v in seeds:
            want = porting.input_gradient_torch(xt, yt, v)
            got = porting.input_gradient_ours(xs, ys, v)
            np.testing.assert_allclose(got, want, rtol=GRAD_RTOL, atol=GRAD_RTOL * float(np.abs(want).max()),
                                       err_msg=f"input gradient of seed {name}")
    finally:
        model.float()
