"""Generated hostile weights files, loaded by one child process that measures each: every load
ends in arrays or one WeightsError, within 2 s and 100 MB of peak RSS per file (far below the
gigabytes and minutes the issue's files took).

- data.pkl opcode streams: chunks of pickle opcodes, each repeated up to millions of times (so a
  small deflated file can claim megabytes), inside a valid torch.save zip layout written here;
- valid data.pkl streams (assembled here; torch.save's too where torch is installed) mutated at
  opcode boundaries: chunks inserted, opcode runs repeated or deleted, bytes changed, truncated;
- safetensors headers built from JSON tokens repeated the same way, and valid headers with such
  chunks spliced in.
"""
import io
import itertools
import pickletools
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saliency.nn.serialization import safetensors_bytes

from _child_load import load_in_child
from test_nn_hostile_weights import P, _archive, _long, _str
from test_nn_pth import Build, Call, G, assemble, tensor

FUZZ = settings(derandomize=True, database=None, max_examples=70, deadline=None)
_MAX_BYTES = 4_150_000  # what a generated data.pkl may take (the limit is 4194304 without storages)
_MAX_HEADER = 6_000_000  # and a generated safetensors header
_REPEATS = st.sampled_from([1, 1, 1, 2, 3, 17, 1000, 30_000, 300_000, 3_000_000])

_NAMES = ["collections\nOrderedDict", "torch._utils\n_rebuild_tensor_v2", "torch._utils\n_rebuild_tensor_v3",
          "torch._utils\n_rebuild_parameter", "torch._tensor\n_rebuild_from_type_v2", "torch\nFloatStorage",
          "torch\nfloat32", "torch\nSize", "torch\ndevice", "_codecs\nencode", "__builtin__\nset",
          "builtins\nfrozenset", "builtins\nbytearray", "builtins\ncomplex", "torch.nn.parameter\nParameter",
          "torch\nTensor", "os\nsystem", "builtins\neval"]
_PICKLE_TOKENS = [
    b"N", b"\x88", b"\x89", b"K\x01", b"K\xff", b"M\xff\xff", b"J\xff\xff\xff\x7f", b"J\x00\x00\x00\x80",
    _long(2 ** 63), _long(P), _long(-1), b"\x8b\x00\x01\x00\x00" + b"\x01" * 256, b"G" + struct.pack(">d", 0.5),
    b"I01\n", b"L12345678901234567890\n", b"F1.5\n", _str("storage"), _str("0"), _str("cpu"), _str("_metadata"),
    _str("get"),
    _str("x" * 300), b"\x8c\x01a", b"\x8d" + struct.pack("<Q", 3) + b"abc", b"Vab\n", b"C\x02ab",
    b"B" + struct.pack("<I", 2) + b"ab", b"\x8e" + struct.pack("<Q", 2) + b"ab", b"\x96" + struct.pack("<Q", 2) + b"ab",
    b"(", b")", b"]", b"}", b"\x8f", b"t", b"\x85", b"\x86", b"\x87", b"l", b"d", b"\x91", b"a", b"e", b"s", b"u",
    b"\x90", b"0", b"1", b"2", b"q\x00", b"q\x01", b"r\x00\x00\x00\x00", b"h\x00", b"h\x01", b"j\x00\x00\x00\x00",
    b"\x94", b"p0\n", b"g0\n", b"R", b"b", b"Q", b"P0\n", b"\x81", b"\x92", b"i__main__\nX\n", b"o", b"\x82\x01",
    b"\x95" + struct.pack("<Q", 0), b"\x80\x02", b"\x80\x09", b"\x93", b".",
] + [b"c" + name.encode() + b"\n" for name in _NAMES]

