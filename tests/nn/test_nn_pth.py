"""PyTorch checkpoints (`torch.save`'s zip format) read by `saliency.nn.load` with NumPy alone.

Without torch: the fixtures in tests/nn/fixtures/ (written once by make_fixtures.py with torch 2.13),
and archives assembled here opcode by opcode (big-endian storages, bad offsets and strides, size
bombs, pickles whose __reduce__ would run code). With torch: checkpoints of real models in every
dtype, wrappers, DataParallel keys, views, and the files that are refused.
"""
import os
import pickle
import struct
import subprocess
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import saliency as sl
from saliency import nn
from saliency.nn import WeightsError
from saliency.nn.npz import MAX_RATIO

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FUZZ = settings(derandomize=True, database=None, max_examples=150, deadline=None)

_base = np.arange(10, dtype=np.float64)
EXPECTED = {  # what make_fixtures.py saved in state_dict.pth, computed without torch
    "conv.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2) / 8,
    "conv.bias": np.array([0.5, -1.0], np.float32),
    "bn.num_batches_tracked": np.array(7, np.int64),
    "fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3).T,
    "half": np.arange(5, dtype=np.float16) / np.float16(4),
    "bf16": np.arange(4, dtype=np.float32) / 2 - 1,
    "mask": np.array([True, False, True]),
    "i8": np.arange(-3, 3, dtype=np.int8),
    "i16": np.arange(4, dtype=np.int16) * 1000,
    "i32": np.arange(4, dtype=np.int32) - 2 ** 30,
    "u8": np.arange(250, 256).astype(np.uint8),
    "view.a": _base[2:6],
    "view.b": _base.reshape(2, 5)[:, ::2],
    "param": np.arange(3, dtype=np.float32),
}


def _assert_same(loaded, expected):
    assert list(loaded) == list(expected)
    for key, want in expected.items():
        got = loaded[key]
        assert got.dtype == want.dtype and got.shape == want.shape, key
        assert got.flags.c_contiguous and got.flags.writeable and got.dtype.isnative, key
        np.testing.assert_array_equal(got, want, err_msg=key)


# ---------------------------------------------------------------------------------------------
# A pickle assembler: what torch.save writes, without torch (and what it never writes)


class G:
    """A global reference, written GLOBAL 'module name' (or STACK_GLOBAL with protocol 4)."""

    def __init__(self, module, name):
        self.module, self.name = module, name


class Call:
    """func(*args), written func, args tuple, REDUCE."""

    def __init__(self, func, *args):
        self.func, self.args = func, args


class Pid:
    """A persistent id: the tuple, then BINPERSID."""

    def __init__(self, *fields):
        self.fields = fields


class Build:
    """obj, then state, then BUILD (pickle's setstate)."""

    def __init__(self, obj, state):
        self.obj, self.state = obj, state


class Raw:
    def __init__(self, data):
        self.data = data


def assemble(obj, protocol=2):
    out = [bytes([0x80, protocol])]

    def emit(o):
        if isinstance(o, G):
            if protocol >= 4:
                emit(o.module), emit(o.name)
                out.append(b"\x93")
            else:
                out.append(b"c" + f"{o.module}\n{o.name}\n".encode())
        elif isinstance(o, Call):
            emit(o.func), emit(tuple(o.args))
            out.append(b"R")
        elif isinstance(o, Pid):
            emit(tuple(o.fields))
            out.append(b"Q")
        elif isinstance(o, Build):
            emit(o.obj), emit(o.state)
            out.append(b"b")
        elif isinstance(o, Raw):
            out.append(o.data)
        elif o is None or isinstance(o, bool):
            out.append({None: b"N", True: b"\x88", False: b"\x89"}[o])
        elif isinstance(o, int):
            data = pickle.encode_long(o)
            out.append(b"\x8a" + bytes([len(data)]) + data)
        elif isinstance(o, float):
            out.append(b"G" + struct.pack(">d", o))
        elif isinstance(o, str):
            data = o.encode()
            out.append(b"X" + struct.pack("<I", len(data)) + data)
        elif isinstance(o, tuple):
            out.append(b"(")
            for item in o:
                emit(item)
            out.append(b"t")
        elif isinstance(o, list):
            out.append(b"](")
            for item in o:
                emit(item)
            out.append(b"e")
        elif isinstance(o, dict):
            out.append(b"}(")
            for key, value in o.items():
                emit(key), emit(value)
            out.append(b"u")
        else:
            raise TypeError(o)

    emit(obj)
    out.append(b".")
    return b"".join(out)


