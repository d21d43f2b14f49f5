"""Weight files fed random and mutated bytes: every load ends in arrays or in one WeightsError line
naming the file, never another exception, a hang, or an allocation sized by a length field."""
import io
import json
import struct
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saliency import nn
from saliency.nn.npz import MAX_RATIO
from saliency.nn.serialization import parse_safetensors, safetensors_bytes

FUZZ = settings(derandomize=True, database=None, max_examples=200, deadline=None)

_ARRAYS = {"conv.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2), "conv.bias": np.array([0.5, -1.0]),
           "steps": np.array(7, np.int64), "mask": np.array([True, False, True])}
# values that break 2-, 4- and 8-byte length fields
_EXTREMES = [0, 1, 7, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 62,
             2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1]
# where the length fields are: zip local/central/end records and zip64 records, .npy magic
_SIGNATURES = [b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07", b"\x93NUMPY"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _valid_files():
    """name -> bytes of a valid weights file: .npz stored, .npz deflated, .safetensors."""
    out = {}
    for compressed in (False, True):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED) as zf:
            for name, arr in _ARRAYS.items():
                with zf.open(name + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, arr, allow_pickle=False)
        out["deflated.npz" if compressed else "stored.npz"] = buf.getvalue()
    out["w.safetensors"] = safetensors_bytes(_ARRAYS, metadata={"source": "fuzz"})
    return out


_FILES = _valid_files()


def _interesting(blob):
    """Offsets of the bytes that hold lengths: the first 16, each zip/.npy signature and the 48
    bytes after it, and every digit of a safetensors header (its shapes and offsets)."""
    spots = set(range(0, 16))
    if not blob.startswith(b"PK"):
        header_end = 8 + struct.unpack("<Q", blob[:8])[0]
        spots.update(i for i in range(8, header_end) if 0x30 <= blob[i] <= 0x39)
    for sig in _SIGNATURES:
        start = blob.find(sig)
        while start >= 0:
            spots.update(range(start, min(start + 48, len(blob))))
            start = blob.find(sig, start + 1)
    return sorted(spots)


def _outcome(path, blob):
    """Load `blob` written at `path`: the arrays, or None after checking the WeightsError message.
    Any other exception propagates and fails the test."""
    path.write_bytes(blob)
    try:
        arrays = nn.load(path)
    except nn.WeightsError as exc:
        msg = str(exc)
        assert str(path) in msg and "\n" not in msg and len(msg) < 300 + len(str(path)), msg
        return None
    assert isinstance(arrays, dict) and all(isinstance(v, np.ndarray) for v in arrays.values())
    # BF16 doubles in width on reading; nothing else may grow beyond what deflate can produce
    assert sum(v.nbytes for v in arrays.values()) <= 2 * MAX_RATIO * len(blob)
    return arrays


@FUZZ
@given(blob=st.binary(max_size=600), suffix=st.sampled_from([".npz", ".safetensors"]),
       prefix=st.sampled_from([b"", b"PK\x03\x04", b"PK\x05\x06", b"\x10\x00\x00\x00\x00\x00\x00\x00{"]))
def test_random_bytes_end_in_a_weights_error(scratch, blob, suffix, prefix):
    assert _outcome(scratch / ("random" + suffix), prefix + blob) in (None, {})


_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10 ** 6), st.integers(1, 255)),
    st.tuples(st.just("field"), st.integers(0, 10 ** 6), st.sampled_from([2, 4, 8]), st.sampled_from(_EXTREMES)),
    st.tuples(st.just("truncate"), st.integers(0, 10 ** 6)),
    st.tuples(st.just("insert"), st.integers(0, 10 ** 6), st.binary(min_size=1, max_size=16)),
)