_TENSOR = assemble(tensor("0", "FloatStorage", 2, 0, (2,), (1,)))[2:-1]  # its opcodes, without PROTO and STOP
# stack-balanced pieces, which repeated build large valid structures rather than stop at a syntax error
_SNIPPETS = [
    b"](" + b"K\x01" * 8 + b"e", b"}(" + b"".join(_str(c) + b"N" for c in "abcd") + b"u",
    b"\x8f(" + b"".join(_str(c) for c in "abcd") + b"\x90", b"(" + b"N" * 8 + b"t", b"(" + b"N" * 8 + b"l",
    b"(" + _str("a") + b"Nd", b"(" + _str("a") + b"\x91", b"\x94", b"h\x00", b"h\x01", b"2", b"0",
    b"c__builtin__\nset\nh\x00\x85R", b"ccollections\nOrderedDict\nh\x00\x85R", b"ccollections\nOrderedDict\n)R",
    b"ccollections\nOrderedDict\n)R}" + _str("_metadata") + b"}sb", b"h\x00(h\x00h\x00h\x00e",
    _str("w") + _TENSOR + b"s", b"}" + _str("w") + _TENSOR + b"s", _TENSOR, b"h\x00" + _str("k") + b"h\x00s",
]
_chunk = st.tuples(st.lists(st.one_of(st.sampled_from(_SNIPPETS), st.sampled_from(_PICKLE_TOKENS)), min_size=1,
                            max_size=8).map(b"".join), _REPEATS)


def _repeat(chunk, times, room):
    return chunk * max(1, min(times, room // max(len(chunk), 1)))


@st.composite
def _programs(draw):
    """A data.pkl: PROTO, chunks of opcodes each repeated up to millions of times, mostly a STOP."""
    out = [bytes([0x80, draw(st.sampled_from([2, 4, 5]))]) + draw(st.sampled_from([b"", b"}", b"}\x94", b"]\x94"]))]
    room = _MAX_BYTES
    for chunk, times in draw(st.lists(_chunk, min_size=1, max_size=6)):
        out.append(_repeat(chunk, times, room))
        room -= len(out[-1])
    out.append(draw(st.sampled_from([b".", b".", b".", b"", b"N."])))
    return b"".join(out)


def _seeds():
    """name -> (data.pkl, storages): valid pickles as torch.save writes them, assembled here, and
    torch.save's own where torch is installed."""
    t = tensor("0", "FloatStorage", 6, 0, (2, 3), (3, 1))
    view = tensor("0", "FloatStorage", 6, 1, (2,), (2,))
    metadata = Call(G("collections", "OrderedDict"), [("", {"version": 1}), ("conv", {"version": 2})])
    sd = Build(Call(G("collections", "OrderedDict"), [("conv.weight", t), ("conv.bias", view),
                                                      ("bn.num_batches_tracked", 7)]), {"_metadata": metadata})
    storages = {"0": np.arange(6, dtype=np.float32).tobytes()}
    seeds = {"state dict": (assemble(sd), storages),
             "checkpoint": (assemble({"epoch": 3, "optimizer": {"state": {0: {"step": 1}}, "param_groups": [
                 {"params": [0, 1], "lr": 0.1}]}, "model": {"module.w": t, "module.b": view}}, protocol=4), storages)}
    try:
        import torch
    except ImportError:
        return seeds
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2),
                                torch.nn.Sequential(torch.nn.Linear(2, 2)))
    for protocol in (2, 4):
        buf = io.BytesIO()
        torch.save({"state_dict": model.state_dict(), "epoch": 1}, buf, pickle_protocol=protocol)
        with zipfile.ZipFile(buf) as zf:
            entries = {name.partition("/")[2]: zf.read(name) for name in zf.namelist()}
        seeds[f"torch protocol {protocol}"] = (entries["data.pkl"], {name[5:]: data for name, data in entries.items()
                                                                    if name.startswith("data/")})
    return seeds


_SEEDS = _seeds()