_STORAGE = {np.dtype(np.float32): "FloatStorage", np.dtype(np.float64): "DoubleStorage",
            np.dtype(np.int64): "LongStorage", np.dtype(np.float16): "HalfStorage",
            np.dtype(np.int32): "IntStorage", np.dtype(np.uint8): "ByteStorage", np.dtype(bool): "BoolStorage"}


def tensor(key, storage, numel, offset, size, stride, dtype=None):
    """What torch pickles for a tensor: _rebuild_tensor_v2(storage pid, offset, size, stride, False, OrderedDict())."""
    pid = Pid("storage", G("torch", storage), key, "cpu", numel)
    if dtype is not None:
        return Call(G("torch._utils", "_rebuild_tensor_v3"), pid, offset, tuple(size), tuple(stride), False,
                    Call(G("collections", "OrderedDict")), G("torch", dtype))
    return Call(G("torch._utils", "_rebuild_tensor_v2"), pid, offset, tuple(size), tuple(stride), False,
                Call(G("collections", "OrderedDict")))


def write_archive(path, pkl, storages=None, byteorder=b"little", prefix="archive", extra=None,
                  compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr(f"{prefix}/data.pkl", pkl)
        zf.writestr(f"{prefix}/.format_version", b"1")
        if byteorder is not None:
            zf.writestr(f"{prefix}/byteorder", byteorder)
        for key, data in (storages or {}).items():
            zf.writestr(f"{prefix}/data/{key}", data)
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
        zf.writestr(f"{prefix}/version", b"3\n")
    return path


def write_pth(path, arrays, wrap=None, byteorder="little", protocol=2):
    """A torch.save-like file of contiguous arrays, written without torch (one storage per array)."""
    sd, storages = {}, {}
    for i, (name, arr) in enumerate(arrays.items()):
        arr = np.array(arr, order="C")  # keeps 0-d arrays 0-d
        strides = tuple(s // arr.itemsize for s in arr.strides)
        sd[name] = tensor(str(i), _STORAGE[arr.dtype], arr.size, 0, arr.shape, strides)
        data = arr.astype(arr.dtype.newbyteorder("<" if byteorder == "little" else ">"))
        storages[str(i)] = data.tobytes()
    obj = sd if wrap is None else {**wrap, "state_dict": sd}
    return write_archive(path, assemble(Call(G("collections", "OrderedDict"), list(obj.items())), protocol),
                         storages, byteorder.encode())


# ---------------------------------------------------------------------------------------------
# Without torch: the fixtures


def test_the_state_dict_fixture_loads_to_the_saved_arrays():
    _assert_same(nn.load(FIXTURES / "state_dict.pth"), EXPECTED)


def test_the_checkpoint_fixture_gives_its_model_state_dict_without_the_dataparallel_prefix():
    loaded = nn.load(FIXTURES / "checkpoint.pth")
    _assert_same(loaded, {"weight": np.arange(6, dtype=np.float32).reshape(3, 2),
                          "bias": np.array([-1.0, 0.0, 1.0], np.float32)})
    lin = nn.Linear(2, 3)
    lin.load_state_dict(loaded)
    np.testing.assert_array_equal(lin(sl.tensor(np.array([[1.0, 2.0]], np.float32))).numpy(), [[1.0, 8.0, 15.0]])


def test_fixtures_are_small():
    for path in FIXTURES.iterdir():
        assert path.stat().st_size < 20_000, path


def test_the_legacy_format_is_refused_with_how_to_convert_it():
    with pytest.raises(WeightsError, match="legacy format") as info:
        nn.load(FIXTURES / "legacy.pth")
    message = str(info.value)
    assert "torch.save(torch.load(" in message and "safetensors" in message and "\n" not in message


def test_a_torchscript_archive_is_refused_with_how_to_save_its_state_dict():
    with pytest.raises(WeightsError, match="is a TorchScript model") as info:
        nn.load(FIXTURES / "scripted.pt")
    assert "torch.jit.load(" in str(info.value) and ".state_dict()" in str(info.value)


def test_torch_archives_and_npz_files_are_told_apart_by_content_not_name(tmp_path):
    blob = (FIXTURES / "checkpoint.pth").read_bytes()
    for name in ("weights.npz", "weights.bin", "weights"):
        (tmp_path / name).write_bytes(blob)
        assert list(nn.load(tmp_path / name)) == ["weight", "bias"]
    nn.save({"w": np.ones((2, 2), np.float32)}, tmp_path / "w.pth")  # an .npz under another name
    assert list(nn.load(tmp_path / "w.pth")) == ["w"]


def _load_or_weights_error(path):
    try:
        return nn.load(path)
    except WeightsError as exc:
        message = str(exc)
        assert str(path) in message and "\n" not in message, message
        return None


@pytest.mark.parametrize("name", ["state_dict.pth", "checkpoint.pth", "legacy.pth", "scripted.pt"])
def test_every_truncation_is_a_weights_error(tmp_path, name):
    blob = (FIXTURES / name).read_bytes()
    path = tmp_path / name
    for cut in list(range(0, 64)) + list(range(64, len(blob), 37)):
        path.write_bytes(blob[:cut])
        with pytest.raises(WeightsError):
            nn.load(path)


@pytest.mark.parametrize("name", ["state_dict.pth", "checkpoint.pth"])
def test_every_damaged_byte_loads_or_is_a_weights_error(tmp_path, name):
    blob = (FIXTURES / name).read_bytes()
    path = tmp_path / name
    for pos in range(0, len(blob), 5):
        for value in (0xFF, blob[pos] ^ 0x01):
            damaged = bytearray(blob)
            damaged[pos] = value
            path.write_bytes(bytes(damaged))
            _load_or_weights_error(path)


@FUZZ
@given(data=st.data())
def test_random_damage_to_the_pickle_loads_or_is_a_weights_error(tmp_path_factory, data):
    """The pickle itself rewritten (CRC recomputed by zipfile): only a WeightsError or arrays."""
    with zipfile.ZipFile(FIXTURES / "state_dict.pth") as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    pkl = bytearray(entries["state_dict/data.pkl"])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(pkl) - 1))
        pkl[pos] = data.draw(st.integers(0, 255))
    entries["state_dict/data.pkl"] = bytes(pkl[:data.draw(st.integers(1, len(pkl)))])
    path = tmp_path_factory.mktemp("pkl") / "f.pth"
    with zipfile.ZipFile(path, "w") as zf:
        for name, value in entries.items():
            zf.writestr(name, value)
    _load_or_weights_error(path)


