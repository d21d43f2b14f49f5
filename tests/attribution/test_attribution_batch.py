"""saliency.attribution.batch and its store: the maps a user would compute batch by batch, every
method and seed, both store formats, and a run stopped and continued giving the same bits."""
import json
import re

import numpy as np
import pytest

from saliency import attribution, models
from saliency.attribution import seeds
from saliency.attribution import store as stores

needs_zarr = pytest.mark.skipif(not stores.zarr_available(), reason="zarr is not installed")
FORMATS = [pytest.param(True, marks=needs_zarr, id="zarr"), pytest.param(False, id="npy")]


@pytest.fixture(scope="module")
def depth():
    return models.load("depth")


def _close(got, want):
    """Equal within float32 rounding: a product cut in parts over the kernels' threads can differ in
    its last bits from one that was not (the rest of this file checks bit-for-bit what runs one
    code path: resume, the store, the PNGs)."""
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.nanmax(np.abs(want)))


def _per_batch(fn, model, x, batch_size, seed=None, **options):
    """What a user gets calling the method on each batch themselves."""
    spans = [(a, min(len(x), a + batch_size)) for a in range(0, len(x), batch_size)]
    return np.concatenate([np.asarray(fn(model, x[a:b], seed, **options).map, np.float32) for a, b in spans],
                          axis=-4)


@pytest.mark.parametrize("method, options", [("gradient", {}), ("input_x_gradient", {}), ("guided_backprop", {}),
                                             ("integrated_gradients", {"steps": 4}),
                                             ("smoothgrad", {"n": 3}), ("gradcam", {}),
                                             ("occlusion", {"window": 16, "stride": 16})])
def test_every_method_gives_the_maps_of_calling_it_batch_by_batch(shapes, images, method, options):
    if method == "gradcam":
        options = {"layer": shapes.features.block3.conv}
    got = attribution.batch(shapes, images, method, batch_size=3, **options)
    want = _per_batch(attribution.METHODS[method], shapes, images, 3, **options)
    _close(got.maps, want)
    assert got.errors == [""] * len(images)
    np.testing.assert_array_equal(got.predicted, np.asarray(shapes(images).numpy()).argmax(axis=1))


@pytest.mark.parametrize("seed", ["class:2", "classes:1,6", seeds.classes([0, 3, 5])])
def test_class_seeds_single_and_batched(shapes, images, seed):
    got = attribution.batch(shapes, images, "gradient", seed, batch_size=4)
    s = seeds.parse(seed) if isinstance(seed, str) else seed
    want = _per_batch(attribution.gradient, shapes, images, 4, s)
    if s.count is not None:
        want = np.moveaxis(want, 0, 1)  # (K, N, ...) of the method -> (N, K, ...) in the store
        assert got.maps.shape == (len(images), s.count, 3, 64, 64)
    _close(got.maps, want)


@pytest.mark.parametrize("seed", [None, "pixel:30,40", "pixels:10,10;60,100", "region:20,20,60,60"])
def test_dense_seeds_on_the_depth_model(depth, seed):
    x = models.data.scenes(3, seed=2)[0]
    got = attribution.batch(depth, x, "gradient", seed, batch_size=2)
    s = seeds.parse(seed) if seed else None
    want = _per_batch(attribution.gradient, depth, x, 2, s)
    if s is not None and s.count is not None:
        want = np.moveaxis(want, 0, 1)
    _close(got.maps, want)
    assert (got.predicted == -1).all()


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_the_store_reads_back_what_the_run_computed(shapes, images, tmp_path, use_zarr):
    store = attribution.batch(shapes, images, "gradient", out=tmp_path, batch_size=3, use_zarr=use_zarr,
                              record={"model": "shapes"})
    assert store.path.name == ("maps.zarr" if use_zarr else "maps")
    again = attribution.open_store(store.path)
    want = attribution.batch(shapes, images, "gradient", batch_size=3)
    np.testing.assert_array_equal(np.asarray(again.maps), want.maps)
    for index in (4, slice(2, 5), [6, 0, 3], (slice(None), 1), (5, 0, slice(3, 9))):
        np.testing.assert_array_equal(np.asarray(again.maps[index]), want.maps[index])
    np.testing.assert_array_equal(again.predicted, want.predicted)
    assert again.done.all() and again.errors == [""] * 7 and again.files == [f"image{i}" for i in range(7)]
    assert again.attrs["method"] == "gradient" and again.attrs["record"] == {"model": "shapes"}
    assert again.map_shape == (3, 64, 64) and again.batch_size == 3 and len(again) == 7