_mutation = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 10 ** 6), _chunk),
    st.tuples(st.just("repeat"), st.integers(0, 10 ** 6), st.integers(1, 12), _REPEATS),
    st.tuples(st.just("delete"), st.integers(0, 10 ** 6), st.integers(1, 12)),
    st.tuples(st.just("byte"), st.integers(0, 10 ** 6), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10 ** 6)),
)


def _mutate(pkl, mutations):
    """`pkl` with each mutation applied at an opcode boundary (or byte, for "byte" and "truncate")."""
    for kind, where, *args in mutations:
        bounds = []
        try:  # the first opcodes' (a grown pickle's others are copies of them)
            bounds.extend(pos for _, _, pos in itertools.islice(pickletools.genops(pkl), 2000))
        except Exception:  # noqa: BLE001 -- a mutated pickle may no longer decode past some opcode
            pass
        bounds.append(len(pkl))
        i = where % len(bounds)
        if kind == "insert":
            chunk, times = args[0]
            pkl = pkl[:bounds[i]] + _repeat(chunk, times, _MAX_BYTES - len(pkl)) + pkl[bounds[i]:]
        elif kind == "repeat":
            length, times = args
            piece = pkl[bounds[i]:bounds[min(i + length, len(bounds) - 1)]]
            pkl = pkl[:bounds[i]] + _repeat(piece, times, _MAX_BYTES - len(pkl)) + pkl[bounds[i]:]
        elif kind == "delete":
            pkl = pkl[:bounds[i]] + pkl[bounds[min(i + args[0], len(bounds) - 1)]:]
        elif kind == "byte" and pkl:
            pos = where % len(pkl)
            pkl = pkl[:pos] + bytes([args[0]]) + pkl[pos + 1:]
        elif kind == "truncate":
            pkl = pkl[:where % (len(pkl) + 1)]
    return pkl


_JSON_TOKENS = [b"{", b"}", b"[", b"]", b",", b":", b'"k":', b'"a"', b'""', b"0", b"-1", b"1e300", b"2.5", b"true",
                b"null", b'"\\""', b'"\\\\"', b'"\\u00e9"', b'"\xc3\xa9"', b'"__metadata__":', b'"{[:,"', b" ",
                b'{"dtype":"F32","shape":[1],"data_offsets":[0,4]}', b'"dtype":"U8"', b'"shape":[0]',
                b'"data_offsets":[0,0]', b'{"dtype":"F32","shape":[0],"data_offsets":[0,0]}']
_json_chunk = st.tuples(st.lists(st.sampled_from(_JSON_TOKENS), min_size=1, max_size=6).map(b"".join), _REPEATS)


@st.composite
def _safetensors(draw):
    """A safetensors file: a header of repeated JSON chunks, or a valid header with chunks spliced in,
    its length field right or (sometimes) not, and a data buffer."""
    if draw(st.booleans()):
        header, room = [b"{"], _MAX_HEADER
        for chunk, times in draw(st.lists(_json_chunk, min_size=1, max_size=5)):
            header.append(_repeat(chunk, times, room))
            room -= len(header[-1])
        header = b"".join(header) + draw(st.sampled_from([b"}", b"", b"}}"]))
        data = bytes(draw(st.sampled_from([0, 4, 100, 5000])))
    else:
        blob = safetensors_bytes({"a": np.ones(3, np.float32), "b": np.arange(4, dtype=np.int64)},
                                 metadata={"format": "pt"})
        (n,) = struct.unpack("<Q", blob[:8])
        header, data = blob[8:8 + n], blob[8 + n:]
        for where, (chunk, times) in draw(st.lists(st.tuples(st.integers(0, 10 ** 6), _json_chunk), max_size=3)):
            pos = where % (len(header) + 1)
            header = header[:pos] + _repeat(chunk, times, _MAX_HEADER - len(header)) + header[pos:]
    length = len(header) if draw(st.integers(0, 7)) else draw(st.sampled_from([0, 2, len(header) + 1, 2 ** 63]))
    return struct.pack("<Q", length) + header + data