# ---------------------------------------------------------------------------------------------
# Without torch: archives assembled here


def test_an_assembled_archive_loads_and_a_deflated_one_too(tmp_path):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array(5, np.int64)}
    _assert_same(nn.load(write_pth(tmp_path / "a.pth", arrays)), arrays)
    with zipfile.ZipFile(FIXTURES / "state_dict.pth") as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    with zipfile.ZipFile(tmp_path / "deflated.pth", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, value in entries.items():
            zf.writestr(name, value)
    _assert_same(nn.load(tmp_path / "deflated.pth"), EXPECTED)


def test_big_endian_storages_become_native_arrays(tmp_path):
    arrays = {"f": np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5, "d": np.linspace(-1, 1, 5),
              "i": np.arange(4, dtype=np.int64) * -(2 ** 40), "h": np.arange(3, dtype=np.float16)}
    path = write_pth(tmp_path / "big.pth", arrays, byteorder="big")
    assert b"big" in zipfile.ZipFile(path).read("archive/byteorder")
    _assert_same(nn.load(path), arrays)


def test_bf16_v3_dtypes_and_views_from_assembled_pickles(tmp_path):
    bf = np.array([0x3F80, 0xC000, 0x0000, 0x7F80], "<u2")   # 1.0, -2.0, 0.0, inf as bfloat16
    u16 = np.array([1, 65535, 300], "<u2")
    storage = np.arange(12, dtype=np.float32)
    sd = {"bf": tensor("0", "BFloat16Storage", 4, 0, (2, 2), (2, 1)),
          "u16": tensor("1", "UntypedStorage", 6, 0, (3,), (1,), dtype="uint16"),
          "t": tensor("2", "FloatStorage", 12, 1, (3, 2), (1, 4)),        # a transposed view at offset 1
          "b": tensor("2", "FloatStorage", 12, 0, (2, 3), (0, 1)),        # a row broadcast by stride 0
          "p": Call(G("torch._utils", "_rebuild_parameter"), tensor("2", "FloatStorage", 12, 11, (1,), (1,)), True,
                    Call(G("collections", "OrderedDict")))}
    storages = {"0": bf.tobytes(), "1": u16.tobytes(), "2": storage.tobytes()}
    loaded = nn.load(write_archive(tmp_path / "a.pth", assemble(sd), storages))
    _assert_same(loaded, {"bf": np.array([[1.0, -2.0], [0.0, np.inf]], np.float32), "u16": u16.astype(np.uint16),
                          "t": np.array([[1, 5], [2, 6], [3, 7]], np.float32),
                          "b": np.array([[0, 1, 2], [0, 1, 2]], np.float32), "p": np.array([11], np.float32)})


def test_wrappers_prefixes_and_non_tensor_entries(tmp_path):
    t = tensor("0", "FloatStorage", 2, 0, (2,), (1,))
    storages = {"0": np.array([1, 2], np.float32).tobytes()}
    cases = [
        ({"epoch": 3, "optimizer": {"state": {0: {"momentum_buffer": t}}, "param_groups": [{"lr": 0.1}]},
          "state_dict": {"w": t}}, ["w"]),
        ({"model": {"module.w": t, "module.b": t}, "best": t}, ["w", "b"]),
        ({"model_state_dict": {"module.w": t, "v": t}}, ["module.w", "v"]),      # not every key has it
        ({"net": {"w": t}, "state_dict": None}, ["w"]),
        ({"w": t, "n": 5, "s": "text", "x": None, "f": 0.5}, ["w", "n", "f"]),   # Python numbers kept
        ({}, []),
    ]
    for i, (obj, keys) in enumerate(cases):
        loaded = nn.load(write_archive(tmp_path / f"{i}.pth", assemble(obj), storages))
        assert list(loaded) == keys, obj
    assert loaded == {}
    loaded = nn.load(write_archive(tmp_path / "n.pth", assemble({"w": t, "n": 5}), storages))
    assert loaded["n"].dtype == np.int64 and loaded["n"].shape == ()


@pytest.mark.parametrize("obj, message", [
    ([1, 2], "it holds a list, not a state dict"),
    ({"epoch": 3}, "a dict without tensors (keys ['epoch'])"),
    (tensor("0", "FloatStorage", 2, 0, (2,), (1,)), "it holds a single tensor"),
    ({1: tensor("0", "FloatStorage", 2, 0, (2,), (1,))}, "has the key 1, which is not a string"),
])
def test_what_is_not_a_state_dict_is_one_clear_error(tmp_path, obj, message):
    path = write_archive(tmp_path / "a.pth", assemble(obj), {"0": bytes(8)})
    with pytest.raises(WeightsError, match="not a readable PyTorch checkpoint") as info:
        nn.load(path)
    assert message in str(info.value)


def _bad_tensor(offset=0, size=(2,), stride=(1,), numel=4, storage="FloatStorage"):
    return tensor("0", storage, numel, offset, size, stride)


@pytest.mark.parametrize("t, message", [
    (_bad_tensor(size=(3,), stride=(2,)), "reaches element 4 of a storage of 4 float32 elements"),
    (_bad_tensor(offset=4, size=(1,)), "reaches element 4"),
    (_bad_tensor(offset=2 ** 62, size=(1,)), "reaches element"),
    (_bad_tensor(size=(2, 2), stride=(2 ** 62, 1)), "reaches element"),
    (_bad_tensor(size=(2,), stride=(-1,)), "non-negative integers"),
    (_bad_tensor(offset=-1), "storage offset -1"),
    (_bad_tensor(size=(2, 2), stride=(1,)), "of the same length"),
    (_bad_tensor(size=(1,) * 33, stride=(1,) * 33), "at most 32"),
    (_bad_tensor(size=(2.0,), stride=(1,)), "non-negative integers"),
    (_bad_tensor(numel=2 ** 40), "declares 1099511627776 float32 elements"),
    (_bad_tensor(size=(0, 2 ** 62, 2 ** 62), stride=(1, 1, 1)), "too large for any array"),
    (_bad_tensor(size=(10 ** 6, 10 ** 6), stride=(0, 0)), "may take at most"),
    (_bad_tensor(storage="QInt8Storage"), "dtype qint8, which is not read"),
    (tensor("9", "FloatStorage", 1, 0, (1,), (1,)), "which the archive lacks"),
    (Call(G("torch._utils", "_rebuild_tensor_v2"), "storage", 0, (1,), (1,), False, None), "not a storage"),
    (Call(G("torch._utils", "_rebuild_tensor_v2"), 1), "TypeError"),
    (Call(G("torch._utils", "_rebuild_parameter"), 1.5, True, None), "a parameter holds 1.5"),
    (Build(_bad_tensor(), {"size": (10 ** 9,)}), "AttributeError"),   # BUILD cannot change a tensor record
    (Build(_bad_tensor(), (None, {"size": (10 ** 9,)})), "read-only"),
    (Call(G("torch._utils", "_rebuild_tensor_v2"), Pid("storage", "FloatStorage", "0", "cpu", 4), 0, (1,), (1,),
          False, None), "is not (\"storage\", a storage class"),
    (Call(G("builtins", "bytearray"), 10 ** 12), "bytearray was given 1000000000000, not bytes"),
])
def test_bad_tensors_are_weights_errors_before_any_out_of_bounds_read(tmp_path, t, message):
    path = write_archive(tmp_path / "a.pth", assemble({"w": t}), {"0": np.arange(4, dtype=np.float32).tobytes()})
    with pytest.raises(WeightsError) as info:
        nn.load(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_bad_tensor_outside_the_state_dict_is_not_read(tmp_path):
    obj = {"state_dict": {"w": _bad_tensor()}, "optimizer": {"x": _bad_tensor(size=(9,)),
                                                             "q": _bad_tensor(storage="QInt8Storage")}}
    loaded = nn.load(write_archive(tmp_path / "a.pth", assemble(obj), {"0": bytes(16)}))
    assert list(loaded) == ["w"]


@pytest.mark.parametrize("pkl, message", [
    (b"not a pickle", "its data.pkl is not a valid pickle"),
    (b"\x80\x02}q\x00", "its data.pkl is not a valid pickle"),                 # no STOP
    (b"\x80\x02}r\x00\x00\x00\x40.", "stores memo entry 1073741824 after 2 opcodes"),
    (b"\x80\x04\x8e" + struct.pack("<Q", 2 ** 60) + b".", "its data.pkl is not a valid pickle"),  # BINBYTES8
    (b"\x80\x02(c__main__\nX\no.", "uses the pickle opcode OBJ, which torch.save does not write"),
    (b"\x80\x02\x82\x01.", "opcode EXT1"),
    (b"\x80\x02P0\n.", "opcode PERSID"),
    (b"\x80\x02}}X\x01\x00\x00\x00kK\x01sb.", "not a state dict torch.save writes (AttributeError"),
])
def test_malformed_pickles_are_weights_errors(tmp_path, pkl, message):
    path = write_archive(tmp_path / "a.pth", pkl)
    with pytest.raises(WeightsError) as info:
        nn.load(path)
    assert message in str(info.value)


@pytest.mark.parametrize("extra, byteorder, message", [
    ({"archive2/data.pkl": b"x"}, b"little", "several PREFIX/data.pkl entries"),
    ({}, b"middle", "its byteorder entry says 'middle'"),
    ({"archive/code/__torch__/m.py": b""}, b"little", "is a TorchScript model"),
])
def test_archive_layout_errors(tmp_path, extra, byteorder, message):
    path = write_archive(tmp_path / "a.pth", assemble({}), byteorder=byteorder, extra=extra)
    with pytest.raises(WeightsError, match=message):
        nn.load(path)


def test_a_missing_byteorder_means_little_endian(tmp_path):
    pkl = assemble({"w": tensor("0", "FloatStorage", 2, 0, (2,), (1,))})
    path = write_archive(tmp_path / "a.pth", pkl, {"0": np.array([1, 2], "<f4").tobytes()}, byteorder=None)
    np.testing.assert_array_equal(nn.load(path)["w"], [1, 2])


def _patch_sizes(blob, name, file_size):
    """The zip's central and local records of `name` rewritten to claim `file_size` uncompressed bytes."""
    blob = bytearray(blob)
    for sig, size_at, name_length_at, name_at in ((b"PK\x01\x02", 24, 28, 46), (b"PK\x03\x04", 22, 26, 30)):
        pos = blob.find(sig)
        while pos >= 0:
            (n,) = struct.unpack_from("<H", blob, pos + name_length_at)
            if blob[pos + name_at:pos + name_at + n] == name.encode():
                struct.pack_into("<I", blob, pos + size_at, file_size)
            pos = blob.find(sig, pos + 4)
    return bytes(blob)


def test_zip_entries_that_claim_absurd_sizes_are_refused_before_reading(tmp_path):
    pkl = assemble({"w": tensor("0", "FloatStorage", 2, 0, (2,), (1,))})
    path = write_archive(tmp_path / "a.pth", pkl, {"0": bytes(8)}, compression=zipfile.ZIP_DEFLATED)
    blob = path.read_bytes()
    path.write_bytes(_patch_sizes(blob, "archive/data/0", 2 ** 32 - 1))
    with pytest.raises(WeightsError, match="a zip bomb"):
        nn.load(path)
    # a claim within the file's total but beyond deflate's ratio for this one entry
    path.write_bytes(_patch_sizes(blob, "archive/data/0", 4 * MAX_RATIO * 12))
    assert 4 * MAX_RATIO * 12 < MAX_RATIO * len(blob)
    with pytest.raises(WeightsError, match="more than deflate's ratio allows"):
        nn.load(path)


def test_a_damaged_stored_storage_fails_its_crc(tmp_path):
    data = np.arange(4, dtype=np.float32).tobytes()
    path = write_archive(tmp_path / "a.pth", assemble({"w": tensor("0", "FloatStorage", 4, 0, (4,), (1,))}),
                         {"0": data})
    blob = path.read_bytes()
    pos = blob.find(data)
    path.write_bytes(blob[:pos] + b"\x01" + blob[pos + 1:])
    with pytest.raises(WeightsError, match="fails its CRC-32 check"):
        nn.load(path)


# ---------------------------------------------------------------------------------------------
# Pickles that would run code: refused before anything runs


def _payloads(marker):
    """(the name the refusal gives, pickle bytes) that plain pickle.load would run to create `marker`."""
    marker = str(marker)

    class System:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    class Eval:
        def __reduce__(self):
            return eval, (f"open({marker!r}, 'w').close()",)

    class Exec:
        def __reduce__(self):
            return exec, (f"open({marker!r}, 'w').close()",)

    class Popen:
        def __reduce__(self):
            return subprocess.check_call, (["touch", marker],)

    system = f"{os.system.__module__}.system"  # posix.system
    weights = OrderedDict(w=1.0)
    return [
        (system, pickle.dumps({"w": System()}, protocol=2)),
        ("__builtin__.eval", pickle.dumps(OrderedDict(a=1, b=Eval()), protocol=2)),  # protocol 2 names builtins so
        ("builtins.exec", pickle.dumps({"state_dict": weights, "hook": Exec()}, protocol=4)),
        ("subprocess.check_call", pickle.dumps([Popen()], protocol=5)),
        (system, pickle.dumps({"optimizer": {"state": {0: System()}}, "state_dict": weights}, protocol=3)),
        ("builtins.getattr", assemble(Call(Call(G("builtins", "getattr"), G("builtins", "__import__"), "os"),
                                           "system"), protocol=4)),
        ("torch._utils.os", assemble(Call(G("torch._utils", "os")))),
        ("__main__.Net", assemble(Call(G("__main__", "Net")))),
    ]


def test_pickles_that_would_run_code_are_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    for expected, pkl in _payloads(marker):
        path = write_archive(tmp_path / "evil.pth", pkl)
        with pytest.raises(WeightsError) as info:
            nn.load(path)
        message = str(info.value)
        assert f"was refused: its pickle asks for {expected}, which is not part of a state dict" in message, message
        assert "only weights are loaded" in message and "no code in them runs" in message
        assert not marker.exists(), expected
    pickle.loads(_payloads(marker)[0][1])  # the payloads are real: plain pickle runs them
    assert marker.exists()


def test_a_persistent_id_that_is_not_a_storage_is_refused(tmp_path):
    path = write_archive(tmp_path / "a.pth", assemble({"w": Pid("module", "x")}))
    with pytest.raises(WeightsError, match=r"asks for the persistent id \('module', 'x'\)"):
        nn.load(path)


# ---------------------------------------------------------------------------------------------
# The command line, without torch


@pytest.fixture(scope="module")
def star(tmp_path_factory):
    from PIL import Image

    from saliency.models import data

    images, labels = data.shapes(40, seed=31)
    i = int(np.flatnonzero(labels == data.SHAPE_CLASSES.index("star"))[0])
    path = tmp_path_factory.mktemp("img") / "star.png"
    Image.fromarray((np.moveaxis(images[i], 0, -1) * 255).round().astype(np.uint8)).save(path)
    return path


def _cli_error(args, capsys):
    from saliency.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_cli_weights_pth_that_does_not_fit_or_would_run_code_is_one_line(star, tmp_path, capsys):
    err = _cli_error(["map", str(star), "--weights", str(FIXTURES / "checkpoint.pth")], capsys)
    assert "(a PyTorch checkpoint) does not fit the 'shapes' model: 26 of the model's 26 keys are missing" in err
    assert len(err) < 400, err                 # a few keys named and counted, not every key
    evil = write_archive(tmp_path / "evil.pth", _payloads(tmp_path / "ran")[0][1])
    err = _cli_error(["map", str(star), "--weights", str(evil)], capsys)
    assert "was refused" in err and not (tmp_path / "ran").exists()
    err = _cli_error(["map", str(star), "--weights", str(FIXTURES / "legacy.pth")], capsys)
    assert "legacy format" in err


def test_cli_weights_pth_written_without_torch(star, tmp_path):
    from typer.testing import CliRunner

    from saliency.cli.main import app
    from saliency.models import zoo

    path = write_pth(tmp_path / "shapes.pth", nn.load(zoo.WEIGHTS_DIR / "shapes.npz"), wrap={"epoch": 9})
    runner = CliRunner()
    ours = runner.invoke(app, ["map", str(star), "--weights", str(path), "--out", str(tmp_path / "a.png")])
    shipped = runner.invoke(app, ["map", str(star), "--out", str(tmp_path / "b.png")])
    assert ours.exit_code == 0 and shipped.exit_code == 0, ours.output
    assert "prediction: star" in ours.output
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


# ---------------------------------------------------------------------------------------------
# With torch: what torch.save really writes


def _torch():
    return pytest.importorskip("torch")


def _real_model(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 5))
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
        model[1].weight.uniform_(0.5, 1.5)
        model[1].num_batches_tracked += 12
    return model.eval()


def _ours(arrays):
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(4, 5))
    model.load_state_dict(arrays)
    return model.eval()