class _Stop(Exception):
    pass


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_a_stopped_run_continued_stores_the_bits_of_one_whole_run(shapes, images, tmp_path, use_zarr):
    calls = []

    def stop_after_two(done, total):
        calls.append(done)
        if len(calls) == 2:
            raise _Stop

    with pytest.raises(_Stop):
        attribution.batch(shapes, images, "smoothgrad", out=tmp_path / "a", batch_size=2, use_zarr=use_zarr,
                          progress=stop_after_two, n=3)
    partial = attribution.open_store(stores.store_path(tmp_path / "a", use_zarr))
    assert partial.done.tolist() == [True] * 4 + [False] * 3      # the two batches computed are kept whole
    seen = []
    attribution.batch(shapes, images, "smoothgrad", out=tmp_path / "a", batch_size=2, use_zarr=use_zarr,
                      resume=True, progress=lambda done, total: seen.append(done), n=3)
    assert seen == [6, 7]                                          # only the batches not done
    whole = attribution.batch(shapes, images, "smoothgrad", out=tmp_path / "b", batch_size=2, use_zarr=use_zarr,
                              n=3)
    resumed = attribution.open_store(stores.store_path(tmp_path / "a", use_zarr))
    np.testing.assert_array_equal(np.asarray(resumed.maps), np.asarray(whole.maps))
    np.testing.assert_array_equal(resumed.predicted, whole.predicted)


def test_resume_refuses_other_images_or_options(shapes, images, tmp_path):
    attribution.batch(shapes, images, "gradient", out=tmp_path, batch_size=3, use_zarr=False)
    for kwargs, what in (({"batch_size": 2}, "batch_size (3 then, 2 now)"),
                         ({"seed": "class:1"}, "seed ('default' then, 'class 1 (square)' now)"),
                         ({"images": images[:5]}, "images (7 then, 5 now)")):
        args = {"images": images, "batch_size": 3, **kwargs}
        with pytest.raises(attribution.StoreError, match=re.escape(f"made with other {what}")):
            attribution.batch(shapes, args.pop("images"), "gradient", out=tmp_path, use_zarr=False, resume=True,
                              **args)


def test_unreadable_images_and_bad_arguments(shapes, images, tmp_path):
    from PIL import Image

    paths = []
    for i, chw in enumerate(images[:3]):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(paths[-1])
    (tmp_path / "bad.png").write_text("no")
    got = attribution.batch(shapes, paths[:2] + [tmp_path / "bad.png"] + paths[2:], batch_size=2)
    assert [bool(e) for e in got.errors] == [False, False, True, False]
    assert np.isnan(got.maps[2]).all() and np.isfinite(got.maps[[0, 1, 3]]).all()
    with pytest.raises(attribution.InputError, match="unknown method 'lime'"):
        attribution.batch(shapes, images, "lime")
    with pytest.raises(attribution.InputError, match="batch_size must be a positive int, got 0"):
        attribution.batch(shapes, images, batch_size=0)
    with pytest.raises(attribution.InputError, match=r"array \(N, C, H, W\), got shape \(3, 64, 64\)"):
        attribution.batch(shapes, images[0])
    with pytest.raises(attribution.InputError, match="the model has no layer 'block9'"):  # the run cannot work
        attribution.batch(shapes, images, "gradcam", layer="block9")
    with pytest.raises(attribution.SeedError, match="class 12 is out of range"):
        attribution.batch(shapes, images, "gradient", "class:12")


