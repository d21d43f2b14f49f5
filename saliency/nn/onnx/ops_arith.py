"""Converters of ops that exporters write only for shape arithmetic (integer division remainders,
logic on shapes): they run on constants, and an input that depends on the image's values is an
OnnxError naming the node."""
from typing import Callable

import numpy as np

from .reader import Node
from .registry import Known, Op, Value, const, converter


def _on_constants(node: Node, fn: Callable[..., Value]) -> Op:
    def run(*xs: Value) -> Value:
        return fn(*[np.asarray(const(x, node, "input")) for x in xs])
    return Op(node, run)


@converter("Mod", 10, 13)
def mod(node: Node, known: Known) -> Op:
    fmod = int(node.attrs.get("fmod", 0))
    return _on_constants(node, lambda a, b: np.fmod(a, b) if fmod else np.mod(a, b))


converter("And", 7)(lambda node, known: _on_constants(node, np.logical_and))
converter("Or", 7)(lambda node, known: _on_constants(node, np.logical_or))
