"""Converters: one per (operator, version), each turning a graph node into a Module of this engine.

    @converter("Relu", 6, 13, 14)
    def relu(node, known):             # node: reader.Node; known: {value name: ndarray} of constants
        return Op(node, lambda x: F.relu(x))

A node's version is the `since_version` of the operator's schema at the model's opset (what
`onnx.defs.get_schema` says), so a converter registers exactly the versions whose semantics it
implements; a version without one is an OnnxError naming the operator, the version and the node.

The Module a converter returns is called with the node's inputs in order (a Tensor when it depends
on the image, an ndarray when it is a constant, None for an optional input left out), except that
a module with `onnx_inputs` (a tuple of positions) gets only those: the layers that hold the
others as parameters (Conv2d's weight and bias).
"""
from typing import Any, Callable, Collection, Mapping, TypeVar

import numpy as np
from numpy.typing import NDArray

from ...autograd.tensor import Tensor
from ..module import Module
from ..parameter import Parameter
from .reader import DEFAULT_DOMAINS, Node, OnnxError, onnx_package

# A value of the graph as a converter's Module gets it: a Tensor when it depends on the image, an
# ndarray when it is a constant, None for an optional input left out. Any: the converters tell
# which at run time (isinstance), and a Tensor and an ndarray share most of what they call.
Value = Any
Known = dict[str, NDArray[Any]]  # {value name: ndarray} of the constants known at load
Build = Callable[[Node, Known], Module]  # a converter: build(node, known) -> Module
_Build = TypeVar("_Build", bound=Build)

# (op_type, since_version) -> build(node, known) -> Module
CONVERTERS: dict[tuple[str, int], Build] = {}


def converter(op_type: str, *versions: int) -> Callable[[_Build], _Build]:
    """Register `build(node, known) -> Module` for the operator's schema versions `versions`."""
    def register(build: _Build) -> _Build:
        for v in versions:
            CONVERTERS[(op_type, v)] = build
        return build
    return register


def find(node: Node, opsets: Mapping[str, int]) -> Build:
    """The converter of `node` at the model's `opsets` ({domain: version}); OnnxError if there is none."""
    if node.domain not in DEFAULT_DOMAINS:
        raise OnnxError(f"operator {node.domain}.{node.op_type} ({node.where()}) is not in the standard operator set; "
                        f"this engine runs only ai.onnx operators (export without custom or contrib operators)")
    opset = max(opsets.get(d, 0) for d in DEFAULT_DOMAINS)
    defs = onnx_package().defs
    try:
        version = defs.get_schema(node.op_type, opset, "").since_version
    except Exception:  # noqa: BLE001: onnx's SchemaError: no such operator at this opset
        raise OnnxError(f"operator {node.op_type} ({node.where()}) does not exist in opset {opset}") from None
    build = CONVERTERS.get((node.op_type, version))
    if build is None:
        known = sorted(v for op, v in CONVERTERS if op == node.op_type)
        which = f" (versions {', '.join(map(str, known))} are)" if known else ""
        raise OnnxError(f"operator {node.op_type} version {version} ({node.where()}, opset {opset}) is not supported"
                        f"{which}")
    return build


class Op(Module):
    """A node computed by a function of its inputs (an elementwise op, a reshape, ...). Its float
    constants are Parameters of the module (frozen), the others stay arrays; `fn(*inputs)`."""

    def __init__(self, node: Node, fn: Callable[..., Any], known: Mapping[str, NDArray[Any] | None] | None = None,
                 keep: Collection[int] = ()) -> None:
        super().__init__()
        self.op_type, self.fn = node.op_type, fn
        self._bound: dict[int, str] = {}  # {input position: the name of the Parameter holding it}
        for k, name in enumerate(node.inputs):
            value = (known or {}).get(name) if name else None
            if value is not None and k not in keep and np.issubdtype(value.dtype, np.floating) and value.size > 1:
                pname = f"input{k}"
                self.register_parameter(pname, Parameter(value, requires_grad=False))
                self._bound[k] = pname

    def forward(self, *inputs: Value) -> Any:
        if self._bound:
            args = list(inputs)
            for k, pname in self._bound.items():
                args[k] = self._parameters[pname]
            return self.fn(*args)
        return self.fn(*inputs)

    def _get_name(self) -> str:
        return self.op_type


def is_const(v: Value) -> bool:
    """Whether a value is a constant (an array), not a Tensor on the graph."""
    return not isinstance(v, Tensor)


def const(v: Value, node: Node, what: str) -> NDArray[Any]:
    """The constant `v` as an ndarray; OnnxError when it depends on the image."""
    if isinstance(v, Tensor):
        raise OnnxError(f"{node.where()} ({node.op_type}): its {what} depends on the image's values; this engine needs "
                        f"it constant (fixed by the input's size at most)")
    return np.asarray(v)


def ints(v: Value, node: Node, what: str) -> list[int]:
    """A constant integer list (shapes, axes, pads)."""
    return [int(i) for i in np.asarray(const(v, node, what)).reshape(-1)]


def as_tensor(v: Value, like: Tensor | None = None) -> Tensor:
    """A value as a Tensor (a constant one for an array), of `like`'s float dtype for a float array."""
    if isinstance(v, Tensor):
        return v
    a = np.asarray(v)
    if like is not None and np.issubdtype(a.dtype, np.floating):
        a = a.astype(like.dtype, copy=False)
    elif not np.issubdtype(a.dtype, np.floating):
        a = a.astype(like.dtype if like is not None else np.float32)
    return Tensor(a)


def first_tensor(*values: Value) -> Tensor | None:
    """The first Tensor among `values`, or None (all constant)."""
    return next((v for v in values if isinstance(v, Tensor)), None)


def first_image(*values: Value) -> Tensor | None:
    """The first value that depends on the image: a Tensor other than a node's float constant (the
    Parameter its Op holds). None on shape arithmetic, which then runs on the arrays."""
    return next((v for v in values if isinstance(v, Tensor) and not isinstance(v, Parameter)), None)
