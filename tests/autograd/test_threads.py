"""Grad mode, backward rules and traces belong to the thread that set them (context-local switches).

Each cross-thread test holds a switch open in one thread while the other works, with events fixing
the order, so that the result does not depend on how the threads happen to be scheduled.
"""
import asyncio
import threading

import numpy as np
import pytest

import saliency as sl
from saliency.autograd import relu_rule

TIMEOUT = 30


def in_thread(fn):
    """Run fn() in a new thread and return its result (or raise its exception)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001  (raised again in the caller)
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive(), "the thread did not finish"
    if "error" in out:
        raise out["error"]
    return out["value"]


class HeldOpen:
    """Runs `enter()` in a second thread, which then waits until `release()`; `after()` runs there last."""

    def __init__(self, body):
        self.inside, self.leave = threading.Event(), threading.Event()
        self.result, self.error = None, None

        def run():
            try:
                self.result = body(self)
            except BaseException as e:  # noqa: BLE001
                self.error = e
            finally:
                self.inside.set()

        self.thread = threading.Thread(target=run)

    def hold(self):
        """Called by the body inside its block: signal, then wait for the main thread's work."""
        self.inside.set()
        assert self.leave.wait(TIMEOUT)

    def __enter__(self):
        self.thread.start()
        assert self.inside.wait(TIMEOUT)
        return self

    def __exit__(self, *exc):
        self.leave.set()
        self.thread.join(TIMEOUT)
        if self.error is not None and exc[0] is None:
            raise self.error
        return False


def leaf(values):
    return sl.tensor(np.array(values, dtype=np.float64), requires_grad=True)


def test_no_grad_in_one_thread_does_not_stop_recording_in_another():
    x = leaf([1.0, -2.0])

    def other(h):
        with sl.no_grad():
            h.hold()
            return sl.is_grad_enabled(), (x * 2).requires_grad

    with HeldOpen(other) as held:
        assert sl.is_grad_enabled()
        y = x * 3
        assert y.requires_grad and y.grad_fn.name() == "MulBackward0"
    assert held.result == (False, False)


def test_enable_grad_in_one_thread_does_not_record_in_another_under_no_grad():
    x = leaf([1.0])

    def other(h):
        with sl.enable_grad():
            h.hold()
            return (x * 2).requires_grad

    with sl.no_grad():
        with HeldOpen(other) as held:
            assert not (x * 3).requires_grad
    assert held.result is True


def test_set_grad_enabled_as_a_plain_call_switches_its_own_thread_only():
    x = leaf([1.0])

    def other(h):
        sl.set_grad_enabled(False)  # never switched back in this thread
        h.hold()
        return sl.is_grad_enabled(), (x * 2).requires_grad

    with HeldOpen(other) as held:
        assert sl.is_grad_enabled() and (x * 3).requires_grad
    assert held.result == (False, False)
    assert sl.is_grad_enabled() and (x * 3).requires_grad
    # a new thread starts with grad mode on, whatever its parent's mode
    try:
        sl.set_grad_enabled(False)
        assert in_thread(lambda: (sl.is_grad_enabled(), (x * 2).requires_grad)) == (True, True)
        assert not (x * 2).requires_grad
    finally:
        sl.set_grad_enabled(True)


def test_set_grad_enabled_as_block_and_decorator_keep_their_meaning():
    x = leaf([1.0])
    mode = sl.set_grad_enabled(False)
    assert not sl.is_grad_enabled()  # the call switches at once
    with mode:
        assert not (x * 2).requires_grad
    assert sl.is_grad_enabled()
    with mode:  # entered again
        assert not sl.is_grad_enabled()
    assert sl.is_grad_enabled()

    @sl.set_grad_enabled(False)
    def f():
        return (x * 2).requires_grad

    assert sl.is_grad_enabled() and f() is False and sl.is_grad_enabled()


def test_the_same_mode_object_nests_and_restores_after_errors():
    ng, eg = sl.no_grad(), sl.enable_grad()
    with ng:
        with eg:
            with ng:
                assert not sl.is_grad_enabled()
            assert sl.is_grad_enabled()
        assert not sl.is_grad_enabled()
    assert sl.is_grad_enabled()
    with pytest.raises(KeyError):
        with ng:
            with eg:
                raise KeyError("inside")
    assert sl.is_grad_enabled()


