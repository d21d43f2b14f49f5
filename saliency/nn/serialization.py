"""Saving and loading weights: `.npz` (written and read), `.safetensors` and PyTorch's `.pth` (read
with NumPy alone; `.pth` in saliency/nn/pth.py).

A safetensors file is: 8 bytes, the header length N as a little-endian uint64; N bytes of JSON,
{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__":
{str: str}}, padded with spaces; then the byte buffer, which the tensors cover without gaps or
overlaps (offsets are relative to its start), little-endian.

Reading trusts no length field: every declared size is checked, with Python ints, against the
file's real size before anything is allocated for it; the JSON header is counted before it is
parsed, so that parsing builds no more than its tensors need (`_bound_header`); and a malformed
file of either kind raises `WeightsError` (a ValueError), one sentence naming the file and the
defect.
"""
import enum
import json
import math
import os
import struct
import zipfile
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

import numpy as np
from numpy.typing import NDArray

from .._write import atomic_open, atomic_path
from ..autograd.tensor import Tensor
from .errors import WeightsError, one_line, read_exactly, short, too_big
from .npz import finish, read_npz
from .pth import LEGACY_MAGIC, bare_pickle_protocol, is_torch_archive, read_pth

if TYPE_CHECKING:
    from .module import Module

__all__ = ["Format", "WeightsError", "file_format", "load", "load_safetensors", "parse_safetensors",
           "safetensors_bytes", "save", "save_safetensors"]

# safetensors dtype -> NumPy dtype (little-endian); BF16 is widened to float32 on reading
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items() if k != "BF16"}
# the reference writer orders tensors by dtype (largest alignment first), then by name
_WRITE_ORDER = ["BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]
_MAX_HEADER = 100_000_000
_MAX_DIMS = 32
# parsing the header may build _PARSE_BASE bytes of objects and _PARSE_PER_TENSOR more per tensor entry
# (an entry takes 1.5-3.5 KiB: its dict, key, dtype, shape and offsets), costed per JSON object, list,
# pair, comma and string as json.loads builds them at most (a dict, a list, a key's dict slot and
# (key, value) tuple, an item's slot and number, a str); at most _MAX_EMPTY tensors without elements
_PARSE_BASE = 4 << 20
_PARSE_PER_TENSOR = 4 << 10
_COSTS = (400, 100, 200, 48, 56)
_MAX_EMPTY = 1024
_NOT_JSON_SYNTAX = bytes(b for b in range(256) if b not in b'"{}[]:,')

Weights = Union["Module", dict[str, Any]]
"""What the writers take: a Module (its state dict is written) or a dict of arrays/Tensors by name."""
_Complaint = Callable[[str], WeightsError]
"""Makes the WeightsError "NAME is not a valid safetensors file: MESSAGE" from the message."""
_Entry = tuple[str, str, list[int], int, int]
"""One checked tensor entry of a safetensors header: (key, dtype code, shape, begin, end)."""


def _arrays(obj: Weights) -> dict[str, NDArray[Any]]:
    """{name: ndarray} from a Module (its state dict) or a mapping of arrays/Tensors."""
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        obj = obj.state_dict()
    if not isinstance(obj, dict):
        raise TypeError(f"expected a Module or a dict of arrays, got {type(obj).__name__}")
    out = {}
    for name, value in obj.items():
        if not isinstance(name, str):
            raise TypeError(f"state dict keys must be strings, got {name!r}")
        out[name] = np.asarray(value._array if isinstance(value, Tensor) else value, order="C")  # keeps 0-d
    return out


def save(obj: Weights, path: str | os.PathLike[str], compressed: bool = False) -> None:
    """Write a Module's state dict (or a dict of arrays/Tensors) to an `.npz` file at exactly `path`
    (written beside it and renamed into place: `path` is never left truncated)."""
    arrays = _arrays(obj)
    mode = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", compression=mode, allowZip64=True) as zf:
        for name, arr in arrays.items():
            if arr.dtype.hasobject:
                raise TypeError(f"cannot save {name!r}: dtype {arr.dtype} is not numeric")
            with zf.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, arr, allow_pickle=False)


