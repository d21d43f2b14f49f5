"""Exported networks beyond the CNNs of tests/realmodels: torchvision's Vision Transformer (the
attention pattern: MatMul / Softmax / Transpose chains, the class token, Erf-based or Gelu GELU,
LayerNormalization) and a segmenter with a dict output, exported by both of PyTorch's exporters;
and the rule-based methods on a loaded model (LRP's composites equal those of the same model
ported as a file). Needs torch, onnx and onnxruntime."""
import contextlib
import importlib.util
import io
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import saliency as sl  # noqa: E402
from saliency.attribution import gradient, lrp, seeds  # noqa: E402
from saliency.nn import load_onnx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "vision"))
from _torchvision import torchvision  # noqa: E402

DYNAMO = pytest.mark.skipif(importlib.util.find_spec("onnxscript") is None,
                            reason="PyTorch's dynamo exporter needs onnxscript (pip install onnxscript)")
EXPORTS = [pytest.param("torchscript", 14, id="torchscript14"), pytest.param("torchscript", 17, id="torchscript17"),
           pytest.param("dynamo", 18, id="dynamo18", marks=DYNAMO)]


def _export(model, x, path, exporter, opset):
    """The model exported (with gradients enabled: under no_grad, attention takes PyTorch's fused fast
    path, which the TorchScript exporter does not write)."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), dynamo=exporter == "dynamo", opset_version=opset,
                          input_names=["image"])
    return path


def _check(model, path, x, seed_of):
    """Ours against onnxruntime (float32 outputs) and against PyTorch (float64 input gradients)."""
    ours = load_onnx(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    y = ours(x.numpy()).numpy()
    np.testing.assert_allclose(y, theirs, rtol=1e-5, atol=1e-5 * float(np.abs(theirs).max()))
    model64, ours64 = model.double(), ours.double()
    xt = x.double().requires_grad_(True)
    yt = model64(xt)
    yt = yt["out"] if isinstance(yt, dict) else yt
    v = seed_of(yt.detach().numpy())
    (want,) = torch.autograd.grad(yt, xt, torch.from_numpy(v))
    xs = sl.tensor(x.double().numpy(), requires_grad=True)
    ours64(xs).backward(sl.tensor(v))
    np.testing.assert_allclose(xs.grad.numpy(), want.numpy(), rtol=1e-5, atol=1e-5 * float(want.abs().max()))
    model.float()
    return ours


def _top_class(y):
    v = np.zeros_like(y)
    v[np.arange(len(y)), y.argmax(1)] = 1.0
    return v


@pytest.mark.parametrize("exporter, opset", EXPORTS)
def test_a_vision_transformer(exporter, opset, tmp_path):
    tv = torchvision()
    torch.manual_seed(0)
    model = tv.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16,
                                        mlp_dim=24, num_classes=5).eval()
    x = torch.randn(2, 3, 32, 32)
    ours = _check(model, _export(model, x, tmp_path / "vit.onnx", exporter, opset), x, _top_class)
    assert any(isinstance(m, sl.nn.Linear) for m in ours.modules())  # its projections are layers: hooks, rules


@pytest.mark.parametrize("exporter, opset", EXPORTS)
def test_a_segmenter_with_a_dict_output(exporter, opset, tmp_path):
    tv = torchvision()
    torch.manual_seed(1)
    model = tv.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_var.uniform_(0.75, 1.25)
            m.running_mean.normal_(0, 0.1)
    model.eval()
    x = torch.randn(1, 3, 64, 64)

    def pixel(y):
        v = np.zeros_like(y)
        v[0, 1, 20, 30] = 1.0
        return v
    _check(model, _export(model, x, tmp_path / "lraspp.onnx", exporter, opset), x, pixel)


def test_lrp_on_a_loaded_model_equals_lrp_on_the_same_model_ported(tmp_path):
    """A VGG-like network with batch norms: the exporter folds them into the convolutions, the ported
    file keeps them and the rules merge them; the relevance is the same."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from realmodels import porting

    path = next(p for p in porting.arch_files() if porting.arch_name(p) == "vgg_bn")
    pair = porting.build_pair(path)
    shape = pair.input_shape
    x = porting.make_input(shape)[:1]
    exported = _export(pair.torch_model.float(), torch.tensor(x, dtype=torch.float32), tmp_path / "vgg.onnx",
                       "torchscript", 17)
    pair.torch_model.double()
    ours = load_onnx(exported).double()
    k = int(np.argmax(pair.our_model(sl.tensor(x)).numpy()))
    for composite in ("epsilon", "epsilon_plus", "epsilon_gamma_box"):
        want = lrp(pair.our_model, x, seeds.one_hot(k), composite=composite).map
        got = lrp(ours, x, seeds.one_hot(k), composite=composite).map
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=composite)
    np.testing.assert_allclose(gradient(ours, x, seeds.one_hot(k)).map, gradient(pair.our_model, x,
                                                                                 seeds.one_hot(k)).map,
                               rtol=1e-5, atol=1e-6)
