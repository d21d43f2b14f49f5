"""ONNX models as Modules of this engine: `load_onnx("net.onnx")`, a model from any framework that
writes ONNX (PyTorch's two exporters, tf2onnx for TensorFlow and Keras, jax2onnx, ...) without
that framework.

    model = saliency.nn.load_onnx("net.onnx")            # a Module: maps, hooks, Grad-CAM's layers
    model.input_shape, model.layout                      # (3, 224, 224), "NCHW" (or "NHWC": the
                                                         # model still takes (N, C, H, W) images)

Reading needs the `onnx` package (the optional extra: pip install 'saliency-maps[onnx]'). The
converters are in `ops_nn`, `ops_math`, `ops_shape` and `ops_arith`, one per (operator, version).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from . import ops_arith, ops_math, ops_nn, ops_shape  # noqa: F401: the converters register on import
from .model import OnnxModel
from .reader import OnnxError, read
from .registry import CONVERTERS


def load_onnx(path: str | os.PathLike[str], input_shape: Sequence[int] | None = None, *, layout: str | None = None,
              trainable: bool = False) -> OnnxModel:
    """The model of the ONNX file at `path`, in eval mode, its parameters frozen unless `trainable`.

    `input_shape` (C, H, W): the input size for a file that leaves it free (a file that fixes it is
    checked against it); `layout`: "NCHW" or "NHWC" when the guess from the file's input shape is
    wrong. An OnnxError (one line) for a file this engine cannot read or run: not ONNX, damaged, an
    operator or version without a converter (named with its node), external data outside its folder."""
    graph = read(path)
    model = OnnxModel(graph, input_shape=input_shape, layout=layout, source=str(Path(path).name))
    del graph
    model.eval()
    if trainable:
        for p in model.parameters():
            p.requires_grad_(True)
    return model


def operators() -> dict[str, list[int]]:
    """{operator: sorted versions} this engine converts."""
    out: dict[str, list[int]] = {}
    for op, version in CONVERTERS:
        out.setdefault(op, []).append(version)
    return {op: sorted(v) for op, v in sorted(out.items())}


__all__ = ["OnnxError", "OnnxModel", "load_onnx", "operators", "read"]
