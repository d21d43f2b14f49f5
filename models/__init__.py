"""The model zoo: architectures, data generators, training recipes and trained weights.

`available()` lists the shipped models; `load(name)` returns one in eval mode with its weights
and `.task`, `.input_shape`, `.classes`, `.metrics`. `data` holds the generators.
"""
from . import architectures, data
from .zoo import ZooError, available, card, load

__all__ = ["ZooError", "architectures", "available", "card", "data", "load"]
