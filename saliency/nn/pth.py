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

Nothing in the file runs, and data.pkl builds no more than a state dict needs: it is read by the
machine of pickle_machine.py, which names only what pth_pickle.py allows (a tensor becomes a
record of its storage, offset, size and stride, turned into an array only if it belongs to the
state dict that is returned; any other name, os.system, builtins.eval, a pickled nn.Module, ...
is refused with `WeightsError` before it could be called), within a budget sized by the archive's
storage entries (`PICKLE_BASE` and `PICKLE_PER_STORAGE`), which also bounds data.pkl's size. A bare
pickle (not a zip) is told apart and refused with how to re-save it. Every size the file states
is checked, with Python ints, against one it cannot fake before anything is allocated for it: an
entry against the file's size (`MAX_RATIO` times it when deflated, as for `.npz`), a storage
against its entry, a tensor's last element against its storage, and all the arrays together
against `MAX_RATIO` times the file's size.
"""
import math
import os
import re
import struct
import zipfile
import zlib
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

from .errors import WeightsError, one_line, read_exactly, short, too_big
from .npz import MAX_RATIO
from .pth_pickle import SUPPORTED as _SUPPORTED
from .pth_pickle import Bad as _Bad
from .pth_pickle import Budget, Refused, Storage, Tensor, load_data_pkl

__all__ = ["LEGACY_MAGIC", "bare_pickle_protocol", "is_torch_archive", "read_pth"]

# what data.pkl may build: PICKLE_BASE bytes of objects and PICKLE_PER_STORAGE more per storage entry
# (a state dict charges 2.5-3.5 KiB per tensor: its records, key, size and stride; a view of a shared
# storage as much, the _metadata of a module 0.8 KiB), and an opcode per _BYTES_PER_OP of them (it
# charges 85-110 per opcode)
PICKLE_BASE = 4 << 20
PICKLE_PER_STORAGE = 8 << 10
_BYTES_PER_OP = 64
_MAX_DIMS = 32
# the legacy (non-zip) format starts with a pickled magic number, 0x1950a86a20f9469cfc6c
LEGACY_MAGIC = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")
_WRAPPERS = ("state_dict", "model", "model_state_dict", "net")
# how a protocol 0 or 1 pickle starts: a dict or list (MARK, then DICT/LIST later; or EMPTY_DICT/LIST
# and BINPUT 0), or the module name of a GLOBAL such as collections OrderedDict
_OLD_PICKLE = re.compile(rb"\((?:dp|lp)0\n|[}\]]q\x00|c[\w.]+(?:\n|$)")
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError,
               OverflowError, RuntimeError, ValueError, struct.error)


# ---------------------------------------------------------------------------------------------
# The archive


def is_torch_archive(path: str | os.PathLike[str]) -> bool:
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


def _top_entry(name: str, leaf: str) -> bool:
    """Whether `name` is PREFIX/leaf for a one-level PREFIX."""
    folder, _, rest = name.partition("/")
    return bool(folder) and rest == leaf


def bare_pickle_protocol(head: bytes, size: int) -> int | None:
    """The pickle protocol of a file that is a bare pickle (pickle.dump, not torch.save's zip), judged
    by its first bytes `head` (at least 9) and its `size`; None for any other file. It starts with
    PROTO 2-5, or with a protocol 0/1 dict, list or GLOBAL (0 then), and is no safetensors file: the
    8-byte header length that starts one may begin like PROTO, but it fits the file and '{' follows."""
    if len(head) >= 9 and int.from_bytes(head[:8], "little") <= size - 8 and head[8:9] == b"{":
        return None
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return head[1]
    return 0 if _OLD_PICKLE.match(head) else None


def read_pth(path: str | os.PathLike[str]) -> dict[str, NDArray[Any]]:
    """{name: ndarray} from the state dict in the PyTorch checkpoint at `path`: a bare state dict, or
    one under "state_dict", "model", "model_state_dict" or "net" in a dict (its other entries are
    ignored), with DataParallel's "module." prefix removed when every key has it. WeightsError names
    the file and the defect, or says why the file is refused (a legacy or TorchScript file, a bare
    pickle, a pickle that asks for anything but tensors and containers or builds more than a state
    dict of its storages needs)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        head, size = f.read(len(LEGACY_MAGIC)), os.fstat(f.fileno()).st_size
        if head == LEGACY_MAGIC:
            raise WeightsError(
                f"{path} is a PyTorch checkpoint in the legacy format (torch.save before PyTorch 1.6, or with "
                f"_use_new_zipfile_serialization=False), which is not read; convert it with a recent PyTorch: "
                f"torch.save(torch.load(\"{path}\"), \"new.pth\"), or save its state dict with safetensors")
        protocol = bare_pickle_protocol(head, size)
        if protocol is not None:
            raise WeightsError(
                f"{path} is a bare pickle ({f'protocol {protocol}' if protocol else 'an old protocol'}, as "
                f"pickle.dump writes), not a torch.save zip archive, and is not read: unpickling it could run "
                f"code; where you trust it, re-save it: torch.save(pickle.load(open(\"{path}\", \"rb\")), "
                f"\"new.pth\"), or save its arrays with safetensors")
        f.seek(0)
        try:
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
    def __init__(self, path: str, f: BinaryIO, zf: zipfile.ZipFile, size: int) -> None:
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
        self.storages: dict[str, NDArray[np.uint8]] = {}  # entry name -> uint8 array of data/KEY
        count = sum(name.startswith(self.prefix + "data/") for name in names)
        memory = PICKLE_BASE + PICKLE_PER_STORAGE * count
        self.pickle_budget = Budget(memory, memory // _BYTES_PER_OP,
                                    f"a state dict of {count} storage{'' if count == 1 else 's'}")

    def state_dict(self) -> dict[str, NDArray[Any]]:
        order = self._byteorder()
        obj = self._unpickle()
        chosen = _choose(obj)
        arrays: dict[str, NDArray[Any]] = {}
        for key, value in chosen.items():
            if not isinstance(key, str):
                raise _Bad(f"its state dict has the key {short(key)}, which is not a string")
            if isinstance(value, Tensor):
                arrays[key] = self._array(value, key, order)
            elif type(value) in (bool, int, float) and (type(value) is not int or -2 ** 63 <= value < 2 ** 63):
                arrays[key] = np.asarray(value)  # e.g. num_batches_tracked saved as a Python int
        if arrays and all(key.startswith("module.") for key in arrays):  # saved from nn.DataParallel
            arrays = {key[len("module."):]: value for key, value in arrays.items()}
        return arrays

    def _byteorder(self) -> str:
        name = self.prefix + "byteorder"
        if name not in self.infos:
            return "<"  # written before torch recorded it: little-endian
        text = bytes(self._entry(name, limit=64)).decode("ascii", "replace").strip()
        if text not in ("little", "big"):
            raise _Bad(f"its byteorder entry says {short(text)}; expected little or big")
        return "<" if text == "little" else ">"

    def _unpickle(self) -> Any:
        name, budget = self.prefix + "data.pkl", self.pickle_budget
        if self.infos[name].file_size > budget.memory:
            raise _Bad(f"its data.pkl claims {self.infos[name].file_size} bytes, more than {budget.needs} needs "
                       f"(at most {budget.memory})")
        try:
            return load_data_pkl(bytes(self._entry(name)), budget)
        except _Bad:
            raise
        except Refused as exc:
            raise WeightsError(_refusal(self.path, str(exc))) from None
        except Exception as exc:  # noqa: BLE001 -- a malformed pickle can raise anything; nothing of it ran
            raise _Bad(f"its data.pkl is not a state dict torch.save writes ({type(exc).__name__}: "
                       f"{one_line(exc)})") from None

    def _entry(self, name: str, limit: int | None = None) -> NDArray[np.uint8]:
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

    def _stored(self, info: zipfile.ZipInfo, shown: str) -> NDArray[np.uint8]:
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
        if info.CRC and zlib.crc32(buf.data) != info.CRC:  # .data: NumPy's stubs make an array a buffer from 3.12
            raise _Bad(f"entry {shown} fails its CRC-32 check (a damaged file?)")
        return buf

    def _array(self, t: Tensor, key: str, order: str) -> NDArray[Any]:
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

    def _storage(self, storage: Storage, nbytes: int) -> NDArray[np.uint8]:
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


def _holds_tensors(obj: Any) -> bool:
    return isinstance(obj, dict) and any(isinstance(v, Tensor) for v in obj.values())


def _choose(obj: Any) -> dict[Any, Any]:
    """The state dict in what torch.save saved: a dict of tensors, or one under a wrapper key."""
    if isinstance(obj, dict):
        for key in _WRAPPERS:
            if _holds_tensors(obj.get(key)):
                return obj[key]
        if not obj or _holds_tensors(obj):
            return obj
        what = f"a dict without tensors (keys {short(list(obj)[:8])})"
    elif isinstance(obj, Tensor):
        what = "a single tensor"
    else:
        what = f"a {type(obj).__name__}"
    raise _Bad(f"it holds {what}, not a state dict: a dict of tensors, or a dict with one under "
               f"{', '.join(repr(k) for k in _WRAPPERS)}")


def _refusal(path: str, name: str) -> str:
    hint = ""
    if name.startswith(("torch.nn.modules.", "__main__.")):
        hint = " (a whole model saved with torch.save(model): save model.state_dict() instead)"
    elif name.startswith("torch._utils._rebuild_"):
        hint = " (a sparse, quantized or other special tensor: only dense tensors are read)"
    return (f"{path} was refused: its pickle asks for {name}, which is not part of a state dict; only weights "
            f"are loaded from PyTorch files and no code in them runs{hint}")
