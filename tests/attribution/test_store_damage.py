"""Damaged stores: an index or attributes that cannot be a store's are one StoreError naming the
store and what is wrong; a batch marked done whose chunks are not whole (missing, cut, garbage,
records of the wrong length) reads as not done, `resume` computes it again and `evaluate`
refuses the store naming the batch, never scoring a NaN map. Then a fuzz over the files of a
small store of each format: whatever is done to them, reading and evaluating it gives the data
or one StoreError / InputError, in bounded time and memory."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _store_fixtures import FORMATS, chunk_of, needs_zarr, tiny_model, write_images
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saliency import attribution
from saliency.attribution import InputError, StoreError
from saliency.attribution import store as stores


@pytest.fixture(scope="module")
def model():
    return tiny_model()


@pytest.fixture(scope="module")
def base(model, tmp_path_factory):
    """{use_zarr: (a whole store of five images in batches of 2, its maps as a run gives them)}."""
    root = tmp_path_factory.mktemp("base")
    paths = write_images(root / "images")
    want = attribution.batch(model, paths, "gradient", batch_size=2)
    out = {False: (attribution.batch(model, paths, "gradient", out=root / "npy", batch_size=2, use_zarr=False),
                   want)}
    if stores.zarr_available():
        out[True] = (attribution.batch(model, paths, "gradient", out=root / "zarr", batch_size=2, use_zarr=True),
                     want)
    return out


def _copy(base, use_zarr, tmp_path):
    store, want = base[use_zarr]
    shutil.copytree(store.path, tmp_path / store.path.name)
    return attribution.open_store(tmp_path / store.path.name), want


def _resumed(model, store, progress):
    return attribution.batch(model, store.files, "gradient", out=store.path.parent, batch_size=2,
                             use_zarr=store.backend == "zarr", resume=True, progress=progress)


def _damaged_batch_1_then_resumed(model, store, want, reason):
    assert store.damaged == {1: reason} and store.done.tolist() == [True, True, False, False, True]
    assert np.isnan(np.asarray(store.maps)[2:4]).all()                 # read as a batch not done
    with pytest.raises(StoreError, match="^" + re.escape(
            f"the map store {store.path} has 1 batch marked done that cannot be read: batch 1 (images 2-3): "
            f"{reason}; run saliency batch again with --out {store.path.parent} --resume (the same images and "
            f"options) to compute it again") + "$"):
        attribution.evaluate_store(model, store, steps=2, sample=0)
    seen = []
    again = _resumed(model, store, lambda done, total: seen.append(done))
    assert seen == [5]                                                  # batch 1 alone, computed again
    np.testing.assert_array_equal(np.asarray(again.maps), want.maps)
    assert again.damaged == {} and again.done.all()
    assert len(attribution.evaluate_store(model, again, steps=2, sample=0).files) == 5


ZARR_DAMAGE = {  # (file of batch 1, what is done to it, the reason the store gives)
    "maps cut": ("maps", lambda p: os.truncate(p, 100), "maps/c/1/0/0/0 is 100 bytes, not 3456"),
    "maps deleted": ("maps", os.unlink, "maps/c/1/0/0/0 is missing"),
    "predicted cut": ("predicted", lambda p: os.truncate(p, 3), "predicted/c/1 is 3 bytes, not 16"),
    "error garbage": ("error", lambda p: p.write_bytes(b"\x02\x00\x00\x00\xff"),
                      "error/c/1 is not a chunk of 2 strings"),
    "done half": ("done", lambda p: p.write_bytes(b"\x01\x00"), "done/c/1 does not mark its 2 images done"),
}


@needs_zarr
@pytest.mark.parametrize("case", sorted(ZARR_DAMAGE))
def test_a_damaged_zarr_chunk_is_refused_by_evaluate_and_recomputed_by_resume(model, base, tmp_path, case):
    store, want = _copy(base, True, tmp_path)
    name, damage, reason = ZARR_DAMAGE[case]
    damage(chunk_of(store, 1, name))
    _damaged_batch_1_then_resumed(model, store, want, reason)


NPY_DAMAGE = {
    "maps cut": ("maps", lambda p: os.truncate(p, 200), "maps.1.npy is 200 bytes, not 3584"),
    "maps garbage": ("maps", lambda p: p.write_bytes(b"\x93NUMPY garbage"), "maps.1.npy is not a .npy file"),
    "maps float64": ("maps", lambda p: np.save(p, np.zeros((2, 3, 12, 12))),
                     "maps.1.npy holds float64 (2, 3, 12, 12), not float32 (2, 3, 12, 12)"),
    "record garbage": ("record", lambda p: p.write_text("{garbage"), "batch.1.json is not JSON"),
    "record cut": ("record", lambda p: p.write_text(json.dumps({"first": 2, "predicted": [1], "error": [""],
                                                                 "done": [True]})),
                   "batch.1.json is not the record of its 2 images"),
}


@pytest.mark.parametrize("case", sorted(NPY_DAMAGE))
def test_a_damaged_npy_batch_is_refused_by_evaluate_and_recomputed_by_resume(model, base, tmp_path, case):
    store, want = _copy(base, False, tmp_path)
    name, damage, reason = NPY_DAMAGE[case]
    damage(chunk_of(store, 1, name))
    _damaged_batch_1_then_resumed(model, store, want, reason)


def _edit_json(path, edit):
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


INDEX_DAMAGE = {  # what is done to the attributes (or, "files", to the index), the error's end
    "batch_size 0": (lambda a: a.update(batch_size=0), "batch_size is 0, not a positive int"),
    "batch_size -8": (lambda a: a.update(batch_size=-8), "batch_size is -8, not a positive int"),
    "batch_size text": (lambda a: a.update(batch_size="8"), "batch_size is '8', not a positive int"),
    "batch_size float": (lambda a: a.update(batch_size=2.0), "batch_size is 2.0, not a positive int"),
    "batch_size missing": (lambda a: a.pop("batch_size"), "batch_size is None, not a positive int"),
    "map_shape text": (lambda a: a.update(map_shape="3,12,12"), "map_shape is '3,12,12', not a list of positive"),
    "map_shape negative": (lambda a: a.update(map_shape=[3, -12, 12]), "map_shape is [3, -12, 12], not a list"),
    "map_shape huge": (lambda a: a.update(map_shape=[3, 2 ** 20, 2 ** 20]), "map_shape is [3, 1048576, 1048576]"),
    "method a list": (lambda a: a.update(method=["gradient"]), "method is ['gradient']"),
    "newer format": (lambda a: a.update(format_version=2), "has format version 2, this saliency-maps reads up to 1"),
}


@pytest.mark.parametrize("use_zarr", FORMATS)
@pytest.mark.parametrize("case", sorted(INDEX_DAMAGE))
def test_attributes_that_cannot_be_a_stores_are_one_line(base, tmp_path, use_zarr, case):
    store, _ = _copy(base, use_zarr, tmp_path)
    edit, message = INDEX_DAMAGE[case]
    if use_zarr:
        _edit_json(store.path / "zarr.json", lambda doc: edit(doc["attributes"]))
    else:
        _edit_json(store.path / "index.json", lambda doc: edit(doc["attrs"]))
    with pytest.raises(StoreError, match=re.escape(message)) as info:
        attribution.open_store(store.path)
    assert str(store.path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("edit, message", [
    (lambda doc: doc.update(files=doc["files"][:3]), "it holds batch.2.json, but index.json lists 3 images, "
                                                     "2 batches of 2; index.json is damaged"),
    (lambda doc: doc.update(files="images"), "the file names in index.json are not a list of strings"),
    (lambda doc: doc.update(files=[1, 2, 3, 4, 5]), "the file names in index.json are not a list of strings"),
    (lambda doc: doc.pop("attrs"), "the attributes are None, not an object in index.json")])
def test_an_npy_index_that_cannot_be_a_stores_is_one_line(base, tmp_path, edit, message):
    store, _ = _copy(base, False, tmp_path)
    _edit_json(store.path / "index.json", edit)
    with pytest.raises(StoreError, match=re.escape(f"cannot read the map store {store.path}: {message}")):
        attribution.open_store(store.path)
    (store.path / "index.json").write_text("[1, 2")
    with pytest.raises(StoreError, match=re.escape(f"cannot read the map store {store.path}: index.json is not JSON")):
        attribution.open_store(store.path)


def test_another_map_shape_or_batch_size_leaves_no_batch_done(model, base, tmp_path):
    store, _ = _copy(base, False, tmp_path)
    _edit_json(store.path / "index.json", lambda doc: doc["attrs"].update(map_shape=[3, 12, 11]))
    assert sorted(attribution.open_store(store.path).damaged) == [0, 1, 2]
    _edit_json(store.path / "index.json", lambda doc: doc["attrs"].update(map_shape=[3, 12, 12], batch_size=1))
    again = attribution.open_store(store.path)                        # five batches of 1: none is a record's
    assert not again.done.any() and sorted(again.damaged) == [0, 1, 2]
    with pytest.raises(StoreError, match="has 3 batches marked done that cannot be read: batch 0 "):
        attribution.evaluate_store(model, again, steps=2)


@needs_zarr
@pytest.mark.parametrize("damage, message", [
    (lambda p: (p / "files" / "c" / "0").unlink(), "its file names cannot be read: files/c/0 is missing"),
    (lambda p: os.truncate(p / "files" / "c" / "0", 10), "its file names (files/c/0) cannot be decompressed"),
    (lambda p: shutil.rmtree(p / "done"), "it has no array 'done'"),
    (lambda p: _edit_json(p / "maps" / "zarr.json", lambda d: d.update(shape=[5, 3, 12, 11])),
     "the array maps is float32 (5, 3, 12, 11), not float32 (5, 3, 12, 12)"),
    (lambda p: _edit_json(p / "done" / "zarr.json", lambda d: d.update(shape=[10 ** 12])),
     "the array done is bool (1000000000000,), not bool (5,)"),
    (lambda p: (p / "zarr.json").write_text("{"), "zarr.json is not JSON")])
def test_zarr_arrays_that_cannot_be_a_stores_are_one_line(base, tmp_path, damage, message):
    store, _ = _copy(base, True, tmp_path)
    damage(store.path)
    with pytest.raises(StoreError, match=re.escape(f"cannot read the map store {store.path}: {message}")):
        attribution.open_store(store.path)


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_a_nan_map_in_a_batch_done_without_an_error_is_never_scored(model, base, tmp_path, use_zarr):
    store, _ = _copy(base, use_zarr, tmp_path)
    path = chunk_of(store, 1)
    if use_zarr:
        path.write_bytes(np.full((2, 3, 12, 12), np.nan, "<f4").tobytes())
    else:
        np.save(path, np.full((2, 3, 12, 12), np.nan, np.float32))
    assert store.damaged == {}                                          # whole, by what can be checked cheaply
    with pytest.raises(StoreError, match=re.escape(f"the map store {store.path} is damaged: the map of "
                                                   f"{store.files[2]} (batch 1) holds NaN or infinite values")):
        attribution.evaluate_store(model, store, steps=2, sample=0)


# -- the fuzz -------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.sampled_from([-8, 0, 2 ** 31, 10 ** 12, 2 ** 64])
    | st.floats(allow_nan=True) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=5)
MUTATIONS = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 999)),
    st.tuples(st.just("truncate"), st.integers(0, 999), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.integers(0, 999), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("garbage"), st.integers(0, 999), st.binary(max_size=40)),
    st.tuples(st.just("append"), st.integers(0, 999), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("json"), st.integers(0, 999), st.integers(0, 999), JSON_VALUES),
    st.tuples(st.just("json-delete"), st.integers(0, 999), st.integers(0, 999)))


def _json_paths(value, prefix=()):
    """Every place in a JSON value: (key, ...) tuples, the value itself first."""
    out = [prefix]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        out += _json_paths(inner, prefix + (key,))
    return out


def _mutate(root, mutation):
    """Apply `mutation` to a file of the store at `root`; returns that file's relative path."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    kind, which = mutation[0], mutation[1]
    if kind.startswith("json"):
        files = [p for p in files if p.suffix == ".json"] or files
    path = files[which % len(files)]
    data = path.read_bytes()
    if kind == "delete":
        path.unlink()
    elif kind == "truncate":
        path.write_bytes(data[:int(mutation[2] * len(data))])
    elif kind == "flip" and data:
        i = min(len(data) - 1, int(mutation[2] * len(data)))
        path.write_bytes(data[:i] + bytes([mutation[3]]) + data[i + 1:])
    elif kind == "garbage":
        path.write_bytes(mutation[2])
    elif kind == "append":
        path.write_bytes(data + mutation[2])
    elif kind.startswith("json"):
        try:
            doc = json.loads(data)
        except ValueError:
            return path.relative_to(root).as_posix()
        places = [p for p in _json_paths(doc) if p]
        if places:
            *parent, key = places[mutation[2] % len(places)]
            target = doc
            for step in parent:
                target = target[step]
            if kind == "json-delete":
                del target[key]
            else:
                target[key] = mutation[3]
            path.write_text(json.dumps(doc))
    return path.relative_to(root).as_posix()