class Format(enum.Enum):
    """What a weights file is, judged by its content (`file_format`); each value says it in words."""
    NPZ = "an .npz archive"
    PTH = "a PyTorch checkpoint"  # torch.save's zip (or its legacy format, which is refused)
    PICKLE = "a bare pickle"      # pickle.dump's, refused: it could run code
    SAFETENSORS = "a safetensors file"


def file_format(path: str | os.PathLike[str]) -> Format:
    """The `Format` of the file at `path`, from its first bytes: a zip with a PREFIX/data.pkl entry is
    PyTorch's and any other zip `.npz`; PyTorch's legacy magic, or a bare pickle; else safetensors."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        head, size = f.read(len(LEGACY_MAGIC)), os.fstat(f.fileno()).st_size
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06") or (not head and path.endswith(".npz")):
        return Format.PTH if head and is_torch_archive(path) else Format.NPZ
    if head == LEGACY_MAGIC:
        return Format.PTH
    return Format.SAFETENSORS if bare_pickle_protocol(head, size) is None else Format.PICKLE


def load(path: str | os.PathLike[str]) -> dict[str, NDArray[Any]]:
    """{name: ndarray} from an `.npz` file, a `.safetensors` file or a PyTorch checkpoint written by
    `torch.save`, recognised by content (`file_format`); WeightsError (a ValueError) names the file
    and what is wrong if it is malformed, or why it is refused (a legacy checkpoint or a bare pickle:
    how to re-save it)."""
    kind = file_format(path)
    if kind is Format.NPZ:
        return read_npz(path)
    if kind in (Format.PTH, Format.PICKLE):
        return read_pth(path)
    return load_safetensors(path)


def load_safetensors(path: str | os.PathLike[str]) -> dict[str, NDArray[Any]]:
    """{name: ndarray} from a `.safetensors` file (BF16 becomes float32; the metadata is ignored).
    Reads the header, checks every length and offset in it against the file's real size, and only
    then reads each tensor into an array of its (now verified) size."""
    path = os.fspath(path)
    bad = _complaint(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        n = _header_length(f.read(8), size, bad)
        text = f.read(n)
        if len(text) < n:
            raise bad(f"the file ended while its {n}-byte header was read (truncated while being read?)")
        entries, _ = _header(text, size - 8 - n, bad)
        tensors = {}
        for key, code, shape, begin, end in entries:
            f.seek(8 + n + begin)
            buf, got = read_exactly(f, end - begin)
            if got < end - begin:
                raise bad(f"the file ended while tensor {short(key)} was read (truncated while being read?)")
            tensors[key] = _tensor(buf, code, shape)
    return tensors


def parse_safetensors(blob: bytes | bytearray | memoryview,
                      name: str = "<bytes>") -> tuple[dict[str, NDArray[Any]], dict[str, str]]:
    """(tensors, metadata) from the bytes of a safetensors file; WeightsError names what is wrong."""
    bad = _complaint(name)
    n = _header_length(bytes(blob[:8]), len(blob), bad)
    entries, metadata = _header(bytes(blob[8:8 + n]), len(blob) - 8 - n, bad)
    tensors = {}
    for key, code, shape, begin, end in entries:
        buf = np.frombuffer(blob, np.uint8, count=end - begin, offset=8 + n + begin).copy()
        tensors[key] = _tensor(buf, code, shape)
    return tensors, metadata


def _complaint(name: str) -> _Complaint:
    return lambda msg: WeightsError(f"{name} is not a valid safetensors file: {msg}")


def _header_length(head: bytes, size: int, bad: _Complaint) -> int:
    """The header length N from the first 8 bytes, checked against the file's `size` in bytes."""
    if size < 8 or len(head) < 8:
        raise bad(f"it has {size} bytes, fewer than the 8-byte header length")
    (n,) = struct.unpack("<Q", head)
    if n > size - 8:
        raise bad(f"the header length {n} exceeds the file's size of {size} bytes (truncated file?)")
    if n > _MAX_HEADER:
        raise bad(f"the header length {n} exceeds the limit of {_MAX_HEADER} bytes")
    return n


