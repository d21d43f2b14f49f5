"""An ONNX file read into plain Python: `Graph` (nodes, constant arrays, the input and outputs, the
opsets), with every check a file from anywhere needs before anything is allocated for it.

The protobuf is parsed by the `onnx` package (the optional extra `onnx`). What this module adds:
each tensor's bytes are counted against its declared shape before an array is made of them (a
file that declares a 10^12-element tensor and holds 40 bytes is one line, not an allocation);
external data is read only from files inside the model's folder (no absolute path, no `..`, no
link leading out), at offsets inside the file; graphs with subgraphs, sparse initializers and
functions are refused by name. Every problem is an `OnnxError`, one line.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from onnx import AttributeProto, ModelProto, NodeProto, TensorProto, ValueInfoProto

INSTALL = "reading ONNX files needs the onnx package: pip install 'saliency-maps[onnx]' (or pip install onnx)"
DEFAULT_DOMAINS = ("", "ai.onnx")

# ONNX element types this engine reads (TensorProto's numbers), as NumPy dtypes (little-endian)
DTYPES: dict[int, np.dtype[Any]]
DTYPES = {1: np.dtype("<f4"), 2: np.dtype("u1"), 3: np.dtype("i1"), 4: np.dtype("<u2"), 5: np.dtype("<i2"),
          6: np.dtype("<i4"), 7: np.dtype("<i8"), 9: np.dtype("?"), 10: np.dtype("<f2"), 11: np.dtype("<f8"),
          12: np.dtype("<u4"), 13: np.dtype("<u8")}
# the typed repeated field holding a tensor's values when it has no raw_data
TYPED_FIELD = {1: "float_data", 2: "int32_data", 3: "int32_data", 4: "int32_data", 5: "int32_data", 6: "int32_data",
               7: "int64_data", 9: "int32_data", 10: "int32_data", 11: "double_data", 12: "uint64_data",
               13: "uint64_data"}


class OnnxError(ValueError):
    """An ONNX file this engine cannot read or run: one line saying what and where."""


@dataclass
class Node:
    """One node of the graph: `inputs` and `outputs` are value names ("" for an optional input left
    out); `attrs` its attributes as Python values (ints, floats, strings, lists, arrays)."""

    name: str
    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]

    def where(self) -> str:
        """How messages name the node."""
        return f"node {self.name!r}" if self.name else f"an unnamed {self.op_type} node"


@dataclass
class Graph:
    """A model's graph: `nodes` in the file's (topological) order; `constants` {name: ndarray} its
    initializers; `inputs` [(name, dims, dtype)] the values to feed (dims: ints, None where the
    file leaves a dimension free); `outputs` the output names; `opsets` {domain: version}."""

    nodes: list[Node]
    constants: dict[str, NDArray[Any]]
    inputs: list[tuple[str, list[int | None] | None, np.dtype[Any] | None]]
    outputs: list[str]
    opsets: dict[str, int]
    producer: str = ""
    names: dict[str, Node] = field(default_factory=dict)  # {output value: the node making it}


def onnx_package() -> Any:
    """The `onnx` package, or OnnxError saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise OnnxError(INSTALL) from None
    return onnx


