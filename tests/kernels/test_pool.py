"""Pooling kernels against the NumPy reference, finite differences and torch."""
import numpy as np
import pytest

from saliency.kernels import pool as P

from . import _reference as ref

# N, C, H, W, kernel, stride, padding
CASES = [
    (2, 3, 7, 9, 3, 2, 1),
    (1, 2, 8, 8, 2, 2, 0),
    (1, 1, 5, 6, (3, 2), (1, 2), (1, 1)),
    (2, 2, 6, 5, 1, 1, 0),
]
IDS = [f"N{c[0]}C{c[1]}_{c[2]}x{c[3]}_k{c[4]}s{c[5]}p{c[6]}" for c in CASES]
ADAPTIVE = [((7, 9), (3, 4)), ((8, 8), (2, 2)), ((5, 6), (5, 6)), ((4, 5), (6, 7)), ((9, 7), 1)]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}


def data(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_matches_reference(case, dtype):
    N, C, H, W, k, s, p = case
    x = data((N, C, H, W), dtype, 0)
    out, idx = P.max_pool2d_forward(x, k, s, p)
    rout, ridx = ref.max_pool2d(x, k, ref.pair(s), p)
    np.testing.assert_array_equal(out, rout)
    np.testing.assert_array_equal(idx, ridx)
    g = data((2,) + out.shape, dtype, 1)
    dx = P.max_pool2d_grad_input(g, idx, x.shape)
    for i in range(2):
        np.testing.assert_allclose(dx[i], ref.max_pool2d_grad_input(g[i], ridx, x.shape), **TOL[dtype])


def test_max_pool_ties_go_to_the_first_max_in_scan_order():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 0] = x[0, 0, 0, 1] = x[0, 0, 1, 1] = 5.0
    out, idx = P.max_pool2d_forward(x, 2, 2, 0)
    assert idx[0, 0, 0, 0] == 1 and out[0, 0, 0, 0] == 5.0  # (0, 1) comes before (1, 0) row-major
    assert idx[0, 0, 1, 1] == 2 * 4 + 2  # an all-zero window: its first element


def test_max_pool_ties_and_nan_match_torch():
    torch = pytest.importorskip("torch")
    x = np.round(data((2, 3, 7, 8), np.float32, 2))  # many ties
    x[0, 0, 2, 3] = np.nan
    xt = torch.tensor(x, requires_grad=True)
    yt, it = torch.nn.functional.max_pool2d(xt, 3, 2, 1, return_indices=True)
    g = data(tuple(yt.shape), np.float32, 3)
    yt.backward(torch.tensor(g))
    out, idx = P.max_pool2d_forward(x, 3, 2, 1)
    np.testing.assert_array_equal(out, yt.detach().numpy())
    np.testing.assert_array_equal(idx, it.numpy())
    np.testing.assert_allclose(P.max_pool2d_grad_input(g, idx, x.shape), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_avg_pool_matches_reference(case, dtype):
    N, C, H, W, k, s, p = case
    x = data((N, C, H, W), dtype, 4)
    out = P.avg_pool2d_forward(x, k, s, p)
    np.testing.assert_allclose(out, ref.avg_pool2d(x, k, ref.pair(s), p), **TOL[dtype])


@pytest.mark.parametrize("hw, out_size", ADAPTIVE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adaptive_avg_pool_matches_reference(hw, out_size, dtype):
    x = data((2, 3) + hw, dtype, 5)
    np.testing.assert_allclose(P.adaptive_avg_pool2d_forward(x, out_size), ref.adaptive_avg_pool2d(x, out_size),
                               **TOL[dtype])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_pool_vjps_satisfy_directional_finite_differences(case):
    N, C, H, W, k, s, p = case
    rng = np.random.default_rng(6)
    x = rng.permutation(N * C * H * W).reshape(N, C, H, W) / 7.0  # no ties: max pool is smooth here
    _, idx = P.max_pool2d_forward(x, k, s, p)
    ref.check_vjp(lambda x_: P.max_pool2d_forward(x_, k, s, p)[0],
                  lambda v: P.max_pool2d_grad_input(v, idx, x.shape), x, rng)
    ref.check_vjp(lambda x_: P.avg_pool2d_forward(x_, k, s, p),
                  lambda v: P.avg_pool2d_grad_input(v, x.shape, k, s, p), x, rng)


@pytest.mark.parametrize("hw, out_size", ADAPTIVE)
def test_adaptive_vjp_satisfies_directional_finite_differences(hw, out_size):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2) + hw)
    ref.check_vjp(lambda x_: P.adaptive_avg_pool2d_forward(x_, out_size),
                  lambda v: P.adaptive_avg_pool2d_grad_input(v, x.shape, out_size), x, rng)


