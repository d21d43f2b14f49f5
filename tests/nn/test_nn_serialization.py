"""Weights on disk: .npz round trips, safetensors layout rules, BF16/F16, malformed files."""
import json
import struct

import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.nn.serialization import parse_safetensors, safetensors_bytes


def _raw_safetensors(header, buffer, pad=True):
    """A safetensors file built by hand, independently of the writer under test."""
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + buffer


def _model():
    return nn.Sequential(nn.Linear(3, 4, generator=np.random.default_rng(0)), nn.ReLU(),
                         nn.Linear(4, 2, generator=np.random.default_rng(1)))


def _arrays():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((2, 3)).astype(np.float32), "d": rng.standard_normal(5),
            "h": rng.standard_normal((3,)).astype(np.float16), "i": np.arange(4, dtype=np.int64),
            "j": np.arange(3, dtype=np.int32), "k": np.array([-1, 2], np.int16), "b": np.array([-3], np.int8),
            "u": np.array([7, 255], np.uint8), "m": np.array([True, False, True]),
            "s": np.array(2.5, np.float32), "e": np.zeros((0, 3), np.float32)}


@pytest.mark.parametrize("suffix", [".npz", ".bin"])
def test_npz_round_trip_of_a_module_at_exactly_the_given_path(tmp_path, suffix):
    model = _model()
    path = tmp_path / ("weights" + suffix)
    nn.save(model, path)
    assert path.exists() and not (tmp_path / ("weights" + suffix + ".npz")).exists()
    loaded = nn.load(path)
    assert list(loaded) == list(model.state_dict())
    twin = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    twin.load_state_dict(loaded)
    x = sl.tensor(np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32))
    np.testing.assert_array_equal(twin(x).numpy(), model(x).numpy())


def test_npz_round_trip_of_arrays_tensors_and_odd_keys(tmp_path):
    arrays = _arrays()
    arrays["file"] = np.ones(2)  # a name np.savez(file, **kwds) could not take
    arrays["t"] = sl.tensor([1.0, 2.0])
    nn.save(arrays, tmp_path / "a.npz", compressed=True)
    loaded = nn.load(tmp_path / "a.npz")
    for k, v in arrays.items():
        want = v.numpy() if isinstance(v, sl.Tensor) else v
        assert loaded[k].dtype == want.dtype
        np.testing.assert_array_equal(loaded[k], want)
    assert np.load(tmp_path / "a.npz")["w"].shape == (2, 3)  # a plain NumPy archive


def test_safetensors_round_trip_of_every_dtype(tmp_path):
    arrays = _arrays()
    nn.save_safetensors(arrays, tmp_path / "a.safetensors", metadata={"format": "np"})
    loaded = nn.load(tmp_path / "a.safetensors")
    assert set(loaded) == set(arrays)
    for k, v in arrays.items():
        assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape, k
        np.testing.assert_array_equal(loaded[k], v)
        assert loaded[k].flags.writeable
    _, metadata = parse_safetensors((tmp_path / "a.safetensors").read_bytes())
    assert metadata == {"format": "np"}


def test_written_safetensors_follow_the_layout_rules():
    arrays = _arrays()
    blob = safetensors_bytes(arrays)
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0  # the data buffer starts 8-byte aligned
    text = blob[8:8 + n]
    assert text.startswith(b"{") and text.rstrip(b" ").endswith(b"}")
    assert set(text[len(text.rstrip(b" ")):]) <= {ord(" ")}
    header = json.loads(text)
    buffer = blob[8 + n:]
    spans = sorted(tuple(info["data_offsets"]) for info in header.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(buffer)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # no gaps, no overlaps
    codes = {"w": "F32", "d": "F64", "h": "F16", "i": "I64", "j": "I32", "k": "I16", "b": "I8", "u": "U8",
             "m": "BOOL", "s": "F32", "e": "F32"}
    for k, info in header.items():
        assert info["dtype"] == codes[k] and info["shape"] == list(arrays[k].shape)
        begin, end = info["data_offsets"]
        assert buffer[begin:end] == arrays[k].astype(arrays[k].dtype.newbyteorder("<")).tobytes()
        assert begin % arrays[k].dtype.itemsize == 0  # larger dtypes first: every tensor is aligned
    order = list(header)
    assert order.index("d") < order.index("w") < order.index("h") < order.index("u")


def test_big_endian_arrays_are_written_little_endian():
    arr = np.arange(3, dtype=">f4")
    loaded, _ = parse_safetensors(safetensors_bytes({"x": arr}))
    np.testing.assert_array_equal(loaded["x"], np.arange(3, dtype=np.float32))


def test_bf16_and_f16_files_written_by_hand(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 65280.0], np.float32)  # exactly representable in bfloat16
    bf16 = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    f16 = np.array([0.5, -1.0], "<f2").tobytes()
    header = {"__metadata__": {"source": "hand"},
              "a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
              "b": {"dtype": "F16", "shape": [2], "data_offsets": [8, 12]}}
    path = tmp_path / "m.safetensors"
    path.write_bytes(_raw_safetensors(header, bf16 + f16))
    loaded = nn.load(path)
    assert loaded["a"].dtype == np.float32 and loaded["b"].dtype == np.float16
    np.testing.assert_array_equal(loaded["a"], values.reshape(2, 2))
    np.testing.assert_array_equal(loaded["b"], [0.5, -1.0])
    lin = nn.Linear(2, 2)
    lin.load_state_dict({"weight": loaded["a"], "bias": loaded["b"]})
    assert lin.bias.dtype == np.float32


