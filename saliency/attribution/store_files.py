"""The files of a map store (`store.py`), one at a time: their encodings, what a store's
attributes must hold, which files a store explains (so that replacing it deletes only those),
and writing a file whole.

Nothing here trusts a file: a chunk is checked (its size, its header, its record) before it is
decoded, and whatever does not fit is a reason (a string) the batch is damaged, or a StoreError
naming the store and what is wrong with it.
"""
from __future__ import annotations

import io
import json
import os
import re
import struct
from pathlib import Path
from typing import IO, Any, Optional

import numpy as np

from .._write import atomic_path, is_part

FORMAT_VERSION = 1
# The marker of a store this tool wrote (attribute "format"). A store of the version before it has
# no marker; its attributes hold format_version and map_shape, which also mark it as ours.
MARKER = "saliency-maps map store"
ARRAYS = ("maps", "predicted", "error", "done", "files")
# sizes no store of this tool reaches; a larger one in a store's attributes is damage
MAX_MAP_VALUES, MAX_BATCH_SIZE = 2 ** 28, 2 ** 24
# the file names of a Zarr store that are not all UTF-8 are kept escaped (`escape_name`)
ESCAPED_NAMES = "escaped"


class StoreError(ValueError):
    """A store that cannot be created, opened or continued as asked."""


def shown(value: object, limit: int = 60) -> str:
    """`value!r`, cut to `limit` characters (a damaged attribute may be any size)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_attrs(path: Path, attrs: Any, where: str) -> dict[str, Any]:
    """`attrs` (read from `where`, a file of the store at `path`) if they can be a store's: a
    positive int batch_size, a list of positive ints map_shape, the run's method, seed and options
    of the right types. Else a StoreError naming the store and what is wrong."""
    def bad(what: str) -> StoreError:
        raise StoreError(f"cannot read the map store {path}: {what} in {where}; the store is damaged, make it "
                         f"again with saliency batch")

    if not isinstance(attrs, dict):
        bad(f"the attributes are {shown(attrs)}, not an object")
    version = attrs.get("format_version", FORMAT_VERSION)
    if not _positive_int(version):
        bad(f"format_version is {shown(version)}, not a positive int")
    if version > FORMAT_VERSION:
        raise StoreError(f"the map store {path} has format version {version}, this saliency-maps reads up to "
                         f"{FORMAT_VERSION}; upgrade saliency-maps to read it")
    size = attrs.get("batch_size")
    if not _positive_int(size) or size > MAX_BATCH_SIZE:
        bad(f"batch_size is {shown(size)}, not a positive int (at most {MAX_BATCH_SIZE})")
    shape = attrs.get("map_shape")
    if (not isinstance(shape, list) or not 1 <= len(shape) <= 8 or not all(_positive_int(s) for s in shape)
            or np.prod(shape, dtype=np.float64) > MAX_MAP_VALUES):
        bad(f"map_shape is {shown(shape)}, not a list of positive ints (a map of at most {MAX_MAP_VALUES} values)")
    for key, types in (("method", (str,)), ("seed", (str,)), ("seed_spec", (str, type(None))),
                       ("options", (dict, type(None))), ("record", (dict, type(None))),
                       ("file_names", (str,))):
        if key in attrs and not isinstance(attrs[key], types):
            bad(f"{key} is {shown(attrs[key])}")
    if attrs.get("file_names", ESCAPED_NAMES) != ESCAPED_NAMES:
        bad(f"file_names is {shown(attrs['file_names'])}, not {ESCAPED_NAMES!r}")
    return attrs


def check_files(path: Path, files: Any, where: str) -> list[str]:
    """`files` if it is a list of strings; else a StoreError."""
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise StoreError(f"cannot read the map store {path}: the file names in {where} are not a list of strings; "
                         f"the store is damaged, make it again with saliency batch")
    return files


def read_json(path: str | os.PathLike[str], limit: Optional[int] = None) -> Any:
    """The JSON value of the file at `path` (`limit`: at most that many bytes are read); ValueError
    (with what is wrong) when it is not one."""
    with open(path, "rb") as f:
        data = f.read(-1 if limit is None else limit + 1)
    if limit is not None and len(data) > limit:
        raise ValueError(f"it is over {limit} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def ours(path: Path) -> Optional[str]:
    """"zarr" or "npy" when the folder `path` is a map store this tool wrote (by its marker, or the
    attributes of the version before it), else None."""
    for name, key, kind in (("zarr.json", "attributes", "zarr"), ("index.json", "attrs", "npy")):
        try:
            doc = read_json(Path(path) / name, limit=1 << 24)
        except (OSError, ValueError):
            continue
        attrs = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(attrs, dict) and (attrs.get("format") == MARKER
                                        or ("format_version" in attrs and "map_shape" in attrs)):
            return kind
    return None


# The chunk keys zarr writes: v3 "default" with "/" or ".", and v2's dotted ones.
_ZARR_CHUNK = re.compile(r"c(/\d+)+|c(\.\d+)+|\d+(\.\d+)*")
_FOLDER_FILE = re.compile(r"index\.json|maps\.\d+\.npy|batch\.\d+\.json")


def _explained(rel: str, kind: str) -> bool:
    """Whether the file `rel` (a relative posix path) is one a store of `kind` writes."""
    if is_part(rel):  # what an interrupted writer leaves
        return True
    if kind == "npy":
        return bool(_FOLDER_FILE.fullmatch(rel))
    head, _, rest = rel.partition("/")
    if not rest:
        return head == "zarr.json"
    return head in ARRAYS and (rest == "zarr.json" or bool(_ZARR_CHUNK.fullmatch(rest)))


def _folders_explained(rel: str, kind: str) -> bool:
    """Whether the folder `rel` is one a store of `kind` makes."""
    parts = rel.split("/")
    return kind == "zarr" and parts[0] in ARRAYS and (len(parts) == 1 or (parts[1] == "c" and
                                                                          all(p.isdigit() for p in parts[2:])))


def store_contents(path: Path, kind: str) -> tuple[list[str], list[str]]:
    """(files and folders of the store of `kind` at `path`, deepest first; the other entries), as
    paths relative to it. A symbolic link is never the store's."""
    own: list[str] = []
    other: list[str] = []
    for root, dirs, names in os.walk(path, topdown=False):
        base = Path(root).relative_to(path)
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = (base / name).as_posix()
            fits = not os.path.islink(os.path.join(root, name)) and _explained(rel, kind)
            (own if fits else other).append(rel)
        for name in dirs:
            rel = (base / name).as_posix()
            if not os.path.islink(os.path.join(root, name)):
                (own if _folders_explained(rel, kind) else other).append(rel + "/")
    return own, other


