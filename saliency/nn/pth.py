"""Reading PyTorch checkpoints (what `torch.save` writes) with NumPy and the standard library alone.

The format of torch >= 1.6 is a zip archive whose entries sit in one folder, PREFIX/:

    data.pkl     the saved object as a pickle (protocol 2 unless torch.save was told otherwise); a
                 tensor in it is torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
                 requires_grad, backward_hooks[, metadata]) (_rebuild_tensor_v3 with a trailing dtype for
                 dtypes that have no typed storage class), a parameter _rebuild_parameter(tensor, ...),
                 and a storage the persistent id ("storage", torch.FloatStorage, KEY, LOCATION, NUMEL)
    data/KEY     the storage's NUMEL elements (several tensors may be views of one storage)
    byteorder    "little" or "big", the byte order of every storage (absent: little)
    version, .format_version, .storage_alignment, .data/serialization_id   (not needed to read it)

Offset, size and stride count elements; a tensor is the strided view of its storage they describe,
copied here to a contiguous array of its own. BFloat16 is widened to float32 (NumPy has no
bfloat16); the device a storage was saved from is ignored.

Nothing in the file runs: the pickle is read by an Unpickler whose `find_class` resolves only the
names a state dict needs, each to a constructor of this module (a tensor becomes a record of its
storage, offset, size and stride, turned into an array only if it belongs to the state dict that is
returned); any other name (os.system, builtins.eval, a pickled nn.Module, ...) is refused with
`WeightsError` before it could be called. Every size the file states is checked, with Python ints,
against one it cannot fake before anything is allocated for it: an entry against the file's size
(`MAX_RATIO` times it when deflated, as for `.npz`), a storage against its entry, a tensor's last
element against its storage, and all the arrays together against `MAX_RATIO` times the file's size.
"""
import collections
import io
import math
import os
import pickle
import pickletools
import struct
import zipfile
import zlib

import numpy as np

from .errors import WeightsError, one_line, read_exactly, short, too_big
from .npz import MAX_RATIO

__all__ = ["LEGACY_MAGIC", "is_torch_archive", "read_pth"]

MAX_PICKLE = 100_000_000  # torch writes a data.pkl of about 100 bytes per tensor
_MAX_DIMS = 32
# the legacy (non-zip) format starts with a pickled magic number, 0x1950a86a20f9469cfc6c
LEGACY_MAGIC = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")
_WRAPPERS = ("state_dict", "model", "model_state_dict", "net")
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError,
               OverflowError, RuntimeError, ValueError, struct.error)