def test_a_decorated_function_runs_in_its_mode_in_every_thread():
    x = leaf([1.0])

    @sl.no_grad
    def f(h=None):
        if h is not None:
            h.hold()
        return sl.is_grad_enabled(), (x * 2).requires_grad

    with HeldOpen(f) as held:
        assert sl.is_grad_enabled()
        assert f() == (False, False)
        assert sl.is_grad_enabled()
    assert held.result == (False, False)


def relu_gradient():
    """The VJP of relu at [1, 2, -1] for the seed [1, -1, 1]: -1 reaches the active 2nd unit."""
    x = leaf([1.0, 2.0, -1.0])
    sl.relu(x).backward(sl.tensor(np.array([1.0, -1.0, 1.0])))
    return x.grad.numpy()


TRUE = [1.0, -1.0, 0.0]
GUIDED = [1.0, 0.0, 0.0]


def test_relu_rule_in_one_thread_leaves_another_threads_vjp_alone():
    def guided(h):
        with relu_rule("guided"):
            h.hold()
            return relu_gradient()

    with HeldOpen(guided) as held:
        np.testing.assert_array_equal(relu_gradient(), TRUE)
    np.testing.assert_array_equal(held.result, GUIDED)

    def plain(h):
        h.hold()
        return relu_gradient()

    with relu_rule("guided"):
        with HeldOpen(plain) as held:
            np.testing.assert_array_equal(relu_gradient(), GUIDED)
    np.testing.assert_array_equal(held.result, TRUE)


def test_relu_rule_nests_reenters_and_restores_after_errors():
    def rule():
        return "guided" if sl.autograd.rules.guided() else "gradient"

    guided = relu_rule("guided")
    with guided:
        with relu_rule("gradient"):
            np.testing.assert_array_equal(relu_gradient(), TRUE)
            with guided:
                np.testing.assert_array_equal(relu_gradient(), GUIDED)
            assert rule() == "gradient"
        np.testing.assert_array_equal(relu_gradient(), GUIDED)
    assert rule() == "gradient"
    with pytest.raises(RuntimeError, match="inside"):
        with guided:
            with guided:
                raise RuntimeError("inside")
    np.testing.assert_array_equal(relu_gradient(), TRUE)
    with pytest.raises(ValueError, match="relu_rule must be one of"):
        relu_rule("deconvnet")