def _batch_files(store, k):
    if store.backend == "zarr":
        return {chunk_of(store, k, name).relative_to(store.path).as_posix() for name in ("maps", "predicted",
                                                                                          "error", "done")}
    return {f"maps.{k}.npy", f"batch.{k}.json"}


def _exercise(model, path, original, want, mutated):
    """Read and evaluate the mutated store at `path`: the data, or one StoreError / InputError."""
    try:
        store = attribution.open_store(path)
    except StoreError:
        return
    done, damaged, predicted, errors = store.done, store.damaged, store.predicted, store.errors
    assert len(done) == len(predicted) == len(errors) == len(store.files)
    small = np.prod(store.map_shape) * len(store) <= 10 ** 6
    maps = np.asarray(store.maps) if small else None
    layout = (store.batch_size, store.map_shape, len(store)) == (original.batch_size, original.map_shape,
                                                                  len(original))
    metadata = any(m.endswith(".json") and not m.startswith("batch.") for m in mutated)
    for k in range(store.batches):
        a, z = store.span(k)
        assert done[a:z].all() or not done[a:z].any()
        if k in damaged:
            assert not done[a:z].any()
        if small and not done[a:z].any():
            assert np.isnan(maps[a:z]).all()
        if done[a:z].all() and layout and not metadata and not _batch_files(store, k) & mutated:
            np.testing.assert_array_equal(maps[a:z], want.maps[a:z])
            np.testing.assert_array_equal(predicted[a:z], want.predicted[a:z])
            assert errors[a:z] == list(want.errors[a:z])
    try:
        ev = attribution.evaluate_store(model, store, steps=2, sample=0)
    except (StoreError, InputError):
        return
    assert not damaged
    scored = [i for i, f in enumerate(store.files) if f in set(ev.files)]
    assert all(np.isfinite(store.batch_maps(i // store.batch_size)[i % store.batch_size]).all() for i in scored)
    assert np.isfinite(ev.deletion_auc).all() and len(ev.deletion_auc) == len(ev.files)


def _fuzz(model, base, use_zarr, mutations):
    original, want = base[use_zarr]
    scratch = Path(tempfile.mkdtemp(prefix="store-fuzz-", dir=SCRATCH))
    try:
        shutil.copytree(original.path, scratch / original.path.name)
        root = scratch / original.path.name
        mutated = {_mutate(root, m) for m in mutations}
        _exercise(model, root, original, want, mutated)
    finally:
        shutil.rmtree(scratch)


# a file system in memory where there is one: removing a folder on the disk's costs milliseconds
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
FUZZ = settings(max_examples=120, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FUZZ
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=3))
def test_fuzz_a_folder_store(model, base, mutations):
    _fuzz(model, base, False, mutations)


@needs_zarr
@FUZZ
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=3))
def test_fuzz_a_zarr_store(model, base, mutations):
    _fuzz(model, base, True, mutations)