def read(path: str | os.PathLike[str]) -> Graph:
    """The Graph of the ONNX file at `path`, checked (OnnxError)."""
    onnx = onnx_package()
    path = Path(path)
    if not path.is_file():
        raise OnnxError(f"{path} is not a file" if path.exists() else f"{path} does not exist")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise _Malformed("the file is empty")
            buf = _File(f.fileno(), size)
            skeleton, pieces = _split(buf, size)
            proto = onnx.ModelProto.FromString(skeleton)
            del skeleton
            constants = _constants(path, proto, onnx, f.fileno(), buf, pieces)
    except OnnxError:
        raise
    except OSError as exc:
        raise OnnxError(f"cannot read {path}: {exc.strerror or exc}") from None
    except _Malformed as exc:
        raise OnnxError(f"{path} is not an ONNX model (its protobuf does not parse: {exc})") from None
    except Exception as exc:  # noqa: BLE001: the protobuf parser's DecodeError and its kin
        raise OnnxError(f"{path} is not an ONNX model (its protobuf does not parse: {_first_line(exc)})") from None
    if not proto.HasField("graph") or not proto.graph.node:
        raise OnnxError(f"{path} is not an ONNX model (it holds no graph)")
    if len(proto.functions):
        raise OnnxError(f"{path} defines its own functions ({proto.functions[0].name}, ...), which this engine does "
                        f"not run; export without them (inline the functions)")
    opsets = {(o.domain or ""): int(o.version) for o in proto.opset_import}
    if not any(d in opsets for d in DEFAULT_DOMAINS):
        raise OnnxError(f"{path} imports no version of the standard operator set (ai.onnx)")
    tensors = _Tensors(path.parent)
    g = proto.graph
    nodes = [_node(n, tensors) for n in g.node]
    inputs = [(v.name, _dims(v), _elem(v)) for v in g.input if v.name not in constants]
    graph = Graph(nodes, constants, inputs, [v.name for v in g.output], opsets, proto.producer_name)
    for n in nodes:
        for out in n.outputs:
            if out:
                graph.names[out] = n
    return graph


class _Malformed(ValueError):
    """The file's protobuf is cut or damaged where `_split` reads it."""