def test_relu_rule_applies_to_windowed_vjps_per_thread():
    """A pixel seed travels as windows (Relu.backward_window): that path reads the thread's rule too."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((1, 1, 16, 16))
    w = sl.tensor(rng.standard_normal((1, 1, 3, 3)))

    def vjp():
        x = sl.tensor(x0, requires_grad=True)
        y = sl.conv2d(sl.relu(sl.conv2d(x, w, padding=1)), w, padding=1)
        seed = np.zeros(y.shape)
        seed[0, 0, 8, 8] = 1.0
        return sl.autograd.grad(y, x, sl.tensor(seed))[0].numpy()

    plain = vjp()
    with relu_rule("guided"):
        guided = vjp()
    assert not np.array_equal(plain, guided)

    def other(h):
        with relu_rule("guided"):
            h.hold()
            return vjp()

    with HeldOpen(other) as held:
        np.testing.assert_array_equal(vjp(), plain)
    np.testing.assert_array_equal(held.result, guided)


def test_a_trace_in_one_thread_does_not_capture_another_threads_backward():
    def traced(h):
        a = leaf([2.0])
        with sl.autograd.trace() as t:
            h.hold()
            (a * 3).sum().backward()
        return [s.name for s in t]

    b = leaf([1.0, 2.0])
    with HeldOpen(traced) as held:
        b.exp().sum().backward()
        np.testing.assert_allclose(b.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-12)
    assert held.result == ["SumBackward0", "MulBackward0", "AccumulateGrad"]


def test_a_trace_outside_does_not_reach_a_new_thread():
    with sl.autograd.trace() as t:
        in_thread(lambda: (leaf([1.0]) * 2).sum().backward())
        (leaf([1.0]).exp()).sum().backward()
    assert [s.name for s in t] == ["SumBackward0", "ExpBackward0", "AccumulateGrad"]


def test_asyncio_tasks_each_keep_their_own_grad_mode():
    x = leaf([1.0])

    async def task(mode, started, other_started):
        with sl.set_grad_enabled(mode):
            started.set()
            await other_started.wait()  # both tasks are now inside their blocks
            return sl.is_grad_enabled(), (x * 2).requires_grad

    async def main():
        a, b = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(task(False, a, b), task(True, b, a))

    assert asyncio.run(main()) == [(False, False), (True, True)]
    assert sl.is_grad_enabled()


def test_leaving_a_block_in_another_thread_restores_the_mode_there():
    """A generator that holds a no_grad block open and is finished in another thread (its token
    belongs to the first thread's context) puts back the mode it replaced, as PyTorch would."""

    def gen():
        with sl.no_grad():
            yield sl.is_grad_enabled()

    g = gen()
    try:
        assert next(g) is False
        assert not sl.is_grad_enabled()  # a generator's block switches its caller's mode, as in PyTorch
        assert in_thread(lambda: (list(g), sl.is_grad_enabled())) == ([], True)
    finally:
        sl.set_grad_enabled(True)


def test_backward_passes_of_two_threads_into_one_leaf_lose_no_gradient():
    """Hogwild-style: both threads add into the same .grad at once; every addition arrives."""
    n, rounds = 1 << 20, 100
    w = sl.tensor(np.zeros(n), requires_grad=True)
    x = sl.tensor(np.ones(n))
    (w * x).sum().backward()  # w.grad exists from here on: the threads add into it in place
    barrier = threading.Barrier(2, timeout=TIMEOUT)

    def run():
        for _ in range(rounds):
            barrier.wait()
            (w * x).sum().backward()

    workers = [threading.Thread(target=run) for _ in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(TIMEOUT)
    np.testing.assert_array_equal(w.grad.numpy(), np.full(n, 1.0 + 2 * rounds))


class Turns:
    """Steps of two threads in a fixed order: `take(k)` waits for turn k, `done()` passes the turn on."""

    def __init__(self):
        self.turn = 0
        self.cond = threading.Condition()

    def take(self, k):
        with self.cond:
            assert self.cond.wait_for(lambda: self.turn == k, TIMEOUT), f"turn {k} never came"

    def done(self):
        with self.cond:
            self.turn += 1
            self.cond.notify_all()


def test_one_mode_object_entered_in_two_threads_restores_each_threads_own_mode():
    """A module-level `enable_grad()` / `relu_rule("guided")` object, entered in thread A, then in
    thread B, left in A, then in B: each exit puts back what its own thread had before."""
    shared_mode, shared_rule = sl.enable_grad(), relu_rule("guided")
    turns = Turns()
    seen = {}

    def a():  # grad mode on and rule "gradient" before
        turns.take(0)
        with shared_mode, shared_rule:
            turns.done()
            turns.take(2)
        seen["a"] = (sl.is_grad_enabled(), "guided" if sl.autograd.rules.guided() else "gradient")
        turns.done()

    def b():  # grad mode off and rule "guided" before
        sl.set_grad_enabled(False)
        with relu_rule("guided"):
            turns.take(1)
            with shared_mode, shared_rule:
                turns.done()
                turns.take(3)
            seen["b"] = (sl.is_grad_enabled(), "guided" if sl.autograd.rules.guided() else "gradient")

    workers = [threading.Thread(target=f) for f in (a, b)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(TIMEOUT)
    assert seen == {"a": (True, "gradient"), "b": (False, "guided")}
    assert shared_mode._tokens == [] and shared_rule._tokens == []


def test_a_leaf_frozen_in_one_thread_still_requires_grad_in_another():
    w = leaf([1.0, 2.0])

    def frozen_here(held):
        with sl.autograd.grad_mode.frozen([w]):
            y = (w * 3.0).sum()
            seen = (w.requires_grad, y.requires_grad)
            held.hold()
        return seen, w.requires_grad

    with HeldOpen(frozen_here) as held:
        assert w.requires_grad
        (w * 2.0).sum().backward()           # the other thread's freeze does not stop this one
    assert held.result == ((False, False), True)
    np.testing.assert_array_equal(w.grad, [2.0, 2.0])


def test_a_frozen_leaf_gets_no_edge_and_no_grad():
    w, x = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    with sl.autograd.grad_mode.frozen([w]):
        y = (w * x).sum()
        assert [fn is None for fn, _ in y.grad_fn.next_functions[0][0].next_functions] == [True, False]
        y.backward()
    assert w.grad is None
    np.testing.assert_array_equal(x.grad, [1.0, 2.0])
    assert w.requires_grad                      # and it requires grad again after the block