def _mutate(blob, mutations, targeted):
    """Apply each mutation at a position: a random one, or (if `targeted`) one inside a length field."""
    data = bytearray(blob)
    spots = _interesting(blob)
    for op, pos, *args in mutations:
        if not data:
            break
        pos = spots[pos % len(spots)] if targeted else pos % len(data)
        pos = min(pos, len(data) - 1)
        if op == "flip":
            data[pos] ^= args[0]
        elif op == "field":
            width, value = args
            data[pos:pos + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
        elif op == "truncate":
            del data[pos:]
        else:
            data[pos:pos] = args[0]
    return bytes(data)


@FUZZ
@given(name=st.sampled_from(sorted(_FILES)), mutations=st.lists(_mutation, min_size=1, max_size=4),
       targeted=st.booleans())
def test_mutated_valid_files_load_or_raise_a_weights_error(scratch, name, mutations, targeted):
    blob = _mutate(_FILES[name], mutations, targeted)
    arrays = _outcome(scratch / name, blob)
    if arrays is not None and blob == _FILES[name]:
        assert arrays.keys() == _ARRAYS.keys()


def test_the_unmutated_files_load_exactly(scratch):
    """The control of the mutation test: its starting files are valid and read back unchanged."""
    for name, blob in _FILES.items():
        arrays = _outcome(scratch / name, blob)
        assert arrays.keys() == _ARRAYS.keys(), name
        for key, arr in _ARRAYS.items():
            np.testing.assert_array_equal(arrays[key], arr)
            assert arrays[key].shape == arr.shape and arrays[key].dtype == arr.dtype


# --- hand-made headers: the .npy dict literal and the safetensors JSON, with hostile values

def _npz_member(header_text, data=b"", version=(1, 0), compress=zipfile.ZIP_STORED, name="w.npy"):
    """A one-member .npz whose .npy header is `header_text` exactly (padding is left to the caller)."""
    text = header_text.encode("latin1", "replace")
    length = struct.pack("<H", len(text)) if version[0] == 1 else struct.pack("<I", len(text))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compress) as zf:
        zf.writestr(name, b"\x93NUMPY" + bytes(version) + length + text + data)
    return buf.getvalue()


_dims = st.one_of(st.integers(-3, 2 ** 70), st.sampled_from(_EXTREMES), st.booleans(), st.floats(allow_nan=True),
                  st.text(max_size=3))
_shape = st.one_of(st.lists(_dims, max_size=5).map(tuple), st.lists(st.integers(0, 3), max_size=40).map(tuple),
                   _dims, st.none())


@FUZZ
@given(descr=st.one_of(st.sampled_from(["<f4", "<f8", "|u1", "|b1", ">i2", "|O", "<U3", "|S2", "V8", "<M8[ns]",
                                        "f4,i4", "(2,)f4", "<f3", "<f12", "[('a', '<f4')]"]), st.text(max_size=6)),
       fortran=st.one_of(st.booleans(), st.integers(-1, 2), st.none()), shape=_shape,
       data=st.binary(max_size=64), fit=st.booleans(),
       version=st.sampled_from([(1, 0), (1, 0), (2, 0), (3, 0), (4, 0), (1, 1)]),
       raw=st.one_of(st.none(), st.none(), st.none(), st.text(max_size=80)))
def test_npy_headers_with_hostile_fields(scratch, descr, fortran, shape, data, fit, version, raw):
    text = raw if raw is not None else repr({"descr": descr, "fortran_order": fortran, "shape": shape})
    if fit and raw is None and isinstance(shape, tuple) and all(type(d) is int and 0 <= d < 4 for d in shape):
        try:                                   # give the data exactly the length the header declares
            data = bytes(int(np.prod(shape)) * np.dtype(descr).itemsize)
        except (TypeError, ValueError):
            pass
    arrays = _outcome(scratch / "hostile.npz", _npz_member(text, data, version))
    if arrays is not None:
        (arr,) = arrays.values()
        assert arr.nbytes <= len(data) and arr.dtype.kind in "biufc"


_json_value = st.recursive(st.none() | st.booleans() | st.integers(-5, 2 ** 70) | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                       max_size=3), max_leaves=8)


@FUZZ
@given(dtype=st.one_of(st.sampled_from(["F32", "BF16", "BOOL", "I64", "F8_E4M3", "f32"]), _json_value),
       shape=st.one_of(st.lists(st.sampled_from([0, 1, 2, 3, 2 ** 32, 2 ** 63, True, -1]), max_size=4), _json_value),
       offsets=st.one_of(st.lists(st.sampled_from([0, 4, 8, 12, 2 ** 64, -4, False]), min_size=2, max_size=2),
                         _json_value),
       metadata=st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.text(max_size=3)), _json_value),
       data=st.binary(max_size=32))
def test_safetensors_headers_with_hostile_fields(scratch, dtype, shape, offsets, metadata, data):
    header = {"__metadata__": metadata, "x": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}
    text = json.dumps(header).encode()
    arrays = _outcome(scratch / "hostile.safetensors", struct.pack("<Q", len(text)) + text + data)
    if arrays is not None:
        assert sum(v.size for v in arrays.values()) <= len(data)


# --- no allocation sized by a length field

def _peak_bytes(path):
    """Peak Python/NumPy memory traced while loading `path`, and the exception (None if it loaded)."""
    tracemalloc.start()
    try:
        nn.load(path)
        error = None
    except nn.WeightsError as exc:
        error = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, error