def _numpy(t):
    import torch

    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_a_real_models_state_dict_in_every_float_dtype(tmp_path, dtype):
    torch = _torch()
    model = _real_model(torch).to(getattr(torch, dtype))
    torch.save(model.state_dict(), tmp_path / "m.pth")
    loaded = nn.load(tmp_path / "m.pth")
    _assert_same(loaded, {k: _numpy(v) for k, v in model.state_dict().items()})
    assert loaded["1.num_batches_tracked"].dtype == np.int64 and loaded["1.num_batches_tracked"] == 12


def test_a_real_model_loaded_from_pth_computes_what_torch_computes(tmp_path):
    torch = _torch()
    model = _real_model(torch).double()
    torch.save(model.state_dict(), tmp_path / "m.pth")
    ours = _ours(nn.load(tmp_path / "m.pth")).to(np.float64)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8))
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(sl.tensor(x)).numpy(), want, rtol=1e-12, atol=1e-12)


def test_ints_views_transposes_parameters_and_attributes(tmp_path):
    torch = _torch()
    base = torch.arange(24, dtype=torch.float32)
    tagged = torch.ones(2)
    tagged.note = "extra python state"       # pickled through _rebuild_from_type_v2
    sd = OrderedDict([
        ("i8", torch.arange(-5, 5, dtype=torch.int8)), ("i16", torch.arange(3, dtype=torch.int16) - 300),
        ("i32", torch.arange(3, dtype=torch.int32) * 70000), ("i64", torch.tensor([2 ** 40, -1])),
        ("u8", torch.arange(3, dtype=torch.uint8) + 200), ("b", torch.tensor([[True, False]])),
        ("u16", torch.tensor([1, 65535], dtype=torch.uint16)), ("t", base.reshape(4, 6).t()),
        ("view1", base[3:9].reshape(2, 3)), ("view2", base.reshape(2, 3, 4).permute(2, 0, 1)[1:, :, ::2]),
        ("expanded", torch.arange(3.0).expand(4, 3)), ("scalar", torch.tensor(2.5, dtype=torch.float64)),
        ("empty", torch.zeros(0, 3)), ("param", torch.nn.Parameter(torch.arange(4.0).reshape(2, 2))),
        ("tagged", tagged), ("neg", torch._neg_view(torch.arange(3.0))),
    ])
    torch.save(sd, tmp_path / "a.pth")
    with zipfile.ZipFile(tmp_path / "a.pth") as zf:
        storages = [n for n in zf.namelist() if "/data/" in n]
    assert len(storages) < len(sd)  # the views share a storage
    _assert_same(nn.load(tmp_path / "a.pth"), {k: _numpy(v.resolve_neg()) for k, v in sd.items()})


