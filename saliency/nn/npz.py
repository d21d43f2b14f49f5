"""Reading `.npz` weight files with `zipfile` and our own `.npy` header parser, trusting no length field.

An `.npz` file is a zip archive of `NAME.npy` members. A `.npy` member is the magic b"\\x93NUMPY",
a version (1, 0), (2, 0) or (3, 0), the header length (uint16 little-endian for version 1,
uint32 after), that many bytes of a Python dict literal such as
{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}, then the array's bytes.

Nothing is allocated from a size the file states until that size is checked against one the
file cannot fake: an array's byte count (computed from its header with Python ints) must equal
what the zip directory says its member holds, and the zip directory may not claim more than
deflate can produce from the bytes the file really has (`MAX_RATIO` times its size).
"""
import ast
import math
import os
import re
import struct
import zipfile
import zlib
from typing import IO, Any, Literal, Sequence, overload

import numpy as np
from numpy.typing import NDArray

from .._typing import Shape

from .errors import WeightsError, one_line, read_exactly, short, too_big

MAX_RATIO = 1100     # deflate expands at most ~1032:1; a member that claims more is a zip bomb
_MAX_HEADER = 65536  # numpy writes .npy headers of a few hundred bytes
_MAX_DIMS = 32
_MAGIC = b"\x93NUMPY"
# plain numeric dtypes only: object and structured dtypes (which np.load would unpickle) are refused
_DESCR = re.compile(r"[<>|=]?(?:\?|b1|[iu][1248]|f(?:2|4|8|16)|c(?:8|16|32))")
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError,
               OverflowError, RuntimeError, ValueError, struct.error)


class _Bad(Exception):
    """A defect of the archive; `read_npz` turns it into a WeightsError naming the file."""


@overload
def read_npz(path: str | os.PathLike[str], headers_only: Literal[False] = False) -> dict[str, NDArray[Any]]: ...


@overload
def read_npz(path: str | os.PathLike[str], headers_only: Literal[True]) -> dict[str, tuple[np.dtype[Any], Shape]]: ...


@overload
def read_npz(path: str | os.PathLike[str], headers_only: bool = False) -> dict[str, Any]: ...


def read_npz(path: str | os.PathLike[str], headers_only: bool = False) -> dict[str, Any]:
    """{name: ndarray} from the `.npz` file at `path` (arrays in native byte order), or with
    `headers_only` {name: (dtype, shape)}; WeightsError "PATH is not a readable .npz file: REASON"
    for anything malformed."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        try:
            size = os.fstat(f.fileno()).st_size
            with zipfile.ZipFile(f) as zf:
                return _members(zf, size, headers_only)
        except _Bad as exc:
            reason = str(exc)
        except OSError as exc:  # e.g. a seek to a negative offset the zip records computed
            reason = f"reading it failed ({one_line(exc)}); its zip records may point outside the file"
        except _ZIP_ERRORS as exc:
            reason = one_line(exc)
    raise WeightsError(f"{path} is not a readable .npz file: {reason}")


def read_npz_shapes(path: str | os.PathLike[str]) -> dict[str, tuple[np.dtype[Any], Shape]]:
    """{name: (dtype, shape)} of the `.npz` file at `path`, from the `.npy` headers alone (no array
    data is read or decompressed beyond each header), so names and shapes can be checked against a
    model before anything is allocated; WeightsError as `read_npz` for a malformed archive."""
    return read_npz(path, headers_only=True)


def _members(zf: zipfile.ZipFile, size: int, headers_only: bool = False) -> dict[str, Any]:
    infos = zf.infolist()
    total = sum(info.file_size for info in infos)
    if total > MAX_RATIO * max(size, 1):
        raise _Bad(f"its members claim {total} bytes in all, more than {MAX_RATIO} times the file's {size} bytes "
                   f"(a zip bomb?)")
    arrays: dict[str, Any] = {}
    for info in infos:
        name = info.filename
        if not name.endswith(".npy"):
            raise _Bad(f"member {short(name)} is not a .npy array")
        if name[:-4] in arrays:
            raise _Bad(f"it has two members named {short(name)}")
        _check_member(info)
        with zf.open(info) as member:
            arrays[name[:-4]] = _read_npy(member, info, headers_only)
    return arrays


def _check_member(info: zipfile.ZipInfo) -> None:
    """Refuse what zipfile would decrypt, decompress beyond deflate's ratio, or read past the member."""
    name = short(info.filename)
    if info.flag_bits & 0x1:
        raise _Bad(f"member {name} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise _Bad(f"member {name} uses compression method {info.compress_type}; only stored and deflated "
                   f"members are read")
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise _Bad(f"stored member {name} says it holds {info.file_size} bytes in {info.compress_size}")
    if info.file_size > MAX_RATIO * max(info.compress_size, 1):
        raise _Bad(f"member {name} claims {info.file_size} bytes from {info.compress_size} compressed bytes, "
                   f"more than deflate's ratio allows (a zip bomb?)")


