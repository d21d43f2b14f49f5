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


@pytest.mark.parametrize("n", [1, 3])
def test_single_images_split_by_rows_channels_and_phases_equal_unsplit(n, monkeypatch):
    """One image splits by output rows (row-major convolution, the fused upsample's input VJP), by
    channels (GEMM + col2im input VJP, RGB first layers) or by phase rows (the fused upsample); a
    batch by images. Every split gives the unsplit result, with odd counts in each halving."""
    rng = np.random.default_rng(1)
    x3 = rng.standard_normal((n, 3, 13, 11))
    x16 = rng.standard_normal((n, 16, 13, 11))
    w_rgb = rng.standard_normal((5, 3, 3, 3))
    w16 = rng.standard_normal((8, 16, 3, 3))
    gemm = kernels.ConvAlgorithm.GEMM

    def results():
        out = [kernels.conv2d_forward(x3, w_rgb, None, 1, 1), kernels.conv2d_forward(x16, w16, None, 2, 1)]
        for s in (1, 2):
            y = kernels.conv2d_forward(x16, w16, None, s, 1)
            out += [kernels.conv2d_grad_input(y, w16, x16.shape, s, 1),
                    kernels.conv2d_grad_input(y, w16, x16.shape, s, 1, algorithm=gemm)]
        for scale in (2, 3):
            y = kernels.upsample_conv2d_forward(x16, w16, None, scale)
            out += [y, kernels.upsample_conv2d_grad_input(y, w16, x16.shape, scale)]
        return out

    monkeypatch.setattr(threads, "SPLIT_ELEMENTS", 1 << 62)
    monkeypatch.setattr(threads, "SPLIT_IMAGE_ELEMENTS", 1 << 62)
    whole = results()
    monkeypatch.setattr(threads, "SPLIT_ELEMENTS", 1)
    monkeypatch.setattr(threads, "SPLIT_IMAGE_ELEMENTS", 1)
    calls = []
    split_batch = threads.split_batch
    monkeypatch.setattr(threads, "split_batch", lambda *a: (calls.append(a[0]), split_batch(*a))[1])
    for a, b in zip(results(), whole):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert calls and min(calls) >= 2, "every call above should have had two halves to split"


def test_split_work_runs_halves_in_the_callers_context_with_their_kernels_unsplit():
    import saliency as sl

    seen = []

    def body(a, b):
        inner = []
        threads.split_batch(10, threads.SPLIT_ELEMENTS, lambda c, d: inner.append((c, d)))
        seen.append((a, b, threading.get_ident(), sl.is_grad_enabled(), inner))

    with sl.no_grad():
        threads.split_work(3, body)
    assert sorted(s[:2] for s in seen) == [(0, 1), (1, 3)]
    assert len({s[2] for s in seen}) == 2
    assert [s[3] for s in seen] == [False, False]           # the helper's half sees no_grad too
    assert [s[4] for s in seen] == [[(0, 10)], [(0, 10)]]   # a kernel call inside a half is not split again
    seen.clear()
    threads.split_work(1, body)
    assert [s[:2] for s in seen] == [(0, 1)]