def _header(text: bytes, data_size: int, bad: _Complaint) -> tuple[list[_Entry], dict[str, str]]:
    """([(key, dtype code, shape, begin, end)], metadata) from the JSON header; every entry is
    checked, with Python ints, against the `data_size` bytes that follow the header."""
    _bound_header(text, data_size, bad)
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (ValueError, KeyError, RecursionError) as exc:  # UnicodeDecodeError, JSONDecodeError are ValueErrors
        raise bad(f"the header is not valid UTF-8 JSON ({one_line(exc)})") from None
    if not isinstance(header, dict):
        raise bad(f"the header must be a JSON object, got {type(header).__name__}")
    metadata = header.pop("__metadata__", None)
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad("__metadata__ must map strings to strings")
    entries = []
    for key, info in header.items():
        code, shape, (begin, end) = _entry(key, info, bad)
        itemsize = np.dtype(_DTYPES[code]).itemsize
        size = math.prod(shape) * itemsize
        if end - begin != size:
            raise bad(f"tensor {short(key)} ({code}, shape {short(tuple(shape))}) needs {size} bytes but its "
                      f"data_offsets [{begin}, {end}] span {end - begin}")
        if too_big(shape, itemsize):  # only an empty tensor gets here with such a shape
            raise bad(f"tensor {short(key)} has shape {short(shape)}, too large for any array")
        if end > data_size:
            raise bad(f"tensor {short(key)} ends at byte {end} of a data buffer of {data_size} bytes (truncated file?)")
        entries.append((key, code, shape, begin, end))
    _check_coverage([(begin, end, key) for key, _, _, begin, end in entries], data_size, bad)
    return entries, metadata


def _bound_header(text: bytes, data_size: int, bad: _Complaint) -> None:
    """WeightsError, before the JSON header `text` is parsed, if parsing it would build more than the
    tensors it can describe need. json.loads builds up to ~40 bytes of objects per byte of JSON
    (`[[],[],...]`, `{"a":{},...}`), so the header's objects, lists, pairs, commas and strings are
    counted first (`_json_counts`), and refused are: more objects than one per byte of the data
    buffer (a tensor with elements takes at least one) and `_MAX_EMPTY` more, and a cost
    (`_COSTS`) over `_PARSE_BASE` and `_PARSE_PER_TENSOR` per object. Parsing then takes at most
    that cost and its strings' characters (1-4 bytes each), besides the header."""
    counts = _json_counts(text)
    tensors = counts[0] - 1  # objects below the top one: tensor entries, and __metadata__
    if tensors > data_size + _MAX_EMPTY + 1:
        raise bad(f"the header describes {tensors} tensors (JSON objects) but the data buffer of {data_size} bytes "
                  f"holds at most {data_size} that have elements, and more than {_MAX_EMPTY} empty ones are not "
                  f"read; it is not parsed")
    cost = sum(n * c for n, c in zip(counts, _COSTS))
    limit = _PARSE_BASE + _PARSE_PER_TENSOR * max(tensors, 0)
    if cost > limit:
        what = ", ".join(f"{n} {name}" for n, name in zip(counts, ("objects", "lists", "pairs", "commas", "strings")))
        entries = f"{max(tensors, 0)} tensor entr{'y' if tensors == 1 else 'ies'}"
        raise bad(f"parsing the {len(text)}-byte header ({what}) would build about {cost} bytes of objects, more "
                  f"than {entries} need (at most {limit}); it is not parsed")


