"""Errors the ops raise for inputs a caller can get wrong, with what a layer expected."""
from __future__ import annotations

from typing import Sequence


class LayerInputError(ValueError):
    """A layer's input does not fit its weight: `expected` and `got` count `what` ("channels" of a
    convolution, "features" of a linear layer); `input_shape` is the shape the layer was given."""

    def __init__(self, message: str, *, what: str, expected: int, got: int, input_shape: Sequence[int]) -> None:
        super().__init__(message)
        self.what, self.expected, self.got, self.input_shape = what, expected, got, tuple(input_shape)


class UnsupportedError(NotImplementedError, AttributeError):
    """A PyTorch name this package does not provide. It is an AttributeError too, so `hasattr`
    and `getattr(obj, name, default)` keep working."""


# What to do instead, for names that ported code often reaches
_INSTEAD = {
    "cuda": "saliency computes on the CPU only: remove .cuda() (the model and tensors are already on the CPU)",
    "device": "everything is on the CPU: drop the device argument or use 'cpu'",
    "half": "use float32 (.float()) or float64 (.double())",
    "bfloat16": "use float32 (.float()) or float64 (.double())",
    "type": "use .to(dtype), .float() or .double()",
    "backward_hook": "use register_full_backward_hook",
    "DataParallel": "use the model itself: saliency runs on one CPU process",
    "DistributedDataParallel": "use the model itself: saliency runs on one CPU process",
    "jit": "use the Python model (TorchScript is not supported)",
    "compile": "use the model as it is (there is no compiler)",
    "load": "use saliency.nn.load(path), which reads a state dict from .pth, .npz or .safetensors files "
            "(without torch) for model.load_state_dict",
    "save": "use saliency.nn.save(model, path) (an .npz file) or saliency.nn.save_safetensors",
}


def unsupported(owner: str, name: str) -> UnsupportedError:
    """The error for `owner.name`, a PyTorch name that saliency does not implement."""
    hint = _INSTEAD.get(name, "docs/your-network.md lists the supported layers, functions and Tensor methods")
    return UnsupportedError(f"{owner}.{name} is not supported by saliency; {hint}")