def test_safetensors_weights_load_into_a_module(tmp_path):
    model = _model()
    nn.save_safetensors(model, tmp_path / "m.safetensors")
    twin = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    twin.load_state_dict(nn.load(tmp_path / "m.safetensors"))
    for a, b in zip(model.parameters(), twin.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_unpadded_header_is_accepted():
    blob = _raw_safetensors({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
                            np.array([2.0], "<f4").tobytes(), pad=False)
    np.testing.assert_array_equal(parse_safetensors(blob)[0]["x"], [2.0])


_ENTRY = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("blob, message", [
    (b"\x01\x02", "fewer than the 8-byte header length"),
    (struct.pack("<Q", 200) + b"{}", "the header length 200 exceeds the file's size of 10 bytes"),
    (struct.pack("<Q", 2 ** 63) + bytes(100), "the header length 9223372036854775808 exceeds the file's size of 108"),
    (struct.pack("<Q", 4) + b"{abc", "not valid UTF-8 JSON"),
    (struct.pack("<Q", 2) + b"[]", "must be a JSON object"),
    (_raw_safetensors({"x": {**_ENTRY, "dtype": "F8_E4M3"}}, bytes(8)), "dtype 'F8_E4M3', which is not supported"),
    (_raw_safetensors({"x": {**_ENTRY, "shape": [3]}}, bytes(8)), "needs 12 bytes but its data_offsets"),
    (_raw_safetensors({"x": {**_ENTRY, "shape": [-2]}}, bytes(8)), "non-negative integers"),
    (_raw_safetensors({"x": {"dtype": "F32", "shape": [2]}}, bytes(8)), "dtype, shape and data_offsets"),
    (_raw_safetensors({"x": {**_ENTRY, "data_offsets": [8, 0]}}, bytes(8)), "0 <= begin <= end"),
    (_raw_safetensors({"x": _ENTRY}, bytes(4)), "ends at byte 8 of a data buffer of 4 bytes"),
    (_raw_safetensors({"x": _ENTRY}, bytes(12)), "4 bytes after the last tensor"),
    (_raw_safetensors({"x": {**_ENTRY, "data_offsets": [4, 12]}}, bytes(12)), "gap of 4 bytes"),
    (_raw_safetensors({"x": _ENTRY, "y": {**_ENTRY, "data_offsets": [4, 12]}}, bytes(12)), "overlaps"),
    (_raw_safetensors({"__metadata__": {"a": 1}}, b""), "__metadata__ must map strings to strings"),
    (struct.pack("<Q", 16) + b'{"a":1 , "a":2 }', "duplicate key 'a'"),
])
def test_malformed_safetensors_raise_clear_errors(blob, message):
    with pytest.raises(nn.WeightsError, match="not a valid safetensors file: .*" + message):
        parse_safetensors(blob)


def test_truncated_file_on_disk_names_the_path(tmp_path):
    blob = safetensors_bytes({"x": np.arange(10, dtype=np.float32)})
    path = tmp_path / "cut.safetensors"
    path.write_bytes(blob[:-5])
    with pytest.raises(nn.WeightsError, match=r"cut\.safetensors is not a valid safetensors file.*truncated"):
        nn.load(path)


def test_broken_npz_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(nn.WeightsError, match="not a readable .npz file"):
        nn.load(path)


def test_unwritable_values_are_type_errors(tmp_path):
    with pytest.raises(TypeError, match="no safetensors code"):
        safetensors_bytes({"c": np.zeros(2, np.complex64)})
    with pytest.raises(TypeError, match="Module or a dict"):
        nn.save([1, 2], tmp_path / "x.npz")


def test_non_ascii_names_round_trip():
    loaded, _ = parse_safetensors(safetensors_bytes({"größe.weight": np.ones(2, np.float32)}))
    assert list(loaded) == ["größe.weight"]


def test_bytes_equal_the_reference_writer_when_installed():
    st = pytest.importorskip("safetensors.numpy")
    arrays = _arrays()
    assert safetensors_bytes(arrays, metadata={"a": "b"}) == st.save(arrays, metadata={"a": "b"})
    loaded = st.load(safetensors_bytes(arrays))
    for k, v in arrays.items():
        np.testing.assert_array_equal(loaded[k], v)