def _json_counts(text: bytes) -> tuple[int, ...]:
    """(objects, lists, pairs, commas, strings) in the JSON bytes `text`, not counting the brackets,
    colons and commas inside its strings; in C-speed passes that take at most twice the text's size
    and a few MiB."""
    if b"\\" in text:  # escaped backslashes, then escaped quotes: each quote left delimits a string
        text = text.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    codes = np.frombuffer(text.translate(None, _NOT_JSON_SYNTAX), np.uint8)  # quotes, brackets, : and ,
    totals, inside = dict.fromkeys(b"{[:,", 0), 0
    for start in range(0, len(codes), 1 << 20):
        chunk = codes[start:start + (1 << 20)]
        quotes = chunk == ord('"')
        outside = np.cumsum(quotes, dtype=np.uint8)  # wraps, keeping its parity: odd inside a string
        outside += inside
        outside &= 1
        inside = int(outside[-1])
        outside = (outside == 0) & ~quotes
        for char in totals:
            totals[char] += int(np.count_nonzero((chunk == char) & outside))
    return (*totals.values(), int(np.count_nonzero(codes == ord('"'))) // 2)


def _tensor(buf: NDArray[np.uint8], code: str, shape: Sequence[int]) -> NDArray[Any]:
    """The array a safetensors entry's bytes `buf` hold (BF16 widened to float32, native byte order)."""
    if code == "BF16":
        return (buf.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return finish(buf, np.dtype(_DTYPES[code]), shape)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = {}
    for key, value in pairs:
        if key in out:
            raise KeyError(f"duplicate key {short(key)}")
        out[key] = value
    return out


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _entry(key: str, info: object, bad: _Complaint) -> tuple[str, list[int], list[int]]:
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
        raise bad(f"entry {short(key)} must be an object with dtype, shape and data_offsets, got {short(info)}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise bad(f"tensor {short(key)} has dtype {short(dtype)}, which is not supported; supported: "
                  f"{', '.join(sorted(_DTYPES))}")
    if not isinstance(shape, list) or len(shape) > _MAX_DIMS or not all(_is_count(d) for d in shape):
        raise bad(f"tensor {short(key)} has shape {short(shape)}; expected a list of at most {_MAX_DIMS} "
                  f"non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise bad(f"tensor {short(key)} has data_offsets {short(offsets)}; expected [begin, end] with "
                  f"0 <= begin <= end")
    return dtype, shape, offsets


def _check_coverage(spans: list[tuple[int, int, str]], size: int, bad: _Complaint) -> None:
    """The tensors must cover the data buffer exactly: no gaps, no overlaps, nothing after the last."""
    pos = 0
    for begin, end, key in sorted(spans):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap of {begin - pos} bytes before it"
            raise bad(f"tensor {key!r} starts at byte {begin}: it {what}")
        pos = end
    if pos != size:
        raise bad(f"the data buffer has {size - pos} bytes after the last tensor")


def safetensors_bytes(obj: Weights, metadata: Mapping[str, object] | None = None) -> bytes:
    """The bytes of a safetensors file holding `obj` (a Module or a dict of arrays/Tensors)."""
    arrays = _arrays(obj)
    codes = {name: _code(name, arr) for name, arr in arrays.items()}
    order = sorted(arrays, key=lambda k: (-_WRITE_ORDER.index(codes[k]), k))
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks: list[bytes] = []
    pos = 0
    for name in order:
        arr = arrays[name]
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes() if arr.dtype.itemsize > 1 \
            else arr.tobytes()
        header[name] = {"dtype": codes[name], "shape": list(arr.shape), "data_offsets": [pos, pos + len(data)]}
        chunks.append(data)
        pos += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # pad so that the data buffer starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def _code(name: str, arr: NDArray[Any]) -> str:
    dtype = arr.dtype.newbyteorder("<") if arr.dtype.itemsize > 1 else arr.dtype
    if dtype not in _CODES:
        raise TypeError(f"cannot write {name!r}: dtype {arr.dtype} has no safetensors code; "
                        f"supported: {', '.join(str(d) for d in _CODES)}")
    return _CODES[dtype]


def save_safetensors(obj: Weights, path: str | os.PathLike[str],
                     metadata: Mapping[str, object] | None = None) -> None:
    """Write `obj` (a Module or a dict of arrays/Tensors) as a `.safetensors` file (written beside
    `path` and renamed into place)."""
    with atomic_open(path, "wb") as f:
        f.write(safetensors_bytes(obj, metadata))
