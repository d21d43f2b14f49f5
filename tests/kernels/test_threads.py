"""The two-thread batch split: both halves run, errors come back, concurrent callers stay apart, and
split results equal unsplit ones."""
import threading

import numpy as np
import pytest

from saliency import kernels
from saliency.kernels import threads


def test_both_halves_run_and_small_calls_stay_on_the_caller():
    seen = []
    threads.split_batch(10, threads.SPLIT_ELEMENTS, lambda a, b: seen.append((a, b, threading.get_ident())))
    assert sorted(s[:2] for s in seen) == [(0, 5), (5, 10)]
    assert len({s[2] for s in seen}) == 2
    seen.clear()
    threads.split_batch(10, threads.SPLIT_ELEMENTS - 1, lambda a, b: seen.append((a, b)))
    threads.split_batch(1, 1 << 30, lambda a, b: seen.append((a, b)))
    assert seen == [(0, 10), (0, 1)]


@pytest.mark.parametrize("failing", [0, 5])
def test_an_error_in_either_half_is_raised_after_both_finished(failing):
    done = []

    def body(a, b):
        if a == failing:
            raise ValueError(f"half {a}")
        done.append(a)

    with pytest.raises(ValueError, match=f"half {failing}"):
        threads.split_batch(10, threads.SPLIT_ELEMENTS, body)
    assert done == [5 - failing]


def test_split_equals_unsplit_and_concurrent_callers_get_their_own_results(monkeypatch):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((8, c, 24, 24)).astype(np.float32) for c in (3, 16)]
    ws = [rng.standard_normal((16, c, 3, 3)).astype(np.float32) for c in (3, 16)]

    def maps():
        out = []
        for x, w in zip(xs, ws):
            y = kernels.conv2d_forward(x, w, None, 1, 1)
            out += [y, kernels.conv2d_grad_input(y, w, x.shape, 1, 1), kernels.max_pool2d_forward(y, 2)[0]]
        return out

    monkeypatch.setattr(threads, "SPLIT_ELEMENTS", 1)
    split = maps()
    results = [None] * 4

    def worker(i):
        results[i] = maps()

    callers = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    monkeypatch.setattr(threads, "SPLIT_ELEMENTS", 1 << 62)
    whole = maps()
    for got in [split] + results:
        for a, b in zip(got, whole):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