def _varint(buf: _File, pos: int, end: int) -> tuple[int, int]:
    """(the varint at `pos` of `buf`, the position after it)."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed("a number runs past its message" if pos >= end else "a number is too long")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _field_end(buf: _File, pos: int, end: int, wire: int) -> tuple[int, int]:
    """(the start of a field's value after its tag, the position after the field)."""
    if wire == 0:
        return pos, _varint(buf, pos, end)[1]
    if wire == 1:
        after = pos + 8
    elif wire == 5:
        after = pos + 4
    elif wire == 2:
        length, pos = _varint(buf, pos, end)
        after = pos + length
    else:
        raise _Malformed(f"a field of wire type {wire}")
    if after > end:
        raise _Malformed("a field runs past the end of its message (a truncated file?)")
    return pos, after


def _encoded(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


class _File:
    """A file's bytes by index and slice, read on demand (pread) through a small window: scanning a
    model's messages reads their tags and lengths, not the weights between them."""

    WINDOW = 1 << 14

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size, self.start, self.data = fd, size, 0, b""

    @overload
    def __getitem__(self, key: int) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> bytes: ...

    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, slice):
            a, b = key.start, key.stop
            if b - a > self.WINDOW:
                data = os.pread(self.fd, b - a, a)
                if len(data) != b - a:
                    raise _Malformed("the file ended inside a message")
                return data
            self._load(a, b)
            return self.data[a - self.start:b - self.start]
        self._load(key, key + 1)
        return self.data[key - self.start]

    def _load(self, a: int, b: int) -> None:
        if a < self.start or b > self.start + len(self.data):
            self.start, self.data = a, os.pread(self.fd, max(self.WINDOW, b - a), a)
            if len(self.data) < b - a:
                raise _Malformed("the file ended inside a message")


def _split(buf: _File, size: int) -> tuple[bytes, list[tuple[int, int]]]:
    """(the ModelProto's bytes without its graph's initializers, [(start, end)] of each initializer in
    the file `buf` (a `_File`))."""
    if size == 0:
        raise _Malformed("the file is empty")
    pieces: list[tuple[int, int]] = []
    skeleton, pos = bytearray(), 0
    while pos < size:
        tag, after_tag = _varint(buf, pos, size)
        start, after = _field_end(buf, after_tag, size, tag & 7)
        if tag != (7 << 3 | 2):  # not the graph: kept as it is
            skeleton += buf[pos:after]
        else:
            graph, dropped = _without(buf, start, after, 5 << 3 | 2)
            pieces += dropped
            skeleton += _encoded(tag) + _encoded(len(graph)) + graph
        pos = after
    return bytes(skeleton), pieces


def _without(buf: _File, start: int, end: int, drop: int) -> tuple[bytearray, list[tuple[int, int]]]:
    """(the message at buf[start:end] without its fields of tag `drop`, [(start, end)] of their values)."""
    dropped: list[tuple[int, int]] = []
    kept, p = bytearray(), start
    while p < end:
        tag, q = _varint(buf, p, end)
        body, after = _field_end(buf, q, end, tag & 7)
        if tag == drop:
            dropped.append((body, after))
        else:
            kept += buf[p:after]
        p = after
    return kept, dropped


def _constants(path: Path, proto: ModelProto, onnx: Any, fd: int, buf: _File,
               pieces: list[tuple[int, int]]) -> dict[str, NDArray[Any]]:
    """{name: array} of the graph's initializers, each of those at `pieces` of the file parsed
    without its raw data, which is read from the file straight into its array: the weights' bytes
    are in memory once."""
    g = proto.graph
    if len(g.sparse_initializer):
        raise OnnxError(f"{path} holds sparse initializers ({g.sparse_initializer[0].values.name}, ...), which this "
                        f"engine does not read")
    tensors = _Tensors(Path(path).parent)
    constants = {t.name: tensors.array(t, f"initializer {t.name!r}") for t in g.initializer}
    for start, end in pieces:
        rest, raw = _without(buf, start, end, 9 << 3 | 2)  # raw_data: field 9
        t = onnx.TensorProto.FromString(bytes(rest))
        constants[t.name] = tensors.array(t, f"initializer {t.name!r}", (fd, raw[-1]) if raw else None)
    return constants


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _dims(value: ValueInfoProto) -> list[int | None] | None:
    """A graph input's dimensions: ints, None for a free one (dim_param or absent)."""
    t = value.type
    if not t.HasField("tensor_type"):
        raise OnnxError(f"the model's input {value.name!r} is not a tensor (a sequence, a map, ...)")
    if not t.tensor_type.HasField("shape"):
        return None
    return [int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
            for d in t.tensor_type.shape.dim]


def _elem(value: ValueInfoProto) -> np.dtype[Any] | None:
    kind = value.type.tensor_type.elem_type
    return DTYPES.get(kind)


def _node(proto: NodeProto, tensors: _Tensors) -> Node:
    attrs: dict[str, Any] = {}
    where = f"node {proto.name!r}" if proto.name else f"an unnamed {proto.op_type} node"
    for a in proto.attribute:
        attrs[a.name] = _attribute(a, tensors, where)
    return Node(proto.name, proto.op_type, proto.domain or "", list(proto.input), list(proto.output), attrs)


def _attribute(a: AttributeProto, tensors: _Tensors, where: str) -> Any:
    """An attribute's value as Python: int, float, str, lists of them, or an ndarray."""
    kind = a.type
    if kind == 1:
        return float(a.f)
    if kind == 2:
        return int(a.i)
    if kind == 3:
        return a.s.decode("utf-8", "replace")
    if kind == 4:
        return tensors.array(a.t, f"attribute {a.name!r} of {where}")
    if kind == 6:
        return [float(v) for v in a.floats]
    if kind == 7:
        return [int(v) for v in a.ints]
    if kind == 8:
        return [s.decode("utf-8", "replace") for s in a.strings]
    if kind in (5, 10):
        raise OnnxError(f"{where} ({a.name}) holds a subgraph (control flow: If, Loop, Scan), which this engine does "
                        f"not run; export the model for one fixed path")
    raise OnnxError(f"{where}: attribute {a.name!r} is of a kind this engine does not read (type {kind})")


def _read_into(array: NDArray[Any], fd: int, offset: int, what: str) -> NDArray[Any]:
    """`array` filled with the file's bytes at `offset` (as many as it holds), native byte order."""
    if array.size == 0:
        return array
    # .data: memoryview(a), which NumPy's stubs only allow from Python 3.12
    view, done = array.reshape(-1).data.cast("B"), 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise OnnxError(f"{what}: the file ended inside its data")
        done += got
    return array.astype(array.dtype.newbyteorder("="), copy=False)


class _Tensors:
    """Turns TensorProtos into arrays, external data read from files under `folder` only."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder).resolve()

    def array(self, t: TensorProto, what: str,
              raw: tuple[int, tuple[int, int]] | None = None) -> NDArray[Any]:
        """The array of the TensorProto `t`; `raw` (fd, (start, end)): where its raw data lies in the
        file (`t` parsed without it), read straight into the array."""
        dtype = DTYPES.get(t.data_type)
        if dtype is None:
            raise OnnxError(f"{what} is of an element type this engine does not read (ONNX type {t.data_type}); "
                            f"export in float32")
        dims = [int(d) for d in t.dims]
        if any(d < 0 for d in dims):
            raise OnnxError(f"{what} declares a negative dimension {dims}")
        count = math.prod(dims)
        if t.data_location == 1:  # EXTERNAL
            return self._external(t, dtype, dims, count, what)
        if raw is not None:
            fd, (start, end) = raw
            if end - start != count * dtype.itemsize:
                raise OnnxError(f"{what} declares shape {dims} ({count * dtype.itemsize:,} bytes of "
                                f"{dtype.name}) and holds {end - start:,} bytes")
            return _read_into(np.empty(dims, dtype), fd, start, what)
        if t.HasField("raw_data"):
            data = t.raw_data
            if len(data) != count * dtype.itemsize:
                raise OnnxError(f"{what} declares shape {dims} ({count * dtype.itemsize:,} bytes of "
                                f"{dtype.name}) and holds {len(data):,} bytes")
            return np.frombuffer(bytearray(data), dtype).reshape(dims).astype(dtype.newbyteorder("="), copy=False)
        values = getattr(t, TYPED_FIELD[t.data_type])
        if len(values) != count:
            raise OnnxError(f"{what} declares shape {dims} ({count:,} values) and holds {len(values):,}")
        if t.data_type == 10:  # float16 kept as its bits in int32_data
            return np.asarray(values, np.uint16).view(np.float16).reshape(dims)
        return np.asarray(values, dtype.newbyteorder("=")).reshape(dims)

    def _external(self, t: TensorProto, dtype: np.dtype[Any], dims: list[int], count: int,
                  what: str) -> NDArray[Any]:
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        if not location or os.path.isabs(location) or ".." in Path(location).parts:
            raise OnnxError(f"{what} keeps its data in {location!r}, which is not a file name inside the model's "
                            f"folder; only files beside the model are read")
        target = (self.folder / location).resolve()
        if self.folder not in target.parents or not target.is_file():
            raise OnnxError(f"{what} keeps its data in {location!r}, which is not a file inside the model's folder "
                            f"{self.folder}")
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else count * dtype.itemsize
        except ValueError:
            raise OnnxError(f"{what}: its external data's offset or length is not a number") from None
        size = target.stat().st_size
        if length != count * dtype.itemsize:
            raise OnnxError(f"{what} declares shape {dims} ({count * dtype.itemsize:,} bytes) and its external data "
                            f"{length:,} bytes")
        if offset < 0 or offset + length > size:
            raise OnnxError(f"{what}: its external data (bytes {offset:,} to {offset + length:,}) lies outside "
                            f"{location} ({size:,} bytes)")
        buf = bytearray(length)
        with open(target, "rb") as f:
            f.seek(offset)
            if f.readinto(buf) != length:
                raise OnnxError(f"{what}: {location} ended before its data")
        return np.frombuffer(buf, dtype).reshape(dims).astype(dtype.newbyteorder("="), copy=False)
