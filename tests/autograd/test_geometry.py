"""The window geometry against brute force: the input cells a sliding window reads, listed one by one."""
import numpy as np
import pytest

from saliency.autograd import geometry
from saliency.autograd.patch import Patch


def read_cells(lo, hi, kernel, stride, padding, dilation):
    """Every input index that outputs lo..hi-1 of a sliding window read, inside the map or not."""
    return [i * stride - padding + k * dilation for i in range(lo, hi) for k in range(kernel)]


@pytest.mark.parametrize("seed", range(4))
def test_sliding_is_the_span_of_the_taps_inside_the_map(seed):
    rng = np.random.default_rng(seed)
    for _ in range(500):
        n, kernel, stride, dilation = (int(v) for v in rng.integers(1, 9, 4))
        padding = int(rng.integers(0, kernel * dilation))
        n_out = max((n + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1, 1)
        lo = int(rng.integers(0, n_out))
        hi = int(rng.integers(lo, n_out + 1))
        inside = [i for i in read_cells(lo, hi, kernel, stride, padding, dilation) if 0 <= i < n]
        want = (min(inside), max(inside) + 1) if inside else None
        assert geometry.sliding(lo, hi, n, kernel, stride, padding, dilation) == want, \
            (lo, hi, n, kernel, stride, padding, dilation)


def test_patch_windows_of_a_sliding_op_are_the_unclipped_reads():
    rng = np.random.default_rng(5)
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(1, 6, 2))
        origins = rng.integers(-3, 20, (3, 2)).astype(np.int64)
        p = Patch(np.zeros((3, 1, h, w)), origins, (20, 20), (3,))
        kernel, stride, dilation = [tuple(int(v) for v in rng.integers(1, 5, 2)) for _ in range(3)]
        padding = int(rng.integers(0, 3))
        got, size = p.sliding(kernel, stride, padding, dilation)
        for k, (r, c) in enumerate(origins):
            rows = read_cells(int(r), int(r) + h, kernel[0], stride[0], padding, dilation[0])
            cols = read_cells(int(c), int(c) + w, kernel[1], stride[1], padding, dilation[1])
            assert tuple(got[k]) == (min(rows), min(cols))
            assert size == (max(rows) - min(rows) + 1, max(cols) - min(cols) + 1)
