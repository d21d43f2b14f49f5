"""saliency.attribution.evaluate_store: the curves of every map of a store and the randomisation
check, the same whether a store's batches are evaluated here or elsewhere (`batch_scores`)."""
import numpy as np
import pytest

from saliency import attribution
from saliency.attribution import seeds, store_evaluation


def test_evaluating_a_store_gives_the_curves_of_each_maps_own_check(shapes, images, tmp_path):
    from PIL import Image

    paths = []
    for i, chw in enumerate(images):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(paths[-1])
    (tmp_path / "bad.png").write_text("no")
    store = attribution.batch(shapes, paths[:3] + [tmp_path / "bad.png"] + paths[3:], "gradient", "class:2",
                              out=tmp_path / "out", batch_size=3)
    ev = attribution.evaluate_store(shapes, store.path, steps=4, sample=2)
    assert ev.files == [str(p) for p in paths]                       # the failed image is left out
    x = np.stack([attribution.sources.ImageSource(shapes, [p]).read(0, 1)[0][0] for p in paths])
    maps = np.abs(np.asarray(store.maps)[[0, 1, 2, 4, 5, 6, 7]].astype(np.float64))
    want = attribution.deletion_insertion(shapes, x, maps, seeds.one_hot(2), steps=4)
    np.testing.assert_allclose(ev.deletion, want.deletion, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ev.insertion_auc, want.insertion_auc, rtol=1e-5, atol=1e-5)
    check = attribution.randomisation_check(shapes, x[:2], attribution.gradient, seeds.one_hot(2))
    assert ev.layers == check.layers
    np.testing.assert_allclose(ev.correlations, check.correlations)


def test_evaluate_refuses_stores_it_cannot_check(shapes, images, tmp_path):
    many = attribution.batch(shapes, images, "gradient", "classes:0,1", out=tmp_path / "a", use_zarr=False)
    with pytest.raises(attribution.InputError, match="evaluate takes one map per image"):
        attribution.evaluate_store(shapes, many)
    with pytest.raises(attribution.InputError, match="evaluate takes one map per image"):
        store_evaluation.check(shapes, many)                         # before any curve is computed elsewhere
    made = attribution.batch(shapes, images, "gradient", seeds.one_hot(1), out=tmp_path / "b", use_zarr=False)
    with pytest.raises(attribution.InputError, match="pass the seed they were made with"):
        attribution.evaluate_store(shapes, made)
    with pytest.raises(attribution.InputError, match=r"none of the images .* can be read again \(image0, ...\)"):
        attribution.evaluate_store(shapes, made, seed=seeds.one_hot(1), steps=2)
    ev = attribution.evaluate_store(shapes, made, images=images, seed=seeds.one_hot(1), steps=2, sample=0)
    assert ev.files == [f"image{i}" for i in range(7)] and ev.correlations is None


def test_curves_computed_elsewhere_in_any_order_give_the_same_evaluation(shapes, images, tmp_path):
    store = attribution.batch(shapes, images, "gradient", out=tmp_path, batch_size=2, use_zarr=False)
    here = attribution.evaluate_store(shapes, store, images=images, steps=4, sample=2)
    parts = [c for group in ([3, 1], [2, 0])
             for c in store_evaluation.batch_scores(shapes, store, group, images=images, steps=4)]
    assert [c.batch for c in parts] == [3, 1, 2, 0] and [len(c.rows) for c in parts] == [1, 2, 2, 2]
    elsewhere = attribution.evaluate_store(shapes, store, images=images, steps=4, sample=2, curves=parts)
    assert elsewhere.files == here.files and elsewhere.layers == here.layers
    for field in ("fractions", "deletion", "insertion", "deletion_auc", "insertion_auc", "correlations"):
        np.testing.assert_array_equal(getattr(elsewhere, field), getattr(here, field))  # bit for bit
    with pytest.raises(attribution.InputError, match="^curves holds batch 1 twice; pass each batch's curves once$"):
        attribution.evaluate_store(shapes, store, images=images, steps=4, curves=parts + parts[1:2])
    with pytest.raises(attribution.InputError, match=r"^curves of batch 0 have 5 points of deletion, not 3; "):
        attribution.evaluate_store(shapes, store, images=images, steps=2, curves=parts)
