"""Two threads computing different methods at once on one zoo model get the maps each would get alone.

Guided backprop switches ReLU's VJP for its own backward pass (`relu_rule("guided")`); the switch
is context-local, so a plain gradient computed meanwhile in another thread keeps the true VJP.
The maps are compared exactly: both threads run the same kernels on the same single image (no
call is large enough to split across the kernels' helper thread), so every sum is taken in the
same order as in the sequential run.
"""
import sys
import threading

import numpy as np
import pytest
import saliency.models as zoo
from saliency.models import data

from saliency import attribution as A

ROUNDS = 150  # each round: both threads released by a barrier, each computes one map per image


@pytest.fixture(scope="module")
def shapes():
    return zoo.load("shapes"), data.shapes(4, seed=0)[0]


def test_guided_backprop_and_gradient_at_once_equal_their_sequential_maps(shapes):
    model, images = shapes
    methods = {"guided": A.guided_backprop, "gradient": A.gradient}
    expected = {name: [method(model, x).map for x in images] for name, method in methods.items()}
    # the two methods differ on every image, so a rule that leaks from one thread into the other shows
    assert all(not np.array_equal(a, b) for a, b in zip(expected["guided"], expected["gradient"]))
    barrier = threading.Barrier(len(methods), timeout=60)
    wrong = {name: 0 for name in methods}
    errors = []

    def run(name):
        method = methods[name]
        try:
            for _ in range(ROUNDS):
                barrier.wait()
                for x, want in zip(images, expected[name]):
                    if not np.array_equal(method(model, x).map, want):
                        wrong[name] += 1
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)
            barrier.abort()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # hand the interpreter over often, so that the passes interleave
    try:
        workers = [threading.Thread(target=run, args=(name,)) for name in methods]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    assert wrong == {name: 0 for name in methods}, f"maps that differ from the sequential ones (of {ROUNDS * 4})"