def test_a_small_file_claiming_a_huge_array_allocates_nothing_of_that_size(tmp_path):
    huge_npz = tmp_path / "huge.npz"
    huge_npz.write_bytes(_npz_member(repr({"descr": "<f8", "fortran_order": False, "shape": (10 ** 6, 10 ** 6)})
                                     + " \n", bytes(800)))
    header = json.dumps({"x": {"dtype": "F64", "shape": [10 ** 6, 10 ** 6], "data_offsets": [0, 8 * 10 ** 12]}})
    huge_st = tmp_path / "huge.safetensors"
    huge_st.write_bytes(struct.pack("<Q", len(header)) + header.encode() + bytes(800))
    long_header = tmp_path / "long_header.safetensors"
    long_header.write_bytes(struct.pack("<Q", 2 ** 40) + bytes(1000))
    for path in (huge_npz, huge_st, long_header):
        assert path.stat().st_size < 1200
        peak, error = _peak_bytes(path)
        assert isinstance(error, nn.WeightsError), path
        assert peak < 2_000_000, (path, peak)
    # the measurement sees real allocations: an honest 8 MB array does show up
    honest = tmp_path / "honest.npz"
    nn.save({"x": np.zeros(10 ** 6)}, honest)
    peak, error = _peak_bytes(honest)
    assert error is None and peak >= 8_000_000


# --- each defect's own message

def _load_error(path, blob):
    path.write_bytes(blob)
    with pytest.raises(nn.WeightsError) as info:
        nn.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    return str(info.value)


def test_safetensors_header_longer_than_the_file(tmp_path):
    msg = _load_error(tmp_path / "a.safetensors", struct.pack("<Q", 2 ** 63) + b"{}")
    assert msg.endswith("is not a valid safetensors file: the header length 9223372036854775808 exceeds the "
                        "file's size of 10 bytes (truncated file?)")


def test_safetensors_shape_whose_byte_count_overflows_int64(tmp_path):
    header = json.dumps({"x": {"dtype": "F32", "shape": [2 ** 32, 2 ** 32], "data_offsets": [0, 0]}}).encode()
    msg = _load_error(tmp_path / "a.safetensors", struct.pack("<Q", len(header)) + header)
    assert "is not a valid safetensors file: tensor 'x' (F32, shape (4294967296, 4294967296)) needs " \
           "73786976294838206464 bytes but its data_offsets [0, 0] span 0" in msg


@pytest.mark.parametrize("shape", [[0, 2 ** 63], [0, 2 ** 62, 4], [2 ** 70, 0]])
def test_empty_arrays_with_dimensions_numpy_cannot_hold(tmp_path, shape):
    """Zero elements and zero bytes, but NumPy refuses the shape: a WeightsError, not its ValueError."""
    header = json.dumps({"x": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}).encode()
    msg = _load_error(tmp_path / "a.safetensors", struct.pack("<Q", len(header)) + header)
    assert f"tensor 'x' has shape {shape}, too large for any array" in msg
    blob = _npz_member(repr({"descr": "<f4", "fortran_order": False, "shape": tuple(shape)}))
    assert f"member 'w.npy' has shape {tuple(shape)}, too large for any array" in _load_error(tmp_path / "a.npz",
                                                                                               blob)


def test_safetensors_bools_are_not_offsets_or_dims():
    header = json.dumps({"x": {"dtype": "U8", "shape": [1], "data_offsets": [False, True]}}).encode()
    with pytest.raises(nn.WeightsError, match=r"data_offsets \[false, true\]|data_offsets \[False, True\]"):
        parse_safetensors(struct.pack("<Q", len(header)) + header + b"\x01")


def test_npz_shape_that_does_not_fit_the_member(tmp_path):
    blob = _npz_member(repr({"descr": "<f8", "fortran_order": False, "shape": (2 ** 40, 2 ** 40)}), bytes(16))
    msg = _load_error(tmp_path / "a.npz", blob)
    assert "is not a readable .npz file: member 'w.npy' declares shape" in msg
    assert f"({8 * 2 ** 80} bytes) but holds 16 bytes of data" in msg


def test_npz_object_array_is_refused_not_unpickled(tmp_path):
    buf = io.BytesIO()
    np.savez(buf, w=np.array([{"a": 1}, None], dtype=object))
    msg = _load_error(tmp_path / "pickled.npz", buf.getvalue())
    assert "member 'w.npy' has dtype '|O'" in msg and "need pickle, are refused" in msg


def test_npz_duplicate_member_names(tmp_path):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # zipfile warns about the duplicate it writes
        with zipfile.ZipFile(buf, "w") as zf:
            for value in (1.0, 2.0):
                member = io.BytesIO()
                np.save(member, np.array([value]))
                zf.writestr("w.npy", member.getvalue())
    assert "it has two members named 'w.npy'" in _load_error(tmp_path / "dup.npz", buf.getvalue())


