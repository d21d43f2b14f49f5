"""The command line's text parsers fed random and near-miss strings: `--seed` (seeds.parse) and
`--model`/`--weights` (zoo.resolve) end in a valid result or in their typed error with a one-line
message, never another exception; a corrupt --weights file is one line and exit code 2."""
import contextlib
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from saliency import nn
from saliency.attribution import seeds
from saliency.cli.main import main
from saliency.models import zoo

FUZZ = settings(derandomize=True, database=None, max_examples=300, deadline=None)

_CLASSIFIER_OUT = np.zeros((1, 8), np.float32)
_DENSE_OUT = np.zeros((1, 1, 16, 16), np.float32)

_number = st.one_of(st.integers(-10, 40).map(str), st.integers(-10 ** 30, 10 ** 30).map(str),
                    st.sampled_from(["nan", "inf", "-inf", "1e3", "1.5", "١٢", "٣", "0x10", "1_0", "", " ", "-0",
                                     "+3", "９", "²", "1" * 5000, "\x00", "3\x00"]))
_near_miss = st.builds(
    lambda name, sep, nums, comma: name + sep + comma.join(nums),
    st.sampled_from(["pixel", "region", "class", "ones", "predicted", "PIXEL", " pixel ", "klass", "", "píxel"]),
    st.sampled_from([":", "", "::", ": ", " :"]), st.lists(_number, max_size=6),
    st.sampled_from([",", ", ", ";", " ", ",,"]))


def _seed_outcome(text):
    """The parsed seed, or None after checking the SeedError message; anything else fails the test."""
    try:
        seed = seeds.parse(text)
    except seeds.SeedError as exc:
        assert str(exc) and "\n" not in str(exc), str(exc)
        return None
    assert isinstance(seed, seeds.Seed) and "\n" not in seed.describe()
    for y in (_CLASSIFIER_OUT, _DENSE_OUT):          # a parsed seed fits an output or says why not
        try:
            v = seed.vector(y)
        except seeds.SeedError as exc:
            assert "\n" not in str(exc), str(exc)
        else:
            assert v.shape == y.shape and v.sum() >= 1
    return seed


@FUZZ
@given(text=st.one_of(st.text(), _near_miss))
def test_seed_strings_parse_or_raise_a_seed_error(text):
    _seed_outcome(text)


@FUZZ
@given(form=st.sampled_from(["class", "pixel", "region"]), nums=st.lists(st.integers(0, 10 ** 30), min_size=4,
                                                                      max_size=4))
def test_well_formed_seed_strings_mean_what_they_say(form, nums):
    """Any size of non-negative integer reads as itself; a box must be non-empty."""
    text = {"class": f"class:{nums[0]}", "pixel": f"pixel:{nums[0]},{nums[1]}",
            "region": f"region:{nums[0]},{nums[1]},{nums[0] + nums[2] + 1},{nums[1] + nums[3] + 1}"}[form]
    seed = _seed_outcome(text)
    expected = {"class": f"class {nums[0]}", "pixel": f"pixel ({nums[0]}, {nums[1]})",
                "region": f"region rows {nums[0]}..{nums[0] + nums[2]}, cols {nums[1]}..{nums[1] + nums[3]}"}[form]
    assert seed is not None and seed.describe() == expected


@pytest.mark.parametrize("text, message", [
    ("region:100000000000000000000000000000,0,1,1", "region box (100000000000000000000000000000, 0, 1, 1) is empty"),
    ("region:-1,0,1,1", "box corner must be a non-negative integer, got -1"),
    ("pixel:1.5,2", "cannot read seed 'pixel:1.5,2'"),
    ("class:nan", "cannot read seed 'class:nan'"),
])
def test_seed_near_misses_have_clear_messages(text, message):
    with pytest.raises(seeds.SeedError, match=message.replace("(", r"\(").replace(")", r"\)")):
        seeds.parse(text)


_model_text = st.builds(
    lambda path, suffix, sep, fn: path + suffix + sep + fn,
    st.sampled_from(["path/that/does/not/exist", "", ".", "/", "a" * 300, "d/" + "b" * 300, "x\x00y", "a\nb",
                     "/dev/null/x", "/tmp", "mine", "ü"]),
    st.sampled_from([".py", ".PY", ".py ", "", ".npz"]), st.sampled_from([":", "::", "", ": "]),
    st.sampled_from(["fn", "", "1fn", "fn()", "f n", "é", "build", "\x00"]))


@pytest.fixture(scope="module")
def empty_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cwd")


@FUZZ
@given(text=st.one_of(st.text(), _model_text), weights=st.one_of(st.none(), st.text(), _model_text))
def test_model_and_weights_strings_resolve_or_raise_a_zoo_error(empty_dir, text, weights):
    with contextlib.chdir(empty_dir):               # no relative path can name a real file
        try:
            model = zoo.resolve(text, weights)
        except (zoo.ZooError, nn.WeightsError) as exc:
            assert str(exc) and "\n" not in str(exc), str(exc)
        else:
            assert text in zoo.SPECS and isinstance(model, nn.Module)


@pytest.mark.parametrize("text, message", [
    ("a" * 300 + ".py:build", "cannot look for the model file aaaa"),
    ("a\nb.py:build", r"model file 'a\nb.py' does not exist"),
    ("x\x00.py:build", r"model file 'x\x00.py' does not exist"),
    ("mine.py:", "unknown model 'mine.py:'"),
])
def test_model_near_misses_have_clear_messages(empty_dir, text, message):
    with contextlib.chdir(empty_dir), pytest.raises(zoo.ZooError) as info:
        zoo.resolve(text)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("name, blob, message", [
    ("bad.npz", b"PK\x03\x04" + bytes(60), "bad.npz is not a readable .npz file: "),
    ("bad.safetensors", struct.pack("<Q", 2 ** 63) + b"{}", "the header length 9223372036854775808 exceeds"),
])
def test_a_corrupt_weights_file_is_one_line_and_exit_code_2(tmp_path, capsys, name, blob, message):
    image = tmp_path / "img.png"
    Image.fromarray(np.full((64, 64, 3), 128, np.uint8)).save(image)
    (tmp_path / name).write_bytes(blob)
    with pytest.raises(SystemExit) as info:
        main(["map", str(image), "--weights", str(tmp_path / name), "--out", str(tmp_path / "o.png")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err
    assert not (tmp_path / "o.png").exists()
