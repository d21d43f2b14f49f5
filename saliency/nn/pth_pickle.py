"""What the data.pkl of a PyTorch checkpoint may name, call and build (read by pickle_machine.py,
for saliency/nn/pth.py).

GLOBAL and STACK_GLOBAL resolve only the names of `_ALLOWED`, each to a constructor of this module
or a record: a tensor (torch._utils._rebuild_tensor_v2 and its kin) becomes a read-only record of
its storage, offset, size and stride, a storage's persistent id ("storage", torch.FloatStorage,
KEY, LOCATION, NUMEL) a record of its entry, an OrderedDict, set or torch.Size what it is, its
items checked first. Any other name (os.system, builtins.eval, a pickled nn.Module, ...) raises
`Refused` before it could be called. BUILD is accepted only where torch.save writes it: the
`_metadata` of a state dict's OrderedDict, which no array depends on and which is dropped.
"""
import collections
import itertools
from typing import Any, Callable, NoReturn

from .errors import one_line, short
from .pickle_machine import Bad, Budget, a, check_keys, unpickle

__all__ = ["Bad", "Budget", "DTYPES", "DType", "Refused", "SUPPORTED", "Storage", "Tensor", "load_data_pkl"]

# dtype name -> NumPy dtype code (little-endian), "bf16" for bfloat16, None for a dtype not read
DTYPES = {"float16": "<f2", "half": "<f2", "bfloat16": "bf16", "float32": "<f4", "float": "<f4",
          "float64": "<f8", "double": "<f8", "int8": "i1", "int16": "<i2", "short": "<i2", "int32": "<i4",
          "int": "<i4", "int64": "<i8", "long": "<i8", "uint8": "u1", "bool": "?", "uint16": "<u2",
          "uint32": "<u4", "uint64": "<u8", "complex64": "<c8", "cfloat": "<c8", "complex128": "<c16",
          "cdouble": "<c16"}
SUPPORTED = ", ".join(sorted({n for n in DTYPES if any(c.isdigit() for c in n) or n == "bool"}))
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


class Refused(Exception):
    """A name or persistent id that the pickle asks for and that is not on the allow-list."""


# ---------------------------------------------------------------------------------------------
# What the pickle may build: read-only records (BUILD cannot change them) and plain data


class _Record:
    __slots__ = ()

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is read-only")


class DType(_Record):
    """A torch dtype named in the pickle (e.g. GLOBAL 'torch float32')."""
    __slots__ = ("name", "code")
    name: str
    code: str | None  # a NumPy dtype code, "bf16", or None for a dtype not read


class _StorageType(_Record):
    """A storage class named in the pickle (torch.FloatStorage, torch.storage.UntypedStorage, ...)."""
    __slots__ = ("name", "dtype")
    name: str
    dtype: DType


class Storage(_Record):
    """A persistent id: `numel` elements of `dtype` in the archive's entry data/KEY."""
    __slots__ = ("key", "dtype", "numel")
    key: str
    dtype: DType
    numel: int


class Tensor(_Record):
    """A tensor as the pickle describes it; pth.py checks every field and copies out its elements."""
    __slots__ = ("storage", "offset", "size", "stride", "dtype", "metadata")
    storage: Storage
    offset: Any  # offset, size, stride and metadata as the pickle gives them: pth.py checks them
    size: Any
    stride: Any
    dtype: DType
    metadata: Any


class _TensorType(_Record):
    """torch.Tensor or torch.nn.Parameter, as _rebuild_from_type_v2 names the class of a tensor."""
    __slots__ = ("name",)
    name: str