def test_npz_crc_mismatch(tmp_path):
    blob = bytearray(_FILES["stored.npz"])
    data_start = blob.find(b"\x93NUMPY") + 128           # numpy pads each header to 64-byte blocks
    blob[data_start] ^= 0xFF
    assert "Bad CRC-32 for file 'conv.weight.npy'" in _load_error(tmp_path / "crc.npz", bytes(blob))


def _stored_member_then(info_size, payload, pad):
    """A zip with a deflated member whose central directory claims `info_size` uncompressed bytes
    instead of its real size, then a stored padding member of `pad` bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("w.npy", payload, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("pad.npy", bytes(pad))
    blob = bytearray(buf.getvalue())
    central = blob.find(b"PK\x01\x02")                     # the first member's directory entry
    blob[central + 24:central + 28] = struct.pack("<I", info_size)
    return bytes(blob)


def test_npz_member_claiming_more_than_deflate_can_produce(tmp_path):
    blob = _stored_member_then(10 ** 8, b"\x93NUMPY", pad=200_000)
    msg = _load_error(tmp_path / "bomb.npz", blob)
    assert "member 'w.npy' claims 100000000 bytes from" in msg and "(a zip bomb?)" in msg


def test_npz_members_claiming_more_than_the_file_can_hold(tmp_path):
    blob = _stored_member_then(2 ** 32 - 1, b"\x93NUMPY", pad=10)
    msg = _load_error(tmp_path / "bomb.npz", blob)
    assert "its members claim" in msg and "more than 1100 times the file's" in msg


def test_a_real_highly_compressed_member_still_loads(tmp_path):
    """The ratio bound refuses only what deflate cannot produce: 8 MB of zeros (about 1000:1) loads."""
    nn.save({"z": np.zeros(10 ** 6)}, tmp_path / "zeros.npz", compressed=True)
    info = zipfile.ZipFile(tmp_path / "zeros.npz").infolist()[0]
    assert info.file_size / info.compress_size > 500
    assert nn.load(tmp_path / "zeros.npz")["z"].shape == (10 ** 6,)


def _zip(members, compression=zipfile.ZIP_STORED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _encrypted():
    blob = bytearray(_zip({"w.npy": _npy(np.ones(2))}))
    central = blob.find(b"PK\x01\x02")
    blob[central + 8] |= 1                                  # the "encrypted" flag bit
    return bytes(blob)


@pytest.mark.parametrize("blob, message", [
    (_zip({"w.npy": _npy(np.ones(2))}, zipfile.ZIP_BZIP2), "member 'w.npy' uses compression method 12; only "
                                                           "stored and deflated members are read"),
    (_encrypted(), "member 'w.npy' is encrypted"),
    (_zip({"w.txt": b"hello"}), "member 'w.txt' is not a .npy array"),
    (_zip({"w.npy": b"hello"}), "member 'w.npy' is not a .npy array (it does not start with the .npy magic)"),
    (_npz_member("{}", version=(4, 0)), "member 'w.npy' has .npy format version 4.0"),
    (_npz_member("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}"),
     "header that is not a dict literal with the keys descr, fortran_order and shape"),
    (_npz_member("__import__('os').system('true')"), "header that is not a dict literal"),
    (_npz_member(repr({"descr": "<f4", "fortran_order": 0, "shape": ()}), bytes(4)),
     "fortran_order 0; expected True or False"),
    (_npz_member(repr({"descr": "<f4", "fortran_order": False, "shape": (1,) * 33}), bytes(4)),
     "expected a tuple of at most 32 non-negative integers"),
    (_npz_member(repr({"descr": "<f4", "fortran_order": False, "shape": (True,)}), bytes(4)),
     "has shape (True,)"),
    (_npz_member("{'descr': '<f4', 'fortran_order': False, 'shape': (8,)}", bytes(8)),
     "declares shape (8,) of <f4 (32 bytes) but holds 8 bytes of data"),
    (_zip({"w.npy": b"\x93NUMPY\x01\x00" + struct.pack("<H", 100) + b"{}"}),
     "member 'w.npy' has a .npy header length of 100 bytes, more than the member's 12 bytes"),
    (_zip({"w.npy": b"\x93NUMPY\x02\x00\x00\x00"}), "member 'w.npy' ends inside its .npy header"),
])
def test_each_npz_defect_has_its_own_message(tmp_path, blob, message):
    assert message in _load_error(tmp_path / "defect.npz", blob)


def test_a_member_too_large_to_allocate_is_a_weights_error(tmp_path, monkeypatch):
    """Within the ratio bound a big lying file may still declare more than memory holds."""
    import saliency.nn.npz as npz

    def no_memory(stream, nbytes):
        raise MemoryError
    monkeypatch.setattr(npz, "read_exactly", no_memory)
    msg = _load_error(tmp_path / "a.npz", _FILES["stored.npz"])
    assert "declares 96 bytes of data, more than this machine can allocate" in msg