# torch.save never writes these: old-style instances, extension registries,
# out-of-band buffers and text persistent ids
_REFUSED_OPCODES = {"INST", "OBJ", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER", "PERSID"}

# dtype name -> NumPy dtype code (little-endian), "bf16" for bfloat16, None for a dtype not read
_DTYPES = {"float16": "<f2", "half": "<f2", "bfloat16": "bf16", "float32": "<f4", "float": "<f4",
           "float64": "<f8", "double": "<f8", "int8": "i1", "int16": "<i2", "short": "<i2", "int32": "<i4",
           "int": "<i4", "int64": "<i8", "long": "<i8", "uint8": "u1", "bool": "?", "uint16": "<u2",
           "uint32": "<u4", "uint64": "<u8", "complex64": "<c8", "cfloat": "<c8", "complex128": "<c16",
           "cdouble": "<c16"}
_SUPPORTED = ", ".join(sorted({n for n in _DTYPES if any(c.isdigit() for c in n) or n == "bool"}))
_UNREAD_DTYPES = ["complex32", "chalf", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                  "float8_e8m0fnu", "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
                  "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16"]
_UNREAD_DTYPES += [f"{u}int{n}" for u in ("", "u") for n in range(1, 8)]
# storage class -> the dtype name of its elements
_STORAGES = {"HalfStorage": "float16", "BFloat16Storage": "bfloat16", "FloatStorage": "float32",
             "DoubleStorage": "float64", "CharStorage": "int8", "ShortStorage": "int16", "IntStorage": "int32",
             "LongStorage": "int64", "ByteStorage": "uint8", "BoolStorage": "bool",
             "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128", "QInt8Storage": "qint8",
             "QUInt8Storage": "quint8", "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2",
             "QUInt2x4Storage": "quint2x4"}


class _Bad(Exception):
    """A defect of the archive; `read_pth` turns it into a WeightsError naming the file."""


class _Refused(Exception):
    """A name or persistent id that the pickle asks for and that is not on the allow-list."""


# ---------------------------------------------------------------------------------------------
# What the pickle may build: read-only records (pickle's BUILD cannot change them) and plain data


class _Record:
    __slots__ = ()

    def __init__(self, **fields):
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")


class _DType(_Record):
    """A torch dtype named in the pickle (e.g. GLOBAL 'torch float32')."""
    __slots__ = ("name", "code")


class _StorageType(_Record):
    """A storage class named in the pickle (torch.FloatStorage, torch.storage.UntypedStorage, ...)."""
    __slots__ = ("name", "dtype")


class _Storage(_Record):
    """A persistent id: `numel` elements of `dtype` in the archive's entry data/KEY."""
    __slots__ = ("key", "dtype", "numel")


class _Tensor(_Record):
    """A tensor as the pickle describes it; `_array` checks every field and copies out its elements."""
    __slots__ = ("storage", "offset", "size", "stride", "dtype", "metadata")


class _TensorType(_Record):
    """torch.Tensor or torch.nn.Parameter, as _rebuild_from_type_v2 names the class of a tensor."""
    __slots__ = ("name",)


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    if not isinstance(storage, _Storage):
        raise _Bad(f"a tensor's storage is {short(storage)}, not a storage of the archive")
    return _Tensor(storage=storage, offset=offset, size=size, stride=stride, dtype=storage.dtype, metadata=metadata)


def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    if not isinstance(storage, _Storage) or not isinstance(dtype, _DType):
        raise _Bad(f"a tensor has the storage {short(storage)} and dtype {short(dtype)}, not a storage of the "
                   f"archive and a torch dtype")
    return _Tensor(storage=storage, offset=offset, size=size, stride=stride, dtype=dtype, metadata=metadata)


def _rebuild_parameter(data, requires_grad=True, backward_hooks=None, state=None):
    if not isinstance(data, _Tensor):
        raise _Bad(f"a parameter holds {short(data)}, not a tensor")
    return data


def _rebuild_from_type_v2(func, new_type, args, state):
    """A tensor with Python attributes (ignored here): func(*args) rebuilds the tensor itself."""
    rebuilds = (_rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter)
    if func not in rebuilds or not isinstance(new_type, _TensorType):
        raise _Bad(f"_rebuild_from_type_v2 was given {short(func)} and {short(new_type)}, not a tensor rebuild")
    if not isinstance(args, tuple):
        raise _Bad(f"_rebuild_from_type_v2 was given the arguments {short(args)}, not a tuple")
    return func(*args)


def _ordered_dict(items=()):
    return collections.OrderedDict(_checked(items, (list, tuple), "OrderedDict"))


def _device(kind, index=None):
    if not isinstance(kind, str) or not (index is None or type(index) is int):
        raise _Bad(f"torch.device was given {short((kind, index))}")
    return kind if index is None else f"{kind}:{index}"


def _size(dims=()):
    dims = tuple(_checked(dims, (list, tuple), "torch.Size"))
    if not all(type(d) is int for d in dims):
        raise _Bad(f"torch.Size was given {short(dims)}, not integers")
    return dims


def _encode(text, encoding="utf-8"):
    """_codecs.encode, which protocol-2 pickles use to write bytes: only from a string to latin-1."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Bad(f"_codecs.encode was given {short((text, encoding))}, not a string to encode as latin1")
    return text.encode("latin1")


def _collection(kind):
    def build(items=()):
        return kind(_checked(items, (list, tuple, set, frozenset), kind.__name__))
    return build


def _bytearray(data=b""):
    if not isinstance(data, (bytes, bytearray)):  # bytearray(10**12) would allocate a terabyte
        raise _Bad(f"bytearray was given {short(data)}, not bytes")
    return bytearray(data)


def _complex(real=0.0, imag=0.0):
    if not all(type(x) in (int, float) for x in (real, imag)):
        raise _Bad(f"complex was given {short((real, imag))}, not numbers")
    return complex(real, imag)


def _checked(items, kinds, what):
    if not isinstance(items, kinds):
        raise _Bad(f"{what} was given {short(items)}, not a {kinds[0].__name__}")
    return items


def _allowed():
    """module.name -> what find_class returns for it: every name a state dict's pickle uses."""
    out = {"collections.OrderedDict": _ordered_dict,
           "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
           "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
           "torch._utils._rebuild_parameter": _rebuild_parameter,
           "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
           "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
           "torch.Tensor": _TensorType(name="Tensor"), "torch._tensor.Tensor": _TensorType(name="Tensor"),
           "torch.nn.parameter.Parameter": _TensorType(name="Parameter"),
           "torch.storage.UntypedStorage": _StorageType(name="UntypedStorage", dtype=_DType(name="uint8", code="u1")),
           "torch.UntypedStorage": _StorageType(name="UntypedStorage", dtype=_DType(name="uint8", code="u1")),
           "torch.device": _device, "torch.Size": _size, "_codecs.encode": _encode}
    for name, code in _DTYPES.items():
        out[f"torch.{name}"] = _DType(name=name, code=code)
    for name in _UNREAD_DTYPES:
        out[f"torch.{name}"] = _DType(name=name, code=None)
    for name, dtype in _STORAGES.items():
        for module in ("torch", "torch.cuda"):  # files saved from a GPU before torch 2.0 name torch.cuda's
            out[f"{module}.{name}"] = _StorageType(name=name, dtype=out[f"torch.{dtype}"])
    for module in ("builtins", "__builtin__"):  # protocol 2 writes Python 2's name
        out.update({f"{module}.set": _collection(set), f"{module}.frozenset": _collection(frozenset),
                    f"{module}.bytearray": _bytearray, f"{module}.complex": _complex})
    return out


_ALLOWED = _allowed()


class _Unpickler(pickle.Unpickler):
    """Resolves only the names in _ALLOWED and only storage persistent ids; refuses the rest."""

    def find_class(self, module, name):
        found = _ALLOWED.get(f"{module}.{name}")
        if found is None:
            raise _Refused(f"{module}.{name}")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise _Refused(f"the persistent id {short(pid)}")
        _, kind, key, location, numel = pid
        if not (isinstance(kind, _StorageType) and type(key) is str and isinstance(location, str)
                and type(numel) is int and numel >= 0):
            raise _Bad(f"a storage's persistent id {short(pid)} is not (\"storage\", a storage class, key, "
                       f"location, element count)")
        return _Storage(key=key, dtype=kind.dtype, numel=numel)


# ---------------------------------------------------------------------------------------------
# The archive


def is_torch_archive(path):
    """Whether the zip file at `path` is a torch.save or torch.jit.save archive, judged by its entries
    (PREFIX/data.pkl; when the zip directory cannot be read, the first entry's local header)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return any(_top_entry(name, "data.pkl") or _top_entry(name, "constants.pkl") for name in zf.namelist())
    except (OSError, *_ZIP_ERRORS):
        pass
    try:
        with open(path, "rb") as f:
            head = f.read(30 + 1024)
    except OSError:
        return False
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        return False
    (n,) = struct.unpack("<H", head[26:28])
    return _top_entry(head[30:30 + n].decode("utf-8", "replace"), "data.pkl")  # torch writes data.pkl first


def _top_entry(name, leaf):
    """Whether `name` is PREFIX/leaf for a one-level PREFIX."""
    folder, _, rest = name.partition("/")
    return bool(folder) and rest == leaf


def read_pth(path):
    """{name: ndarray} from the state dict in the PyTorch checkpoint at `path`: a bare state dict, or
    one under "state_dict", "model", "model_state_dict" or "net" in a dict (its other entries are
    ignored), with DataParallel's "module." prefix removed when every key has it. WeightsError names
    the file and the defect, or says why the file is refused (a legacy or TorchScript file, a pickle
    that asks for anything but tensors and containers)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        if f.read(len(LEGACY_MAGIC)) == LEGACY_MAGIC:
            raise WeightsError(
                f"{path} is a PyTorch checkpoint in the legacy format (torch.save before PyTorch 1.6, or with "
                f"_use_new_zipfile_serialization=False), which is not read; convert it with a recent PyTorch: "
                f"torch.save(torch.load(\"{path}\"), \"new.pth\"), or save its state dict with safetensors")
        f.seek(0)
        try:
            size = os.fstat(f.fileno()).st_size
            with zipfile.ZipFile(f) as zf:
                return _Archive(path, f, zf, size).state_dict()
        except WeightsError:  # a refusal, worded by itself (a ValueError, like some zip errors)
            raise
        except _Bad as exc:
            reason = str(exc)
        except OSError as exc:
            reason = f"reading it failed ({one_line(exc)}); its zip records may point outside the file"
        except _ZIP_ERRORS as exc:
            reason = f"{one_line(exc)} (a truncated or damaged file?)"
    raise WeightsError(f"{path} is not a readable PyTorch checkpoint: {reason}")


class _Archive:
    def __init__(self, path, f, zf, size):
        self.path, self.f, self.zf, self.size = path, f, zf, size
        infos = zf.infolist()
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            raise _Bad("it has two entries of the same name")
        if any(_top_entry(name, "constants.pkl") or name.partition("/")[2].startswith("code/") for name in names):
            raise WeightsError(
                f"{path} is a TorchScript model (torch.jit.save), not a state dict; save its weights instead: "
                f"torch.save(torch.jit.load(\"{path}\").state_dict(), \"weights.pth\")")
        pickles = [name for name in names if _top_entry(name, "data.pkl")]
        if len(pickles) != 1:
            raise _Bad("it has no PREFIX/data.pkl entry" if not pickles else "it has several PREFIX/data.pkl entries")
        self.prefix = pickles[0][:-len("data.pkl")]
        self.infos = {info.filename: info for info in infos}
        total = sum(info.file_size for info in infos)
        if total > MAX_RATIO * max(size, 1):
            raise _Bad(f"its entries claim {total} bytes in all, more than {MAX_RATIO} times the file's {size} "
                       f"bytes (a zip bomb?)")
        self.budget = MAX_RATIO * max(size, 1)  # bytes the returned arrays may take in all
        self.storages = {}                      # key -> uint8 array of data/KEY

    def state_dict(self):
        order = self._byteorder()
        obj = self._unpickle()
        chosen = _choose(obj)
        arrays = {}
        for key, value in chosen.items():
            if not isinstance(key, str):
                raise _Bad(f"its state dict has the key {short(key)}, which is not a string")
            if isinstance(value, _Tensor):
                arrays[key] = self._array(value, key, order)
            elif type(value) in (bool, int, float) and (type(value) is not int or -2 ** 63 <= value < 2 ** 63):
                arrays[key] = np.asarray(value)  # e.g. num_batches_tracked saved as a Python int
        if arrays and all(key.startswith("module.") for key in arrays):  # saved from nn.DataParallel
            arrays = {key[len("module."):]: value for key, value in arrays.items()}
        return arrays

    def _byteorder(self):
        name = self.prefix + "byteorder"
        if name not in self.infos:
            return "<"  # written before torch recorded it: little-endian
        text = bytes(self._entry(name, limit=64)).decode("ascii", "replace").strip()
        if text not in ("little", "big"):
            raise _Bad(f"its byteorder entry says {short(text)}; expected little or big")
        return "<" if text == "little" else ">"

    def _unpickle(self):
        data = bytes(self._entry(self.prefix + "data.pkl", limit=MAX_PICKLE))
        try:  # check every opcode and length before anything is built
            for count, (op, arg, _) in enumerate(pickletools.genops(data)):
                if op.name in _REFUSED_OPCODES:
                    raise _Bad(f"its data.pkl uses the pickle opcode {op.name}, which torch.save does not write")
                if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and arg > count:  # the memo grows to the index
                    raise _Bad(f"its data.pkl stores memo entry {arg} after {count} opcodes; a pickler numbers "
                               f"them in order")
        except _Bad:
            raise
        except Exception as exc:  # noqa: BLE001 -- any defect of the bytes, described in one line
            raise _Bad(f"its data.pkl is not a valid pickle ({one_line(exc)})") from None
        try:
            return _Unpickler(io.BytesIO(data)).load()
        except _Bad:
            raise
        except _Refused as exc:
            raise WeightsError(_refusal(self.path, str(exc))) from None
        except Exception as exc:  # noqa: BLE001 -- a malformed pickle can raise anything; nothing of it ran
            raise _Bad(f"its data.pkl is not a state dict torch.save writes ({type(exc).__name__}: "
                       f"{one_line(exc)})") from None

    def _entry(self, name, limit=None):
        """The bytes of the entry `name` as a uint8 array, its declared size checked first."""
        info = self.infos.get(name)
        if info is None:
            raise _Bad(f"it has no entry {short(name)}")
        shown = short(name)
        if info.flag_bits & 0x1:
            raise _Bad(f"entry {shown} is encrypted")
        if limit is not None and info.file_size > limit:
            raise _Bad(f"entry {shown} claims {info.file_size} bytes; at most {limit} are read")
        if info.compress_type == zipfile.ZIP_STORED:
            return self._stored(info, shown)
        if info.compress_type != zipfile.ZIP_DEFLATED:
            raise _Bad(f"entry {shown} uses compression method {info.compress_type}; only stored and deflated "
                       f"entries are read")
        if info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise _Bad(f"entry {shown} claims {info.file_size} bytes from {info.compress_size} compressed bytes, "
                       f"more than deflate's ratio allows (a zip bomb?)")
        with self.zf.open(info) as member:
            buf, got = read_exactly(member, info.file_size)
            if got < info.file_size or member.read(1):  # the extra read makes zipfile check the CRC
                raise _Bad(f"entry {shown} does not hold the {info.file_size} bytes it claims")
        return buf

    def _stored(self, info, shown):
        """A stored entry read at its offset (torch writes them so; its CRC may be 0 when torch was told
        not to compute it, which zipfile would reject)."""
        if info.compress_size != info.file_size:
            raise _Bad(f"stored entry {shown} says it holds {info.file_size} bytes in {info.compress_size}")
        self.f.seek(info.header_offset)
        head = self.f.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise _Bad(f"entry {shown} has no local header where the zip directory says")
        name_length, extra_length = struct.unpack("<HH", head[26:30])
        start = info.header_offset + 30 + name_length + extra_length
        if start + info.file_size > self.size:
            raise _Bad(f"entry {shown} ends at byte {start + info.file_size} of a {self.size}-byte file "
                       f"(truncated file?)")
        self.f.seek(start)
        buf, got = read_exactly(self.f, info.file_size)
        if got < info.file_size:
            raise _Bad(f"entry {shown} ends after {got} of its {info.file_size} bytes")
        if info.CRC and zlib.crc32(buf) != info.CRC:
            raise _Bad(f"entry {shown} fails its CRC-32 check (a damaged file?)")
        return buf

    def _array(self, t, key, order):
        """The contiguous array of the tensor record `t` (state-dict key `key`), every field checked."""
        storage, dtype = t.storage, t.dtype
        what = f"tensor {short(key)}"
        if dtype.code is None:
            raise _Bad(f"{what} has dtype {dtype.name}, which is not read; supported: {_SUPPORTED}")
        if storage.dtype.code is None:
            raise _Bad(f"{what} has a storage of {storage.dtype.name}, which is not read")
        code = "<u2" if dtype.code == "bf16" else dtype.code
        elem = np.dtype(code if order == "<" else code.replace("<", ">"))
        storage_item = 2 if storage.dtype.code == "bf16" else np.dtype(storage.dtype.code).itemsize
        nbytes = storage.numel * storage_item
        count = nbytes // elem.itemsize
        size, stride, offset = t.size, t.stride, t.offset
        if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride) <= _MAX_DIMS
                and all(type(d) is int and d >= 0 for d in size + stride)):
            raise _Bad(f"{what} has size {short(size)} and stride {short(stride)}; expected two tuples of at most "
                       f"{_MAX_DIMS} non-negative integers of the same length")
        if type(offset) is not int or offset < 0:
            raise _Bad(f"{what} has storage offset {short(offset)}; expected a non-negative integer")
        out_item = 4 if dtype.code == "bf16" else elem.itemsize
        if too_big(size, out_item):
            raise _Bad(f"{what} has size {short(size)}, too large for any array")
        metadata = t.metadata or {}
        if not isinstance(metadata, dict) or not set(metadata) <= {"neg", "conj"}:
            raise _Bad(f"{what} has metadata {short(metadata)}; only the neg and conj bits are read")
        numel = math.prod(size)
        if numel == 0:
            return np.empty(size, np.float32 if dtype.code == "bf16" else elem.newbyteorder("="))
        last = offset + sum((d - 1) * s for d, s in zip(size, stride))
        if last >= count:
            raise _Bad(f"{what} (offset {offset}, size {short(size)}, stride {short(stride)}) reaches element "
                       f"{last} of a storage of {count} {dtype.name} elements")
        if numel * out_item > self.budget:
            raise _Bad(f"{what} of size {short(size)} would take {numel * out_item} bytes; the arrays of a file "
                       f"may take at most {MAX_RATIO} times its size ({self.size} bytes) in all")
        self.budget -= numel * out_item
        raw = self._storage(storage, nbytes)
        flat = raw[:count * elem.itemsize].view(elem)[offset:]
        strides = tuple(s * elem.itemsize if d > 1 else 0 for d, s in zip(size, stride))
        arr = np.lib.stride_tricks.as_strided(flat, shape=size, strides=strides, writeable=False).copy()
        if dtype.code == "bf16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        elif dtype.code == "?":
            arr = arr.view(np.uint8) != 0
        elif not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if metadata.get("conj"):
            arr = np.conj(arr)
        if metadata.get("neg"):
            arr = np.negative(arr)
        return arr

    def _storage(self, storage, nbytes):
        """The uint8 array of data/KEY (read once however many tensors view it), at least `nbytes` long."""
        name = f"{self.prefix}data/{storage.key}"
        info = self.infos.get(name)
        if info is None:
            raise _Bad(f"a tensor's storage is the entry {short(name)}, which the archive lacks")
        if nbytes > info.file_size:
            raise _Bad(f"storage {short(name)} declares {storage.numel} {storage.dtype.name} elements ({nbytes} "
                       f"bytes) but its entry holds {info.file_size} bytes")
        if name not in self.storages:
            self.storages[name] = self._entry(name)
        return self.storages[name]