def test_a_store_that_is_not_one_is_one_sentence(tmp_path):
    with pytest.raises(attribution.StoreError, match="holds no map store"):
        attribution.open_store(tmp_path)
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "index.json").write_text(json.dumps({"files": []}))
    with pytest.raises(attribution.StoreError, match="cannot read the map store"):
        attribution.open_store(tmp_path / "maps")


@needs_zarr
@pytest.mark.parametrize("map_shape", [(3, 5, 4), (2, 1, 5, 4)])
def test_zarr_chunks_written_by_the_store_are_zarrs_own_encoding(tmp_path, map_shape):
    import zarr

    files = [f"f{i}.png" for i in range(11)]  # batches of 4: the last one partial
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((n,) + map_shape).astype(np.float32), rng.integers(-1, 8, n),
                ["", "cannot read image 'é.png'", "x" * 300, ""][:n]) for n in (4, 4, 3)]
    ours = stores.create_store(tmp_path / "ours" / "maps.zarr", files, map_shape, 4, {})
    by_zarr = stores.create_store(tmp_path / "zarr" / "maps.zarr", files, map_shape, 4, {})
    by_zarr._plain = False  # zarr encodes the chunks
    assert ours._plain
    for k, batch in enumerate(batches):
        ours.write_batch(k, *batch)
        by_zarr.write_batch(k, *batch)

    def chunk_files(root):
        return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file() and "c" in p.parts}

    assert chunk_files(ours.path) == chunk_files(by_zarr.path)   # the same files, byte for byte
    group = zarr.open_group(str(ours.path), mode="r")
    np.testing.assert_array_equal(group["maps"][:], np.concatenate([b[0] for b in batches]))
    np.testing.assert_array_equal(group["predicted"][:], np.concatenate([b[1] for b in batches]))
    assert group["error"][:].tolist() == sum((b[2] for b in batches), [])
    assert group["done"][:].all()


@needs_zarr
def test_a_zarr_store_of_other_encodings_is_written_through_zarr(tmp_path):
    import zarr

    path = tmp_path / "maps.zarr"
    stores.create_store(path, ["a.png", "b.png", "c.png"], (1, 2, 2), 2, {})
    group = zarr.open_group(str(path), mode="r+")  # predictions compressed, as a store made elsewhere may be
    group.create_array("predicted", shape=(3,), chunks=(2,), dtype="int64", fill_value=-1, overwrite=True)
    store = stores.open_store(path)
    assert not store._plain
    store.write_batch(1, np.ones((1, 1, 2, 2), np.float32), [5], ["x"])
    again = stores.open_store(path)
    assert again.predicted.tolist() == [-1, -1, 5] and again.errors == ["", "", "x"]
    assert again.done.tolist() == [False, False, True]


@pytest.mark.parametrize("state", ["hook", "training"])
def test_a_model_with_a_hook_or_in_training_mode_runs_each_batch_in_one_call(images, state):
    # a hook may keep what it sees, and in training mode batch norm updates its statistics: no two
    # calls of such a model at once, so each batch is one call
    model = models.load("shapes")
    block, seen = model.features.block1, []
    forward = block.forward
    block.forward = lambda x: seen.append(x.shape[0]) or forward(x)
    if state == "hook":
        block.register_forward_hook(lambda *args: None)
    else:
        model.features.block4.bn.train()
    got = attribution.batch(model, images, "gradient", batch_size=4)
    assert seen == [4, 3]
    want = np.concatenate([np.asarray(attribution.gradient(model, images[a:a + 4]).map) for a in (0, 4)])
    np.testing.assert_array_equal(got.maps, want)
