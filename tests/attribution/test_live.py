"""Live: the forward pass kept, a map per seed from one backward pass through it."""
import threading

import numpy as np
import pytest

from saliency.attribution import Live, gradient, seeds

from _attribution_models import make_cnn, make_dense


def test_each_seed_gives_the_gradient_map_the_method_computes():
    model = make_dense()
    x = np.random.default_rng(0).uniform(0, 1, (3, 20, 20))
    live = Live(model, x)
    for seed in (seeds.pixel(5, 7), seeds.pixel(19, 0, channel=1), seeds.region((2, 3, 9, 12)), seeds.ones(),
                 seeds.pixels([(1, 1), (10, 15), (18, 4)])):
        np.testing.assert_allclose(live.gradient(seed).map, gradient(model, x, seed).map, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(live.output, gradient(model, x).output[None])


def test_a_classifier_gives_each_class_and_all_of_them_batched():
    model = make_cnn()
    x = np.random.default_rng(1).uniform(0, 1, (1, 3, 12, 12))
    live = Live(model, x)
    both = live.gradient(seeds.classes([0, 3]))
    assert both.map.shape == (2, 1, 3, 12, 12)
    for i, k in enumerate([0, 3]):
        np.testing.assert_allclose(both.map[i], gradient(model, x, seeds.one_hot(k)).map, rtol=1e-12)
    np.testing.assert_allclose(live.gradient().map, gradient(model, x).map, rtol=1e-12)


def test_a_superseded_request_is_skipped_and_threads_share_the_graph():
    model = make_dense()
    x = np.random.default_rng(2).uniform(0, 1, (3, 16, 16))
    live = Live(model, x)
    old = live.ticket("tab 1")
    new = live.ticket("tab 1")
    other = live.ticket("tab 2")
    assert live.gradient(seeds.pixel(3, 3), stream="tab 1", number=old) is None
    assert live.gradient(seeds.pixel(3, 3), stream="tab 1", number=new) is not None
    assert live.latest("tab 2", other) and not live.latest("tab 1", old)
    want = {p: gradient(model, x, seeds.pixel(*p)).map for p in [(r, c) for r in range(0, 16, 5) for c in (2, 9)]}
    got = {}

    def ask(p):
        got[p] = live.gradient(seeds.pixel(*p)).map

    workers = [threading.Thread(target=ask, args=(p,)) for p in want]
    for t in workers:
        t.start()
    for t in workers:
        t.join(60)
    for p, m in want.items():
        np.testing.assert_allclose(got[p], m, rtol=1e-12, atol=1e-15)


def test_one_image_only():
    with pytest.raises(ValueError, match="one image; x holds 2"):
        Live(make_dense(), np.zeros((2, 3, 8, 8)))


def test_the_work_of_a_seed_is_the_graph_and_each_step():
    model = make_dense()
    live = Live(model, np.random.default_rng(3).uniform(0, 1, (3, 8, 8)))
    graph, steps = live.work(seeds.pixel(2, 3))
    assert "ConvolutionBackward0(y)" in graph.splitlines()[0] and "AccumulateGrad(x)" in graph
    assert steps.splitlines()[0].split()[:2] == ["step", "node"] and "ReluBackward0" in steps
    with pytest.raises(ValueError, match="graph has 4 nodes; the backward pass is shown for models of at most 3"):
        live.work(seeds.pixel(2, 3), limit=3)