def _listed(names: list[str], limit: int = 3) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def clear_for_new_store(path: str | os.PathLike[str]) -> None:
    """Room for a new store at `path`: nothing is there, an empty folder, or a map store this tool
    wrote that holds only its own files, which are deleted (file by file, never a whole tree).
    Anything else is refused (StoreError) and nothing is deleted."""
    path = Path(path)
    keep = "nothing was deleted: move it away or give another --out"
    if path.is_symlink():
        raise StoreError(f"{path} is a symbolic link, not a map store; {keep}")
    if not path.exists():
        return
    if not path.is_dir():
        raise StoreError(f"{path} is a file, not a map store; {keep}")
    kind = ours(path)
    if kind is None:
        entries = sorted(os.listdir(path))
        if entries:
            raise StoreError(f"{path} is not a map store of saliency-maps (it holds {_listed(entries)}); {keep}")
        return
    own, other = store_contents(path, kind)
    if other:
        raise StoreError(f"{path} is a map store, but also holds files that are not the store's "
                         f"({_listed(sorted(other))}); nothing was deleted: move them away or give another --out")
    for rel in own:  # deepest first: a folder after its files
        target = path / rel
        try:
            target.rmdir() if rel.endswith("/") else target.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot replace the map store {path}: {target}: {exc.strerror or exc}") from None
    try:
        path.rmdir()
    except OSError as exc:
        raise StoreError(f"cannot replace the map store {path}: {exc.strerror or exc} (a file appeared in it while "
                         f"it was deleted?)") from None


def write_file(target: str | os.PathLike[str], data: bytes) -> None:
    """`data` (bytes) as the file `target`, written whole (`atomic_path`). An OSError names
    `target` (not the temporary file beside it)."""
    try:
        _write_chunk(target, data)
    except OSError as exc:
        if exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(target)) from exc


def _write_chunk(target: str | os.PathLike[str], data: bytes) -> None:
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as part:
        part.write_bytes(data)


# -- encodings ----------------------------------------------------------------------------------

def plain_chunk(values: np.ndarray, size: int, fill: Any, dtype: Any) -> bytes:
    """A chunk of `size` rows in zarr's `bytes` encoding: `values` (its first rows) and `fill` after."""
    out = np.full((size,) + values.shape[1:], fill, np.dtype(dtype))
    out[:len(values)] = values
    return out.tobytes()


def vlen_utf8_chunk(strings: list[str], size: int) -> bytes:
    """A chunk of `size` strings in zarr's `vlen-utf8` encoding: the item count, then per item its
    length in bytes and its UTF-8 bytes (counts and lengths little-endian uint32), "" after
    `strings`. A character UTF-8 cannot hold (a lone surrogate) is written as its escape, \\udcff."""
    items = [s.encode("utf-8", "backslashreplace") for s in strings] + [b""] * (size - len(strings))
    return b"".join([struct.pack("<I", len(items))] + [struct.pack("<I", len(i)) + i for i in items])