def _read_npy(member: IO[bytes], info: zipfile.ZipInfo,
              headers_only: bool = False) -> NDArray[Any] | tuple[np.dtype[Any], Shape]:
    name = short(info.filename)
    prefix = member.read(8)
    if len(prefix) < 8 or prefix[:6] != _MAGIC:
        raise _Bad(f"member {name} is not a .npy array (it does not start with the .npy magic)")
    version = (prefix[6], prefix[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise _Bad(f"member {name} has .npy format version {version[0]}.{version[1]}; versions 1.0, 2.0 "
                   f"and 3.0 are read")
    width = 2 if version[0] == 1 else 4
    field = member.read(width)
    if len(field) < width:
        raise _Bad(f"member {name} ends inside its .npy header")
    (length,) = struct.unpack("<H" if width == 2 else "<I", field)
    start = 8 + width + length
    if start > info.file_size:
        raise _Bad(f"member {name} has a .npy header length of {length} bytes, more than the member's "
                   f"{info.file_size} bytes")
    if length > _MAX_HEADER:
        raise _Bad(f"member {name} has a .npy header length of {length} bytes; at most {_MAX_HEADER} are read")
    text = member.read(length)
    if len(text) < length:
        raise _Bad(f"member {name} ends inside its .npy header")
    dtype, fortran, shape = _header(text.decode("utf-8" if version[0] == 3 else "latin1", "replace"), name)
    nbytes = math.prod(shape) * dtype.itemsize
    if start + nbytes != info.file_size:
        raise _Bad(f"member {name} declares shape {short(shape)} of {dtype.str} ({nbytes} bytes) but holds "
                   f"{info.file_size - start} bytes of data")
    if too_big(shape, dtype.itemsize):  # only an empty array gets here with such a shape
        raise _Bad(f"member {name} has shape {short(shape)}, too large for any array")
    if headers_only:
        return dtype, shape
    try:  # nbytes <= MAX_RATIO x the compressed size, yet a large lying file can still ask for too much
        buf, got = read_exactly(member, nbytes)
    except MemoryError:
        raise _Bad(f"member {name} declares {nbytes} bytes of data, more than this machine can allocate") from None
    if got < nbytes or member.read(1):  # the extra read also makes zipfile check the CRC
        raise _Bad(f"member {name} ends after {got} of its {nbytes} data bytes")
    return finish(buf, dtype, shape, fortran)


def finish(buf: NDArray[np.uint8], dtype: np.dtype[Any], shape: Sequence[int],
           fortran: bool = False) -> NDArray[Any]:
    """The array of `shape` and `dtype` whose bytes are the uint8 array `buf`, in native byte
    order; bool values are read as byte != 0."""
    if dtype.kind == "b":
        return (buf != 0).reshape(shape, order="F" if fortran else "C")
    arr = buf.view(dtype).reshape(shape, order="F" if fortran else "C")
    return arr if dtype.isnative else arr.astype(dtype.newbyteorder("="))


def _header(text: str, name: str) -> tuple[np.dtype[Any], bool, Shape]:
    """(dtype, fortran_order, shape) from a .npy header's dict literal, every field checked."""
    try:
        header = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        header = None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise _Bad(f"member {name} has a .npy header that is not a dict literal with the keys descr, "
                   f"fortran_order and shape")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    try:
        dtype = np.dtype(descr) if isinstance(descr, str) and _DESCR.fullmatch(descr) else None
    except TypeError:
        dtype = None
    if dtype is None:
        raise _Bad(f"member {name} has dtype {short(descr)}; only bool, integer, float and complex arrays are "
                   f"read (object and structured arrays, which need pickle, are refused)")
    if type(fortran) is not bool:
        raise _Bad(f"member {name} has fortran_order {short(fortran)}; expected True or False")
    if not (isinstance(shape, tuple) and len(shape) <= _MAX_DIMS
            and all(type(d) is int and d >= 0 for d in shape)):
        raise _Bad(f"member {name} has shape {short(shape)}; expected a tuple of at most {_MAX_DIMS} "
                   f"non-negative integers")
    return dtype, fortran, shape