def _rebuild_tensor_v2(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> Tensor:
    if not isinstance(storage, Storage):
        raise Bad(f"a tensor's storage is {short(storage)}, not a storage of the archive")
    return Tensor(storage=storage, offset=offset, size=size, stride=stride, dtype=storage.dtype, metadata=metadata)


def _rebuild_tensor_v3(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, backward_hooks: Any,
                       dtype: Any, metadata: Any = None) -> Tensor:
    if not isinstance(storage, Storage) or not isinstance(dtype, DType):
        raise Bad(f"a tensor has the storage {short(storage)} and dtype {short(dtype)}, not a storage of the "
                  f"archive and a torch dtype")
    return Tensor(storage=storage, offset=offset, size=size, stride=stride, dtype=dtype, metadata=metadata)


def _rebuild_parameter(data: Any, requires_grad: Any = True, backward_hooks: Any = None, state: Any = None) -> Tensor:
    if not isinstance(data, Tensor):
        raise Bad(f"a parameter holds {short(data)}, not a tensor")
    return data


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Tensor:
    """A tensor with Python attributes (ignored here): func(*args) rebuilds the tensor itself."""
    rebuilds = (_rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter)
    if not any(func is f for f in rebuilds) or not isinstance(new_type, _TensorType):
        raise Bad(f"_rebuild_from_type_v2 was given {short(func)} and {short(new_type)}, not a tensor rebuild")
    if not isinstance(args, tuple):
        raise Bad(f"_rebuild_from_type_v2 was given the arguments {short(args)}, not a tuple")
    return func(*args)


def _ordered_dict(items: Any = ()) -> collections.OrderedDict[Any, Any]:
    items = _checked(items, (list, tuple), "OrderedDict")
    if not all(isinstance(item, (list, tuple)) and len(item) == 2 for item in items):
        raise Bad(f"OrderedDict was given {short(items)}, not (key, value) pairs")
    check_keys([key for key, _ in items], "an OrderedDict key")
    return collections.OrderedDict(items)


def _device(kind: Any, index: Any = None) -> str:
    if not isinstance(kind, str) or not (index is None or type(index) is int):
        raise Bad(f"torch.device was given {short((kind, index))}")
    return kind if index is None else f"{kind}:{index}"


def _size(dims: Any = ()) -> tuple[int, ...]:
    dims = tuple(_checked(dims, (list, tuple), "torch.Size"))
    if not all(type(d) is int for d in dims):
        raise Bad(f"torch.Size was given {short(dims)}, not integers")
    return dims


def _encode(text: Any, encoding: Any = "utf-8") -> bytes:
    """_codecs.encode, which protocol-2 pickles use to write bytes: only from a string to latin-1."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise Bad(f"_codecs.encode was given {short((text, encoding))}, not a string to encode as latin1")
    return text.encode("latin1")


def _collection(kind: type[set[Any]] | type[frozenset[Any]]) -> Callable[..., set[Any] | frozenset[Any]]:
    def build(items: Any = ()) -> set[Any] | frozenset[Any]:
        items = _checked(items, (list, tuple, set, frozenset), kind.__name__)
        check_keys(items, f"an item of a {kind.__name__}")
        return kind(items)
    return build


def _bytearray(data: Any = b"") -> bytearray:
    if not isinstance(data, (bytes, bytearray)):  # bytearray(10**12) would allocate a terabyte
        raise Bad(f"bytearray was given {short(data)}, not bytes")
    return bytearray(data)


def _complex(real: Any = 0.0, imag: Any = 0.0) -> complex:
    if not all(type(x) in (int, float) for x in (real, imag)):
        raise Bad(f"complex was given {short((real, imag))}, not numbers")
    return complex(real, imag)


def _checked(items: Any, kinds: tuple[type, ...], what: str) -> Any:
    if not isinstance(items, kinds):
        raise Bad(f"{what} was given {short(items)}, not a {kinds[0].__name__}")
    return items


def _allowed() -> dict[str, Callable[..., Any] | _Record]:
    """module.name -> what find_class returns for it: every name a state dict's pickle uses."""
    out: dict[str, Callable[..., Any] | _Record]
    out = {"collections.OrderedDict": _ordered_dict,
           "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
           "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
           "torch._utils._rebuild_parameter": _rebuild_parameter,
           "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
           "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
           "torch.Tensor": _TensorType(name="Tensor"), "torch._tensor.Tensor": _TensorType(name="Tensor"),
           "torch.nn.parameter.Parameter": _TensorType(name="Parameter"),
           "torch.storage.UntypedStorage": _StorageType(name="UntypedStorage", dtype=DType(name="uint8", code="u1")),
           "torch.UntypedStorage": _StorageType(name="UntypedStorage", dtype=DType(name="uint8", code="u1")),
           "torch.device": _device, "torch.Size": _size, "_codecs.encode": _encode}
    for name, code in DTYPES.items():
        out[f"torch.{name}"] = DType(name=name, code=code)
    for name in _UNREAD_DTYPES:
        out[f"torch.{name}"] = DType(name=name, code=None)
    for name, dtype in _STORAGES.items():
        for module in ("torch", "torch.cuda"):  # files saved from a GPU before torch 2.0 name torch.cuda's
            out[f"{module}.{name}"] = _StorageType(name=name, dtype=out[f"torch.{dtype}"])
    for module in ("builtins", "__builtin__"):  # protocol 2 writes Python 2's name
        out.update({f"{module}.set": _collection(set), f"{module}.frozenset": _collection(frozenset),
                    f"{module}.bytearray": _bytearray, f"{module}.complex": _complex})
    return out


_ALLOWED = _allowed()


def load_data_pkl(data: bytes, budget: Budget) -> Any:
    """What the data.pkl bytes `data` hold, built within `budget` (a pickle_machine.Budget)."""
    return unpickle(data, budget, _Names)


def _find_class(module: str, name: str) -> Callable[..., Any] | _Record:
    found = _ALLOWED.get(f"{module}.{name}")
    if found is None:
        raise Refused(one_line(f"{module}.{name}", limit=120))
    return found


def _persistent_load(pid: Any) -> Storage:
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
        raise Refused(f"the persistent id {short(pid)}")
    _, kind, key, location, numel = pid
    if not (isinstance(kind, _StorageType) and type(key) is str and isinstance(location, str)
            and type(numel) is int and numel >= 0):
        raise Bad(f"a storage's persistent id {short(pid)} is not (\"storage\", a storage class, key, "
                  f"location, element count)")
    return Storage(key=key, dtype=kind.dtype, numel=numel)


def _set_state(inst: Any, state: Any) -> None:
    """BUILD: torch.save writes it for a state dict's OrderedDict, whose attributes {"_metadata": ...}
    (each module's version) no array depends on: accepted and dropped. Anything else would set
    attributes (an OrderedDict's .get or .items, say), and is refused."""
    if type(inst) is collections.OrderedDict and type(state) is dict and all(k == "_metadata" for k in state):
        return
    if isinstance(inst, _Record):
        raise AttributeError(f"BUILD would set the state of {a(type(inst).__name__)} record, which is read-only")
    names = short(list(itertools.islice(state, 4))) if isinstance(state, dict) else short(state)
    raise AttributeError(f"BUILD would set {names} on {a(type(inst).__name__)}; torch.save sets only the "
                         f"_metadata of a state dict's OrderedDict")


class _Names:
    """What pickle_machine may resolve, call and build for a state dict."""
    find_class = staticmethod(_find_class)
    persistent_load = staticmethod(_persistent_load)
    set_state = staticmethod(_set_state)
    callables = {id(f): f for f in _ALLOWED.values() if callable(f)}
