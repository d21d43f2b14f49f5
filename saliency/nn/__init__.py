"""Neural-network layers on the autograd engine, with PyTorch's names, weight layouts and state-dict keys.

A model is a `Module`; its `Parameter`s are leaves of the graph, so `y.backward(v)` fills their
`.grad` as well as the input's. Weights load from a PyTorch state dict converted to arrays
(`{k: v.detach().numpy()}`), from `.npz` and from `.safetensors` (`saliency.nn.load`).
"""
from . import functional, init
from .activation import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .containers import ModuleList, Sequential
from .dropout import Dropout
from .flatten import Flatten
from .hooks import RemovableHandle
from .linear import Identity, Linear
from .loss import CrossEntropyLoss, MSELoss, NLLLoss
from .module import Module
from .parameter import Parameter
from .serialization import load, load_safetensors, save, save_safetensors
from .state import IncompatibleKeys

__all__ = ["CrossEntropyLoss", "Dropout", "Flatten", "Identity", "IncompatibleKeys", "Linear", "LogSoftmax",
           "MSELoss", "Module", "ModuleList", "NLLLoss", "Parameter", "ReLU", "RemovableHandle", "Sequential",
           "Sigmoid", "Softmax", "Tanh", "functional", "init", "load", "load_safetensors", "save",
           "save_safetensors"]
