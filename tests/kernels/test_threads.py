"""The kernels' one thread pool: calls run in parts above their thresholds and whole below, parts give
the whole call's results, concurrent callers stay apart, and the thread count follows
set_num_threads and the environment (a forked child computes on one thread)."""
import os
import subprocess
import sys
import threading

import numba
import numpy as np
import pytest

import saliency as sl
from saliency import kernels
from saliency.kernels import threads

needs_two = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="one core: nothing runs in parts")


@pytest.fixture
def two_threads():
    before = threads.get_num_threads()
    threads.set_num_threads(2)
    yield
    threads.set_num_threads(before)


@pytest.fixture
def counted_parts(monkeypatch):
    """The part counts of every call that asked `threads.parts`."""
    seen = []
    parts = threads.parts
    monkeypatch.setattr(threads, "parts", lambda *a, **k: (seen.append(parts(*a, **k)), seen[-1])[1])
    return seen


def test_calls_are_cut_in_parts_above_their_thresholds_as_many_as_the_pool_has_threads():
    pool = numba.config.NUMBA_NUM_THREADS
    assert threads.parts(10 * pool, threads.PARALLEL_ELEMENTS) == pool
    assert threads.parts(10, threads.PARALLEL_ELEMENTS - 1) == 1
    assert threads.parts(1, 1 << 40) == 1
    assert threads.parts(10 * pool, threads.PARALLEL_FLOPS, flops=True) == pool
    assert threads.parts(10, threads.PARALLEL_FLOPS - 1, flops=True) == 1


def test_part_ranges_cover_the_range_once_with_sizes_one_apart():
    for n in (0, 1, 2, 7, 100):
        for k in (1, 2, 3, 8):
            spans = [threads.part(n, t, k) for t in range(k)]
            assert spans[0][0] == 0 and spans[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
            assert max(b - a for a, b in spans) - min(b - a for a, b in spans) <= 1


def _maps():
    rng = np.random.default_rng(0)
    out = []
    for n, c in ((1, 3), (8, 3), (1, 16), (8, 16)):
        x = rng.standard_normal((n, c, 24, 24)).astype(np.float32)
        w = rng.standard_normal((16, c, 3, 3)).astype(np.float32)
        for s in (1, 2):
            y = kernels.conv2d_forward(x, w, None, s, 1)
            out += [y, kernels.conv2d_grad_input(y, w, x.shape, s, 1),
                    kernels.conv2d_grad_input(y, w, x.shape, s, 1, algorithm=kernels.ConvAlgorithm.GEMM)]
        y = kernels.upsample_conv2d_forward(x, w, None, 2)
        out += [y, kernels.upsample_conv2d_grad_input(y, w, x.shape, 2), kernels.max_pool2d_forward(x, 2)[0]]
        wd = rng.standard_normal((c, 1, 5, 5)).astype(np.float32)
        out += [kernels.conv2d_forward(x, wd, None, 1, 2, groups=c)]
        out += [kernels.matmul(x.reshape(n, c, -1), x.reshape(n, c, -1).transpose(0, 2, 1))]
    return out


@needs_two
def test_parts_equal_the_whole_and_concurrent_callers_get_their_own_results(two_threads, monkeypatch, counted_parts):
    monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1 << 62)
    monkeypatch.setattr(threads, "PARALLEL_FLOPS", 1e30)
    whole = _maps()
    assert set(counted_parts) == {1}
    monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    monkeypatch.setattr(threads, "PARALLEL_FLOPS", 1)
    counted_parts.clear()
    in_parts = _maps()
    assert 2 in counted_parts, "the calls above should have run in parts"
    results = [None] * 4

    def worker(i):
        results[i] = _maps()

    callers = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    for got in [in_parts] + results:
        assert len(got) == len(whole)
        for a, b in zip(got, whole):
            # float32 sums in another order: equal up to rounding at the scale of the map's largest value
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


@needs_two
def test_maps_are_the_same_to_the_last_bit_on_one_thread_and_on_two(monkeypatch):
    """The parts follow from the shapes and the pool's size, never from the threads in use, so the
    products, and every result, are the same however many threads run them."""
    monkeypatch.setattr(threads, "PARALLEL_ELEMENTS", 1)
    monkeypatch.setattr(threads, "PARALLEL_FLOPS", 1)
    before = threads.get_num_threads()
    try:
        threads.set_num_threads(2)
        two = _maps()
        threads.set_num_threads(1)
        one = _maps()
    finally:
        threads.set_num_threads(before)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_set_num_threads_takes_positive_integers_and_is_saliencys_own():
    before = sl.get_num_threads()
    try:
        sl.set_num_threads(1)
        assert sl.get_num_threads() == 1
        sl.set_num_threads(10 ** 6)
        assert sl.get_num_threads() == numba.config.NUMBA_NUM_THREADS  # at most the pool's size
    finally:
        sl.set_num_threads(before)
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="positive integer"):
            sl.set_num_threads(bad)


def _run(code, **env):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("SALIENCY_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**environ, **env}, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize("env,expected", [({"SALIENCY_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"}, 1),
                                          ({"OMP_NUM_THREADS": "1"}, 1), ({"NUMBA_NUM_THREADS": "1"}, 1)])
def test_the_thread_count_follows_the_environment(env, expected):
    assert _run("import saliency as sl; print(sl.get_num_threads())", **env) == [str(expected)]


@needs_two
def test_a_forked_child_computes_on_one_thread_after_the_parent_used_the_pool():
    code = """
import os, numpy as np
from saliency import kernels
from saliency.kernels import threads
threads.set_num_threads(2)
threads.PARALLEL_ELEMENTS = threads.PARALLEL_FLOPS = 1
x = np.random.default_rng(0).standard_normal((4, 16, 32, 32)).astype(np.float32)
w = np.ones((16, 16, 3, 3), np.float32)
y = kernels.conv2d_forward(x, w, None, 1, 1), kernels.matmul(x, x), kernels.activation.relu_forward(x)[0]
pid = os.fork()
if pid == 0:
    z = kernels.conv2d_forward(x, w, None, 1, 1), kernels.matmul(x, x), kernels.activation.relu_forward(x)[0]
    ok = threads.get_num_threads() == 1 and all(np.array_equal(a, b) for a, b in zip(y, z))
    os._exit(0 if ok else 3)
print(os.waitpid(pid, 0)[1])
"""
    assert _run(code) == ["0"]


def test_the_pool_is_numbas_openmp_layer_where_it_loads():
    try:
        from numba.np.ufunc import omppool  # noqa: F401
    except ImportError:
        pytest.skip("Numba's OpenMP layer does not load here")
    x = np.ones(1 << 16, np.float32)
    kernels.activation.relu_forward(x.reshape(2, -1))
    assert threads.parts(2, 1 << 40) == 1 or numba.threading_layer() == "omp"