# the stores whose damage claims the most: batches, maps or names by the billion, a .npy header
# numpy's own parser takes minutes over, a compressed chunk claiming petabytes, a record of 40 MB
WORST = """
import json, os, resource, shutil, sys, time
from pathlib import Path
sys.path.insert(0, TESTS)
from _store_fixtures import tiny_model
from saliency import attribution
from saliency.attribution import InputError, StoreError

def edit(path, fn):
    doc = json.loads(path.read_text()); fn(doc); path.write_text(json.dumps(doc))

def npy(p):
    edit(p / "index.json", lambda d: d["attrs"].update(batch_size=2 ** 24))
    yield
    edit(p / "index.json", lambda d: d["attrs"].update(batch_size=2, map_shape=[2 ** 14, 2 ** 14]))
    yield
    edit(p / "index.json", lambda d: d["attrs"].update(map_shape=[3, 12, 12]))
    data = (p / "maps.0.npy").read_bytes().replace(b"(2, 3, 12, 12), }", b"(10**9, 3, 12, }")
    (p / "maps.0.npy").write_bytes(data)
    yield
    (p / "batch.1.json").write_text(json.dumps({"predicted": [0] * 2 * 10 ** 6}))
    yield
    (p / "index.json").write_text("[" * 10 ** 6)
    yield

def zarr(p):
    for name in ("files", "maps", "predicted", "error", "done"):
        edit(p / name / "zarr.json", lambda d: d.update(shape=[10 ** 9] + d["shape"][1:]))
    edit(p / "files" / "zarr.json", lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[10 ** 9]))
    yield
    shutil.rmtree(p); shutil.copytree(sys.argv[2], p)
    chunk = bytearray((p / "files" / "c" / "0").read_bytes())
    (p / "files" / "c" / "0").write_bytes(chunk[:4] + bytes([0xE0]) + (2 ** 50).to_bytes(8, "little") + chunk[6:])
    yield
    shutil.rmtree(p); shutil.copytree(sys.argv[2], p)
    edit(p / "zarr.json", lambda d: d["attributes"].update(batch_size=2 ** 24))
    yield

model, path = tiny_model(), Path(sys.argv[1])
attribution.evaluate_store(model, attribution.open_store(sys.argv[2]), steps=2, sample=0)  # kernels compiled
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
shutil.copytree(sys.argv[2], path)
started, slowest = None, 0.0
for _ in (zarr if path.suffix == ".zarr" else npy)(path):
    started = time.perf_counter()
    try:
        store = attribution.open_store(path)
        store.done, store.errors, store.predicted, store.damaged
        attribution.evaluate_store(model, store, steps=2, sample=0)
    except (StoreError, InputError) as exc:
        assert "\\n" not in str(exc)
    else:
        raise AssertionError("a damaged store was read")
    slowest = max(slowest, time.perf_counter() - started)
print(slowest, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


@pytest.mark.skipif(os.name != "posix", reason="resource.getrusage of a child")
@pytest.mark.parametrize("use_zarr", FORMATS)
def test_the_worst_damage_costs_little_time_and_memory(base, tmp_path, use_zarr):
    original, _ = base[use_zarr]
    code = f"TESTS = {str(Path(__file__).parent)!r}\n" + textwrap.dedent(WORST)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / original.path.name), str(original.path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    slowest, grown = done.stdout.split()
    assert float(slowest) < 5                   # seconds, for reading and evaluating one damaged store
    assert int(grown) < 100 * 1024              # kB the peak grew by over an evaluation of the intact store