def read_vlen_utf8(data: bytes, count: int) -> Optional[list[str]]:
    """The `count` strings of a `vlen-utf8` chunk, or None when `data` is not one."""
    if len(data) < 4 or struct.unpack_from("<I", data)[0] != count:
        return None
    out: list[str] = []
    pos = 4
    for _ in range(count):
        if pos + 4 > len(data):
            return None
        n = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if pos + n > len(data):
            return None
        try:
            out.append(data[pos:pos + n].decode("utf-8"))
        except UnicodeDecodeError:
            return None
        pos += n
    return out if pos == len(data) else None


def npy_bytes(array: np.ndarray) -> bytes:
    """`array` as the bytes of a .npy file."""
    out = io.BytesIO()
    np.lib.format.write_array(out, np.ascontiguousarray(array), allow_pickle=False)
    return out.getvalue()


# The header np.save writes (keys sorted, shape a tuple, padded with spaces to a line): the only
# one read here. numpy's own parser evaluates the header, which a damaged file can make take
# minutes and gigabytes.
_NPY_HEADER = re.compile(r"\{'descr': '([<>|=]?[a-z]\d+)', 'fortran_order': (True|False), "
                         r"'shape': \(((?:\d+, )*\d*,?)\), \} *\n")


def _npy_layout(f: IO[bytes]) -> str | tuple[np.dtype[Any], bool, tuple[int, ...], int]:
    """(dtype, fortran order, shape, data offset) of the .npy file open as `f`, or a string saying
    what is wrong."""
    start = f.read(10)
    if len(start) < 10 or start[:6] != b"\x93NUMPY" or start[6] not in (1, 2, 3):
        return "is not a .npy file"
    if start[6] == 1:
        size, offset = int.from_bytes(start[8:10], "little"), 10
    else:
        start += f.read(2)
        size, offset = int.from_bytes(start[8:12], "little"), 12
    if size > 4096:
        return f"has a .npy header of {size} bytes"
    header = f.read(size).decode("latin-1")
    m = _NPY_HEADER.fullmatch(header)
    if m is None:
        return "has a .npy header this tool does not write"
    shape = tuple(int(d) for d in m.group(3).replace(",", " ").split())
    return np.dtype(m.group(1)), m.group(2) == "True", shape, offset + size


def read_npy(path: Path, shape: tuple[int, ...], read: bool = True) -> np.ndarray | str | None:
    """The float32 array of shape `shape` in the .npy file `path` (None with read=False), after
    checking its header and its size; a string saying what is wrong when it is not that array."""
    try:
        with open(path, "rb") as f:
            layout = _npy_layout(f)
            if isinstance(layout, str):
                return f"{path.name} {layout}"
            dtype, fortran, got, offset = layout
            if got != tuple(shape) or fortran or dtype != np.dtype("<f4"):
                return f"{path.name} holds {dtype} {got}, not float32 {tuple(shape)}"
            count = int(np.prod(shape))
            size = os.fstat(f.fileno()).st_size
            if size != offset + count * 4:
                return f"{path.name} is {size} bytes, not {offset + count * 4}"
            return np.fromfile(f, "<f4", count).reshape(shape) if read else None
    except FileNotFoundError:
        return f"{path.name} is missing"
    except (OSError, TypeError) as exc:  # TypeError: a dtype numpy does not know
        return f"{path.name} cannot be read ({getattr(exc, 'strerror', None) or exc})"


def file_bytes(path: str | os.PathLike[str], size: Optional[int] = None, name: Optional[str] = None) -> bytes | str:
    """The bytes of the file `path`; a string saying what is wrong (calling it `name`, default its
    path) when it is missing, unreadable or not `size` bytes (checked before it is read)."""
    name = name or str(path)
    try:
        with open(path, "rb") as f:
            got = os.fstat(f.fileno()).st_size
            if size is not None and got != size:
                return f"{name} is {got} bytes, not {size}"
            return f.read()
    except FileNotFoundError:
        return f"{name} is missing"
    except OSError as exc:
        return f"{name} cannot be read ({exc.strerror or exc})"


# -- names UTF-8 cannot hold --------------------------------------------------------------------

_ESCAPE = re.compile("[\\\\\ud800-\udfff]")
_UNESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4})")


def utf8(name: str) -> bool:
    """Whether `name` is text UTF-8 can hold (a name Python read from bytes that are not UTF-8
    holds lone surrogates, e.g. '\\udcff')."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escape_name(name: str) -> str:
    """`name` with each backslash doubled and each lone surrogate as \\uXXXX: valid UTF-8, and
    `unescape_name` gives `name` back exactly."""
    return _ESCAPE.sub(lambda m: "\\\\" if m.group() == "\\" else f"\\u{ord(m.group()):04x}", name)


def unescape_name(text: str) -> str:
    """The name `escape_name` made `text` of."""
    return _UNESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)), text)
