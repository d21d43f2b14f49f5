"""Two threads computing different methods at once on one zoo model get the maps each would get alone.

Guided backprop switches ReLU's VJP for its own backward pass (`relu_rule("guided")`); the switch
is context-local, so a plain gradient computed meanwhile in another thread keeps the true VJP.

The maps are compared to 1e-6 of their largest value, not exactly: the kernels set OpenBLAS's
thread count around their matrix products, and in NumPy's OpenBLAS that count is process-wide,
so a product of one thread now and then runs on the number of threads another thread has just
set. One thread or two sum in different orders: the classifier's maps move by up to 2e-7 of
their largest value (rarely: about one map in 30,000 here). A ReLU rule leaking between the
threads moves them by the order of the map itself.
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
    wrong = {name: [] for name in methods}  # (image, max |difference| / max |map|, equal to the other method's)
    errors = []

    def run(name):
        method = methods[name]
        try:
            for _ in range(ROUNDS):
                barrier.wait()
                for i, (x, want) in enumerate(zip(images, expected[name])):
                    got = method(model, x).map
                    scale = np.abs(want).max()
                    if not np.allclose(got, want, rtol=0, atol=1e-6 * scale):
                        other = expected["gradient" if name == "guided" else "guided"][i]
                        wrong[name].append((i, float(np.abs(got - want).max() / scale), np.array_equal(got, other)))
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
    assert wrong == {name: [] for name in methods}, f"maps that differ from the sequential ones (of {ROUNDS * 4})"


def test_a_map_computed_while_another_thread_trains_the_model_leaves_its_gradients_alone(shapes):
    model, images = shapes
    expected = A.gradient(model, images[0]).map

    def train_step():
        for p in model.parameters():
            p.grad = None
        model(images[1:2]).sum().backward()      # the model's weights require grad here
        return [p.grad.numpy().copy() if p.grad is not None else None for p in model.parameters()]

    alone = train_step()
    # the map's forward pass waits, inside the method, until the other thread has trained one step
    main = threading.current_thread()
    result = {}

    def hold(module, inputs, output):
        if threading.current_thread() is main:
            worker = threading.Thread(target=lambda: result.setdefault("grads", train_step()))
            worker.start()
            worker.join(60)

    handle = model.register_forward_hook(hold)
    try:
        got = A.gradient(model, images[0]).map
    finally:
        handle.remove()
    during = result["grads"]
    assert all(g is not None for g in during), "the other thread's weights did not require grad"
    for g, want in zip(during, alone):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-9)
    for g, want in zip((p.grad.numpy() for p in model.parameters()), alone):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-9)   # the map added nothing to them
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    for p in model.parameters():
        p.grad = None


def test_gradcam_keeps_the_layer_output_of_its_own_forward_pass(shapes):
    model, images = shapes
    layer = [m for m in model.modules() if type(m).__name__ == "Conv2d"][-1]
    expected = A.gradcam(model, images[0], layer=layer).map
    main = threading.current_thread()

    def other_pass(module, inputs, output):     # another thread runs the model while gradcam's hook is on
        if threading.current_thread() is main:
            worker = threading.Thread(target=lambda: model(images[1:2]))
            worker.start()
            worker.join(60)

    handle = model.register_forward_hook(other_pass)
    try:
        got = A.gradcam(model, images[0], layer=layer).map
    finally:
        handle.remove()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)
