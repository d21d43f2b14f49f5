"""Neural-network layers on the autograd engine, with PyTorch's names, weight layouts and state-dict keys.

A model is a `Module`; its `Parameter`s are leaves of the graph, so `y.backward(v)` fills their
`.grad` as well as the input's. Weights load from a PyTorch state dict converted to arrays
(`{k: v.detach().numpy()}`), and from `.pth`, `.npz` and `.safetensors` files (`saliency.nn.load`);
a malformed weights file raises `WeightsError`.

`load_onnx("net.onnx")` reads a model of any framework that writes ONNX as a Module of this
engine (the `onnx` package, an optional extra, reads the file; see `saliency.nn.onnx`).

`fuse(model)` lets adjacent modules of its Sequentials run as one op (Upsample(nearest) + 3x3
Conv2d as one sub-pixel convolution), in place, without changing parameters, state-dict keys or
submodules; `unfuse(model)` undoes it (see `saliency.nn.fusion`). The zoo's models are fused.
"""
from typing import NoReturn

from . import functional, init
from .activation import (ELU, GELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU, ReLU6,
                         SiLU, Sigmoid, Softmax, Softplus, Tanh)
from .attention import MultiheadAttention
from .batchnorm import BatchNorm1d, BatchNorm2d
from .containers import ModuleDict, ModuleList, Sequential
from .conv import Conv2d, ConvTranspose2d
from .dropout import Dropout, Dropout2d
from .flatten import Flatten
from .fusion import fuse, unfuse
from .hooks import RemovableHandle
from .linear import Identity, Linear
from .loss import CrossEntropyLoss, MSELoss, NLLLoss
from .module import Module
from .normalization import GroupNorm, InstanceNorm2d, LayerNorm
from .onnx import OnnxError, load_onnx
from .padding import ConstantPad2d, ReflectionPad2d, ReplicationPad2d, ZeroPad2d
from .parameter import Parameter
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, MaxPool2d
from .serialization import WeightsError, load, load_safetensors, save, save_safetensors
from .state import IncompatibleKeys
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "ConstantPad2d",
           "Conv2d", "ConvTranspose2d", "CrossEntropyLoss", "Dropout", "Dropout2d", "ELU", "Flatten",
           "GELU", "GroupNorm", "Hardsigmoid", "Hardswish", "Hardtanh", "Identity", "IncompatibleKeys",
           "InstanceNorm2d", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax", "MaxPool2d", "Mish",
           "Module", "ModuleDict", "ModuleList", "MSELoss", "MultiheadAttention", "NLLLoss", "Parameter",
           "PixelShuffle", "PixelUnshuffle", "PReLU", "ReflectionPad2d", "ReLU", "ReLU6", "RemovableHandle",
           "ReplicationPad2d", "Sequential", "Sigmoid", "SiLU", "Softmax", "Softplus", "Tanh", "Upsample",
           "UpsamplingBilinear2d", "UpsamplingNearest2d", "WeightsError", "ZeroPad2d", "functional", "fuse",
           "init", "load", "load_safetensors", "save", "save_safetensors", "unfuse"]
__all__ += ["OnnxError", "load_onnx"]


def __getattr__(name: str) -> NoReturn:
    # reached only for names this module lacks: a PyTorch layer that ported code asks for
    if name.startswith("_"):
        raise AttributeError(f"module 'saliency.nn' has no attribute '{name}'")
    from ..autograd.errors import unsupported

    raise unsupported("nn", name)