@pytest.mark.parametrize("wrapper", ["state_dict", "model", "model_state_dict", "net"])
def test_checkpoint_wrappers_and_dataparallel(tmp_path, wrapper):
    torch = _torch()
    model = _real_model(torch)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(2, 3, 4, 4)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.StepLR(opt, 3)
    parallel = torch.nn.DataParallel(model).state_dict()
    assert all(k.startswith("module.") for k in parallel)
    torch.save({"epoch": 4, wrapper: parallel, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "best_acc": torch.tensor(0.75), "args": {"lr": 1e-3, "size": torch.Size([3, 4]),
                                                         "dtype": torch.float32, "device": torch.device("cpu")}},
               tmp_path / "ck.pth")
    loaded = nn.load(tmp_path / "ck.pth")
    _assert_same(loaded, {k: _numpy(v) for k, v in model.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(_ours(loaded)(sl.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_pickle_protocol_torch_save_accepts(tmp_path, protocol):
    torch = _torch()
    sd = _real_model(torch).state_dict()
    torch.save(sd, tmp_path / "m.pth", pickle_protocol=protocol)
    _assert_same(nn.load(tmp_path / "m.pth"), {k: _numpy(v) for k, v in sd.items()})


def test_a_file_saved_without_crc32_loads(tmp_path):
    torch = _torch()
    sd = _real_model(torch).state_dict()
    torch.serialization.set_crc32_options(False)
    try:
        torch.save(sd, tmp_path / "m.pth")
    finally:
        torch.serialization.set_crc32_options(True)
    assert all(info.CRC == 0 for info in zipfile.ZipFile(tmp_path / "m.pth").infolist())
    _assert_same(nn.load(tmp_path / "m.pth"), {k: _numpy(v) for k, v in sd.items()})


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_torch_legacy_torchscript_and_whole_model_files_are_refused_clearly(tmp_path):
    torch = _torch()
    model = _real_model(torch)
    torch.save(model.state_dict(), tmp_path / "legacy.pth", _use_new_zipfile_serialization=False)
    with pytest.raises(WeightsError, match="legacy format.*torch.save\\(torch.load\\("):
        nn.load(tmp_path / "legacy.pth")
    torch.jit.save(torch.jit.script(model), tmp_path / "scripted.pt")
    with pytest.raises(WeightsError, match=r"TorchScript model \(torch.jit.save\), not a state dict.*state_dict\(\)"):
        nn.load(tmp_path / "scripted.pt")
    torch.save(model, tmp_path / "whole.pth")
    with pytest.raises(WeightsError, match="asks for torch.nn.modules.container.Sequential.*save model.state_dict"):
        nn.load(tmp_path / "whole.pth")
    torch.save({"w": torch.eye(3).to_sparse()}, tmp_path / "sparse.pth")
    with pytest.raises(WeightsError, match="asks for torch._utils._rebuild_sparse_tensor.*only dense tensors are read"):
        nn.load(tmp_path / "sparse.pth")
    torch.save({"w": torch.ones(2, dtype=torch.complex32)}, tmp_path / "c32.pth")
    with pytest.raises(WeightsError, match="tensor 'w' has dtype complex32, which is not read"):
        nn.load(tmp_path / "c32.pth")


def test_the_fixtures_match_what_torch_loads():
    torch = _torch()
    theirs = torch.load(FIXTURES / "state_dict.pth", weights_only=True)
    _assert_same(nn.load(FIXTURES / "state_dict.pth"), {k: _numpy(v) for k, v in theirs.items()})


def test_cli_map_with_a_zoo_models_weights_converted_to_pth_by_torch(star, tmp_path):
    torch = _torch()
    from typer.testing import CliRunner

    from saliency.cli.main import app
    from saliency.models import zoo

    weights = {k: torch.from_numpy(v) for k, v in nn.load(zoo.WEIGHTS_DIR / "shapes.npz").items()}
    torch.save({"state_dict": weights, "epoch": 1}, tmp_path / "shapes.pth")
    runner = CliRunner()
    ours = runner.invoke(app, ["map", str(star), "--weights", str(tmp_path / "shapes.pth"),
                               "--out", str(tmp_path / "a.png")])
    shipped = runner.invoke(app, ["map", str(star), "--out", str(tmp_path / "b.png")])
    assert ours.exit_code == 0 and shipped.exit_code == 0, ours.output
    assert "prediction: star" in ours.output
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