def _holds_tensors(obj):
    return isinstance(obj, dict) and any(isinstance(v, _Tensor) for v in obj.values())


def _choose(obj):
    """The state dict in what torch.save saved: a dict of tensors, or one under a wrapper key."""
    if isinstance(obj, dict):
        for key in _WRAPPERS:
            if _holds_tensors(obj.get(key)):
                return obj[key]
        if not obj or _holds_tensors(obj):
            return obj
        what = f"a dict without tensors (keys {short(list(obj)[:8])})"
    elif isinstance(obj, _Tensor):
        what = "a single tensor"
    else:
        what = f"a {type(obj).__name__}"
    raise _Bad(f"it holds {what}, not a state dict: a dict of tensors, or a dict with one under "
               f"{', '.join(repr(k) for k in _WRAPPERS)}")


def _refusal(path, name):
    hint = ""
    if name.startswith(("torch.nn.modules.", "__main__.")):
        hint = " (a whole model saved with torch.save(model): save model.state_dict() instead)"
    elif name.startswith("torch._utils._rebuild_"):
        hint = " (a sparse, quantized or other special tensor: only dense tensors are read)"
    return (f"{path} was refused: its pickle asks for {name}, which is not part of a state dict; only weights "
            f"are loaded from PyTorch files and no code in them runs{hint}")