def test_seed_dimensions_equal_per_seed_calls():
    x = data((2, 3, 7, 9), np.float64, 8)
    out, idx = P.max_pool2d_forward(x, 3, 2, 1)
    g = data((2, 2) + out.shape, np.float64, 9)
    ga = data((2, 2, 2, 3, 3, 4), np.float64, 10)
    dmax = P.max_pool2d_grad_input(g, idx, x.shape)
    davg = P.avg_pool2d_grad_input(g, x.shape, 3, 2, 1)
    dada = P.adaptive_avg_pool2d_grad_input(ga, x.shape, (3, 4))
    assert dmax.shape == davg.shape == dada.shape == (2, 2) + x.shape
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(dmax[i, j], P.max_pool2d_grad_input(g[i, j], idx, x.shape), rtol=0, atol=0)
            np.testing.assert_allclose(davg[i, j], P.avg_pool2d_grad_input(g[i, j], x.shape, 3, 2, 1), rtol=0, atol=0)
            np.testing.assert_allclose(dada[i, j], P.adaptive_avg_pool2d_grad_input(ga[i, j], x.shape, (3, 4)),
                                       rtol=0, atol=0)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_avg_and_adaptive_match_torch(case):
    torch = pytest.importorskip("torch")
    N, C, H, W, k, s, p = case
    x = data((N, C, H, W), np.float32, 11)
    for fwd, bwd, tfn in [
        (lambda x_: P.avg_pool2d_forward(x_, k, s, p), lambda g: P.avg_pool2d_grad_input(g, x.shape, k, s, p),
         lambda t: torch.nn.functional.avg_pool2d(t, k, s, p)),
        (lambda x_: P.adaptive_avg_pool2d_forward(x_, (3, 4)), lambda g: P.adaptive_avg_pool2d_grad_input(g, x.shape, (3, 4)),
         lambda t: torch.nn.functional.adaptive_avg_pool2d(t, (3, 4))),
    ]:
        xt = torch.tensor(x, requires_grad=True)
        yt = tfn(xt)
        g = data(tuple(yt.shape), np.float32, 12)
        yt.backward(torch.tensor(g))
        np.testing.assert_allclose(fwd(x), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bwd(g), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="padding <= kernel/2"):
        P.max_pool2d_forward(np.zeros((1, 1, 5, 5)), 2, 2, 2)
    with pytest.raises(ValueError, match="smaller than the kernel"):
        P.avg_pool2d_forward(np.zeros((1, 1, 2, 2)), 3)
    with pytest.raises(ValueError, match="g must have shape"):
        P.avg_pool2d_grad_input(np.zeros((1, 1, 3, 3)), (1, 1, 4, 4), 2)


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 2, 2, 2), (1, 1, 6, 40), (2, 2, 5, 3)])
def test_max_pool_2x2_kernel_equals_the_generic_kernel(shape):
    """The 2x2 / stride-2 kernel against the table-driven one: odd sizes (last row/column dropped),
    rows wider than one vector, ties (zeros, as after a ReLU), NaN and -inf."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape)
    x[..., 1::3, :] = 0.0
    x[..., ::4, ::3] = np.nan
    x[..., 2::5, 1::2] = -np.inf
    for dtype in (np.float32, np.float64):
        xd = x.astype(dtype)
        y0, y1 = P._sliding_windows(shape[2], 2, 2, 0, "max_pool2d")
        x0, x1 = P._sliding_windows(shape[3], 2, 2, 0, "max_pool2d")
        want, want_idx = np.empty(shape[:2] + (len(y0), len(x0)), dtype), np.empty(shape[:2] + (len(y0), len(x0)), np.int64)
        P._max_pool(xd, want, want_idx, y0, y1, x0, x1, 0, shape[0] * shape[1])
        got, got_idx = P.max_pool2d_forward(xd, 2)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_idx, want_idx)
        got, got_idx = P.max_pool2d_forward(xd, (2, 2), 2, 0)
        np.testing.assert_array_equal(got_idx, want_idx)


# ---- PyTorch's other pooling arguments: dilation, ceil_mode, count_include_pad, divisor_override ----------
def _starts(size, k, s, p, d, ceil):
    """Window starts by PyTorch's output-size rule, written out plainly."""
    span = size + 2 * p - d * (k - 1) - 1
    n = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (n - 1) * s >= size + p:
        n -= 1
    return [i * s - p for i in range(n)]