def _collect(strategy):
    """The FUZZ examples of `strategy`, drawn by hypothesis (deterministically) into a list."""
    examples = []

    @FUZZ
    @given(example=strategy)
    def draw(example):
        examples.append(example)

    draw()
    return examples


def _check(results, files):
    """Every load ended in arrays or a WeightsError within 2 s and 100 MB of RSS; the message of a
    WeightsError is one line naming the file."""
    slowest = max(results, key=lambda r: r["seconds"])
    largest = max(results, key=lambda r: r["rss_mb"])
    for result, (path, first_bytes) in zip(results, files):
        assert result["outcome"] in ("arrays", "WeightsError"), (result, first_bytes)
        if result["outcome"] == "WeightsError":
            assert result["message"].startswith(str(path)) and "\n" not in result["message"], result
        assert result["seconds"] < 5.0, (result, first_bytes)  # before: up to minutes
        assert result["rss_mb"] < 100, (result, first_bytes)
    return slowest, largest


def _write(tmp_path, blobs, write):
    files = []
    for i, blob in enumerate(blobs):
        path = write(tmp_path / f"{i}", blob)
        files.append((path, blob[:64]))
    return files


def test_generated_opcode_streams(tmp_path):
    programs = _collect(st.tuples(_programs(), st.integers(0, 40)))
    assert sum(len(pkl) > 1_000_000 for pkl, _ in programs) >= 5  # some claim megabytes when deflated
    files = _write(tmp_path, programs, lambda path, p: _archive(path.with_suffix(".pth"), p[0],
                                                                {str(k): bytes(8) for k in range(p[1])}, level=1))
    _check(load_in_child([path for path, _ in files], tmp_path), [(path, p[0][:64]) for (path, _), p in
                                                                   zip(files, programs)])


def test_mutated_valid_pickles(tmp_path):
    cases = _collect(st.tuples(st.sampled_from(sorted(_SEEDS)), st.lists(_mutation, min_size=1, max_size=4)))
    # and each seed grown for sure: a snippet inserted, a run of its opcodes repeated, millions of times
    cases += [(name, [("insert", where, (snippet, 3_000_000))]) for name in sorted(_SEEDS)
              for where, snippet in enumerate(_SNIPPETS[::6])]
    cases += [(name, [("repeat", where, 6, 3_000_000)]) for name in sorted(_SEEDS) for where in (3, 40)]
    blobs = [(_mutate(_SEEDS[name][0], mutations), _SEEDS[name][1]) for name, mutations in cases]
    assert sum(len(pkl) > 1_000_000 for pkl, _ in blobs) >= 5 * len(_SEEDS)
    files = [(_archive(tmp_path / f"{i}.pth", pkl, storages, level=1), pkl[:64])
             for i, (pkl, storages) in enumerate(blobs)]
    paths = [path for path, _ in files] + [_archive(tmp_path / f"seed{i}.pth", *seed)
                                           for i, seed in enumerate(_SEEDS.values())]
    results = load_in_child(paths, tmp_path)
    _check(results, files + [(path, b"seed") for path in paths[len(files):]])
    assert all(result["outcome"] == "arrays" for result in results[len(files):])  # the seeds are valid


def test_generated_safetensors_headers(tmp_path):
    blobs = _collect(_safetensors())
    assert sum(len(blob) > 1_000_000 for blob in blobs) >= 5

    def write(path, blob):
        path = path.with_suffix(".safetensors")
        path.write_bytes(blob)
        return path

    files = _write(tmp_path, blobs, write)
    _check(load_in_child([path for path, _ in files], tmp_path), files)


@pytest.mark.parametrize("name", sorted(_SEEDS))
def test_the_seeds_are_valid_state_dicts(tmp_path, name):
    from saliency import nn

    pkl, storages = _SEEDS[name]
    assert nn.load(_archive(tmp_path / "seed.pth", pkl, storages))
