"""Options bounded by what the images and the memory allow: a batch size larger than the images,
batches that would not fit in memory, deletion curves of more steps than memory holds."""
import numpy as np
import pytest

from saliency import attribution
from saliency.attribution import evaluation, pipeline


def test_a_batch_size_larger_than_the_images_is_the_number_of_images(shapes, images, tmp_path):
    store = attribution.batch(shapes, images[:3], "gradient", out=tmp_path, batch_size=999_999_999, use_zarr=False)
    assert store.batch_size == 3 and store.done.all()
    np.testing.assert_array_equal(np.asarray(store.maps), attribution.batch(shapes, images[:3], batch_size=3).maps)


def test_batches_that_would_not_fit_in_memory_are_refused_before_any_work(shapes, images, monkeypatch):
    monkeypatch.setattr(pipeline, "available_bytes", lambda: 2 ** 20)
    with pytest.raises(attribution.InputError, match=r"batch_size 7 needs 3\.9 MiB for the images and maps of the 6 "
                                                     r"batches held at once, and 1\.0 MiB are available; use a batch "
                                                     r"size of at most 1"):
        attribution.batch(shapes, images, batch_size=7)


def test_deletion_curves_of_more_steps_than_memory_holds_are_refused(shapes, images):
    x = images[:1]
    with pytest.raises(ValueError, match=r"steps 99999999999 needs \d+\.\d GiB for its curves, more than the"):
        evaluation.deletion_insertion(shapes, x, np.ones(x.shape), steps=99_999_999_999)


def test_evaluation_of_many_steps_reports_progress_within_a_batch(shapes, images):
    store = attribution.batch(shapes, images[:4], "gradient", batch_size=4, out=None)
    calls = []
    x = images[:4]
    evaluation.deletion_insertion(shapes, x, store.maps, steps=64, batch=8,
                                  progress=lambda done, total: calls.append((done, total)))
    assert len(calls) > 2 and calls[-1] == (130, 130) and all(0 < d < t for d, t in calls[:-1])