def _max_pool_loops(x, k, s, p, d, ceil):
    N, C, H, W = x.shape
    ys, xs = _starts(H, k[0], s[0], p[0], d[0], ceil), _starts(W, k[1], s[1], p[1], d[1], ceil)
    out = np.empty((N, C, len(ys), len(xs)), x.dtype)
    idx = np.empty(out.shape, np.int64)
    for n in range(N):
        for c in range(C):
            for i, y in enumerate(ys):
                for j, x0 in enumerate(xs):
                    taps = [(y + a * d[0], x0 + b * d[1]) for a in range(k[0]) for b in range(k[1])]
                    taps = [(r, q) for r, q in taps if 0 <= r < H and 0 <= q < W]
                    r, q = taps[int(np.argmax([x[n, c, r, q] for r, q in taps]))]
                    out[n, c, i, j], idx[n, c, i, j] = x[n, c, r, q], r * W + q
    return out, idx


def _avg_pool_loops(x, k, s, p, ceil, include_pad, divisor):
    N, C, H, W = x.shape
    ys, xs = _starts(H, k[0], s[0], p[0], 1, ceil), _starts(W, k[1], s[1], p[1], 1, ceil)
    out = np.empty((N, C, len(ys), len(xs)), x.dtype)
    for i, y in enumerate(ys):
        for j, x0 in enumerate(xs):
            y1, x1 = min(y + k[0], H + p[0]), min(x0 + k[1], W + p[1])
            padded = (y1 - y) * (x1 - x0)
            a, b, c_, e = max(y, 0), min(y1, H), max(x0, 0), min(x1, W)
            div = divisor or (padded if include_pad else (b - a) * (e - c_))
            out[:, :, i, j] = x[:, :, a:b, c_:e].sum(axis=(2, 3)) / div
    return out


GENERAL = [((3, 3), (2, 2), (1, 1), (1, 1), True), ((3, 2), (2, 1), (1, 0), (2, 3), False),
           ((2, 2), (2, 2), (1, 1), (2, 2), True), ((3, 3), (3, 3), (0, 0), (1, 1), True)]


@pytest.mark.parametrize("k,s,p,d,ceil", GENERAL)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_dilation_and_ceil_mode_match_loops(k, s, p, d, ceil, dtype):
    x = np.random.default_rng(0).permutation(2 * 3 * 8 * 9).reshape(2, 3, 8, 9).astype(dtype)
    out, idx = P.max_pool2d_forward(x, k, s, p, d, ceil)
    rout, ridx = _max_pool_loops(x, k, s, p, d, ceil)
    np.testing.assert_array_equal(out, rout)
    np.testing.assert_array_equal(idx, ridx)
    g = data((2,) + out.shape, dtype, 1)
    dx = P.max_pool2d_grad_input(g, idx, x.shape)
    for i in range(2):
        np.testing.assert_allclose(dx[i], ref.max_pool2d_grad_input(g[i], ridx, x.shape), **TOL[dtype])


@pytest.mark.parametrize("k,s,p,_,ceil", GENERAL)
@pytest.mark.parametrize("include_pad,divisor", [(True, None), (False, None), (True, 5)])
def test_avg_pool_divisors_match_loops(k, s, p, _, ceil, include_pad, divisor):
    x = data((2, 3, 8, 9), np.float64, 2)
    out = P.avg_pool2d_forward(x, k, s, p, ceil, include_pad, divisor)
    np.testing.assert_allclose(out, _avg_pool_loops(x, k, s, p, ceil, include_pad, divisor), **TOL[np.float64])
    g = data(out.shape, np.float64, 3)  # the VJP is the adjoint: <g, A x> = <A^T g, x>
    dx = P.avg_pool2d_grad_input(g, x.shape, k, s, p, ceil, include_pad, divisor)
    np.testing.assert_allclose((g * out).sum(), (dx * x).sum(), rtol=1e-12)


@pytest.mark.parametrize("hw,out_size", ADAPTIVE)
def test_adaptive_max_pool_matches_the_bins(hw, out_size):
    x = np.random.default_rng(4).permutation(2 * 2 * hw[0] * hw[1]).reshape((2, 2) + hw).astype(np.float64)
    out, idx = P.adaptive_max_pool2d_forward(x, out_size)
    oh, ow = ref.pair(out_size)
    for i, (a, b) in enumerate(ref.adaptive_bins(hw[0], oh)):
        for j, (c, d) in enumerate(ref.adaptive_bins(hw[1], ow)):
            np.testing.assert_array_equal(out[:, :, i, j], x[:, :, a:b, c:d].max(axis=(2, 3)))
            flat = x.reshape(2, 2, -1)
            np.testing.assert_array_equal(np.take_along_axis(flat, idx[:, :, i, j, None], 2)[..., 0], out[:, :, i, j])
