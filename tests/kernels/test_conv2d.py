"""conv2d kernels against the NumPy reference, finite differences and torch."""
import numpy as np
import pytest

from saliency.kernels import conv2d as K
from saliency.kernels import im2col

from . import _reference as ref

# N, C, O, H, W, kernel, stride, padding, dilation, groups: odd sizes, 1x1, stride 2 and 3,
# padding wider than the kernel reach (a crop in the input VJP), dilation, groups, depthwise.
CASES = [
    (2, 4, 6, 7, 9, 3, 1, 1, 1, 1),
    (1, 3, 5, 8, 8, 1, 1, 0, 1, 1),
    (2, 4, 10, 9, 7, 3, 2, 1, 1, 1),
    (1, 4, 4, 9, 10, (3, 2), (2, 1), (1, 0), 2, 2),
    (2, 6, 6, 7, 7, 3, 1, 1, 1, 6),
    (1, 6, 12, 8, 8, 3, 2, 2, 1, 3),
    (1, 2, 3, 5, 5, 3, 1, 4, 1, 1),
    (1, 3, 2, 6, 7, 5, 3, 2, 1, 1),
]
IDS = [f"N{c[0]}C{c[1]}O{c[2]}_{c[3]}x{c[4]}_k{c[5]}s{c[6]}p{c[7]}d{c[8]}g{c[9]}" for c in CASES]
TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


def make(case, dtype, rng):
    N, C, O, H, W, k, s, p, d, groups = case
    kh, kw = ref.pair(k)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C // groups, kh, kw)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    return x, w, b, (s, p, d, groups)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", list(K.ConvAlgorithm))
def test_forward_and_grad_input_match_reference(case, dtype, algorithm):
    rng = np.random.default_rng(0)
    x, w, b, args = make(case, dtype, rng)
    y = K.conv2d_forward(x, w, b, *args, algorithm=algorithm)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ref.conv2d(x, w, b, *args), **TOL[dtype])
    g = rng.standard_normal(y.shape).astype(dtype)
    dx = K.conv2d_grad_input(g, w, x.shape, *args, algorithm=algorithm)
    assert dx.shape == x.shape and dx.dtype == dtype
    np.testing.assert_allclose(dx, ref.conv2d_grad_input(g, w, x.shape, *args), **TOL[dtype])


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", list(K.ConvAlgorithm))
def test_grad_weight_and_bias_match_reference(case, dtype, algorithm):
    rng = np.random.default_rng(1)
    x, w, b, args = make(case, dtype, rng)
    g = rng.standard_normal(K.conv2d_forward(x, w, b, *args).shape).astype(dtype)
    dw = K.conv2d_grad_weight(g, x, w.shape, *args, algorithm=algorithm)
    assert dw.shape == w.shape and dw.dtype == dtype
    np.testing.assert_allclose(dw, ref.conv2d_grad_weight(g, x, w.shape, *args), **TOL[dtype])
    np.testing.assert_allclose(K.conv2d_grad_bias(g), g.sum(axis=(0, 2, 3)), **TOL[dtype])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vjps_satisfy_directional_finite_differences(case):
    rng = np.random.default_rng(2)
    x, w, b, args = make(case, np.float64, rng)
    ref.check_vjp(lambda x_: K.conv2d_forward(x_, w, b, *args),
                  lambda v: K.conv2d_grad_input(v, w, x.shape, *args), x, rng)
    ref.check_vjp(lambda w_: K.conv2d_forward(x, w_, b, *args),
                  lambda v: K.conv2d_grad_weight(v, x, w.shape, *args), w, rng)
    ref.check_vjp(lambda b_: K.conv2d_forward(x, w, b_, *args), K.conv2d_grad_bias, b, rng)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gemm_input_vjps_equal_the_correlation_formulation(case):
    """Row-major GEMM per stride phase (groups = 1) and GEMM + col2im (any groups) against the
    correlation of the dilated cotangent with the flipped weight."""
    rng = np.random.default_rng(3)
    x, w, b, (s, p, d, groups) = make(case, np.float64, rng)
    g = rng.standard_normal((3,) + K.conv2d_forward(x, w, b, s, p, d, groups).shape[1:])
    sp, pp, dp = ref.pair(s), ref.pair(p), ref.pair(d)
    x_shape = (3,) + x.shape[1:]
    expected = K.conv2d_grad_input_direct(g, w, x_shape, sp, pp, dp, groups)
    np.testing.assert_allclose(im2col.conv2d_grad_input_gemm(g, w, x_shape, sp, pp, dp, groups), expected,
                               rtol=1e-12, atol=1e-12)
    if groups == 1:
        np.testing.assert_allclose(im2col.conv2d_grad_input_rows(g, w, x_shape, sp, pp, dp), expected,
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c[-1] == 1], ids=[i for c, i in zip(CASES, IDS) if c[-1] == 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_major_paths_match_reference(case, dtype):
    """conv2d_rows / conv2d_grad_input_rows / conv2d_grad_weight_rows, whatever the wrappers pick for these shapes."""
    rng = np.random.default_rng(7)
    x, w, b, (s, p, d, groups) = make(case, dtype, rng)
    sp, pp, dp = ref.pair(s), ref.pair(p), ref.pair(d)
    y = ref.conv2d(x, w, b, s, p, d)
    np.testing.assert_allclose(im2col.conv2d_rows(x, w, b, y.shape, sp, pp, dp), y, **TOL[dtype])
    g = rng.standard_normal((2,) + y.shape).astype(dtype)
    x2_shape = (2 * x.shape[0],) + x.shape[1:]
    dx = im2col.conv2d_grad_input_rows(g.reshape((-1,) + y.shape[1:]), w, x2_shape, sp, pp, dp)
    dw = im2col.conv2d_grad_weight_rows(g, x, w.shape, sp, pp, dp)
    for k in range(2):
        np.testing.assert_allclose(dx.reshape((2,) + x.shape)[k], ref.conv2d_grad_input(g[k], w, x.shape, s, p, d),
                                   **TOL[dtype])
        np.testing.assert_allclose(dw[k], ref.conv2d_grad_weight(g[k], x, w.shape, s, p, d), **TOL[dtype])


@pytest.mark.parametrize("size, kernel, stride, padding, dilation", [
    (9, 3, 2, 1, 1), (8, 3, 2, 1, 1), (7, 5, 3, 2, 1), (10, 3, 2, 0, 2), (6, 2, 4, 0, 1)])
def test_stride_phases_cover_each_tap_once(size, kernel, stride, padding, dilation):
    """Every (input index, tap) pair with a cotangent index in range appears in exactly one phase."""
    out = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    expected = {(i, k) for i in range(size) for k in range(kernel)
                if (i + padding - k * dilation) % stride == 0 and 0 <= (i + padding - k * dilation) // stride < out}
    got = set()
    for r, taps, offsets, n in im2col.stride_phases(size, kernel, stride, padding, dilation):
        assert n == len(range(r, size, stride))
        for a in range(n):
            for k, e in zip(taps, offsets):
                assert e == (r + padding - k * dilation) // stride
                if 0 <= a + e < out:
                    got.add((a * stride + r, k))
    assert got == expected


@pytest.mark.parametrize("case", [CASES[2], CASES[3]], ids=[IDS[2], IDS[3]])
@pytest.mark.parametrize("algorithm", list(K.ConvAlgorithm))
def test_seed_dimensions_equal_per_seed_calls_in_one_kernel_call(case, algorithm, monkeypatch):
    rng = np.random.default_rng(4)
    x, w, b, args = make(case, np.float64, rng)
    y = K.conv2d_forward(x, w, b, *args)
    g = rng.standard_normal((2, 3) + y.shape)
    if algorithm is K.ConvAlgorithm.DIRECT:
        # the input VJP is a stride-1 correlation: 3x3 ones run on an input padded beforehand
        kernel_module, name = K, "_corr2d_3x3_padded" if w.shape[2:] == (3, 3) else "_corr2d"
    else:
        kernel_module, name = im2col, "_col2im"
    kernel = getattr(kernel_module, name)
    calls = []  # shape of the (M, ...) array each call reads or writes (for col2im: dx)
    monkeypatch.setattr(kernel_module, name, lambda *a: (calls.append(a[name == "_col2im"].shape), kernel(*a))[1])
    dx = K.conv2d_grad_input(g, w, x.shape, *args, algorithm=algorithm)
    n_seeded = len(calls)
    K.conv2d_grad_input(g[0, 0], w, x.shape, *args, algorithm=algorithm)
    assert n_seeded == len(calls) - n_seeded, "K*N input gradients must take as many kernel calls as N"
    assert calls[0][0] == 6 * x.shape[0]
    monkeypatch.undo()
    dw = K.conv2d_grad_weight(g, x, w.shape, *args, algorithm=algorithm)
    db = K.conv2d_grad_bias(g)
    assert dx.shape == (2, 3) + x.shape and dw.shape == (2, 3) + w.shape and db.shape == (2, 3, w.shape[0])
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(dx[i, j], K.conv2d_grad_input(g[i, j], w, x.shape, *args, algorithm=algorithm),
                                       rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(dw[i, j], K.conv2d_grad_weight(g[i, j], x, w.shape, *args, algorithm=algorithm),
                                       rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(db[i, j], K.conv2d_grad_bias(g[i, j]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_torch(case):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, w, b, (s, p, d, groups) = make(case, np.float32, rng)
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    bt = torch.tensor(b, requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, wt, bt, s, p, d, groups)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    tol = dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(K.conv2d_forward(x, w, b, s, p, d, groups), yt.detach().numpy(), **tol)
    np.testing.assert_allclose(K.conv2d_grad_input(g, w, x.shape, s, p, d, groups), xt.grad.numpy(), **tol)
    np.testing.assert_allclose(K.conv2d_grad_weight(g, x, w.shape, s, p, d, groups), wt.grad.numpy(), **tol)
    np.testing.assert_allclose(K.conv2d_grad_bias(g), bt.grad.numpy(), **tol)


def test_choose_algorithm_prefers_direct_for_degenerate_gemms():
    assert K.choose_algorithm((1, 16, 128, 128), (1, 16, 3, 3), (1, 1, 128, 128), 1) is K.ConvAlgorithm.DIRECT
    assert K.choose_algorithm((1, 32, 8, 8), (32, 1, 3, 3), (1, 32, 8, 8), 32) is K.ConvAlgorithm.DIRECT
    assert K.choose_algorithm((1, 16, 32, 32), (32, 16, 3, 3), (1, 32, 32, 32), 1) is K.ConvAlgorithm.GEMM


def test_nan_propagates_and_inputs_are_made_contiguous():
    rng = np.random.default_rng(6)
    x = np.asfortranarray(rng.standard_normal((1, 2, 5, 5)))
    w = rng.standard_normal((4, 2, 3, 3))
    np.testing.assert_allclose(K.conv2d_forward(x, w, None, 1, 1), ref.conv2d(x, w, None, 1, 1), rtol=1e-12, atol=1e-12)
    x[0, 0, 2, 2] = np.nan
    for algorithm in K.ConvAlgorithm:
        y = K.conv2d_forward(x, w, None, 1, 1, algorithm=algorithm)
        assert np.isnan(y[0, :, 1:4, 1:4]).all() and not np.isnan(y[0, :, 0, :]).any()


@pytest.mark.parametrize("call, message", [
    (lambda: K.conv2d_forward(np.zeros((1, 3, 5, 5)), np.zeros((4, 2, 3, 3)), groups=1), "groups"),
    (lambda: K.conv2d_forward(np.zeros((1, 2, 2, 2)), np.zeros((4, 2, 3, 3))), "empty"),
    (lambda: K.conv2d_forward(np.zeros((1, 2, 5, 5), np.int64), np.zeros((4, 2, 3, 3))), "float32 or float64"),
    (lambda: K.conv2d_forward(np.zeros((1, 2, 5, 5)), np.zeros((4, 2, 3, 3)), stride=0), "stride"),
    (lambda: K.conv2d_grad_input(np.zeros((1, 4, 4, 4)), np.zeros((4, 2, 3, 3)), (1, 2, 5, 5)), "g must have shape"),
])
def test_bad_arguments_raise_clear_errors(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_only_the_prange_wrappers_are_parallel_and_each_runs_a_serial_kernel():
    """The kernels' one pool: a kernel compiled with parallel=True is a `_parallel` wrapper that
    cuts a range into parts for the serial kernel of its name, and no other kernel opens a
    region of its own (see saliency/kernels/threads.py)."""
    import numba
    from numba.core.registry import CPUDispatcher

    import saliency.kernels as kernels

    if numba.config.DISABLE_JIT:
        pytest.skip("with NUMBA_DISABLE_JIT the kernels are plain Python functions")
    names = ("activation", "batchnorm", "conv2d", "depthwise", "im2col", "pool", "resize", "shifted", "subpixel",
             "threads", "winograd")
    modules = [getattr(kernels, name) for name in names]
    jitted = {(mod, name): obj for mod in modules for name, obj in vars(mod).items() if isinstance(obj, CPUDispatcher)}
    parallel = [(mod, name) for (mod, name), fn in jitted.items() if fn.targetoptions.get("parallel")]
    assert len(parallel) >= 20
    for mod, name in parallel:
        assert name.endswith("_parallel"), f"{mod.__name__}.{name}"
        assert isinstance(getattr(mod, name[:-len("_parallel")], None), CPUDispatcher), f"{mod.__name__}.{name}"


def test_no_compiled_kernel_assigns_an_array_into_a_slice():
    """`a[i:j] = b[k:l]` in a Numba kernel compiles NumPy's general assignment (broadcasting, overlap
    checks): seconds of compile time in every kernel that has one, on every first run. The kernels
    copy with explicit loops; a slice may still be filled with a number."""
    import ast
    from pathlib import Path

    import saliency.kernels as kernels

    found = []
    for path in sorted(Path(kernels.__file__).parent.glob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef) or not any("njit" in ast.unparse(d) for d in fn.decorator_list):
                continue
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)):
                    continue
                into_slice = any(isinstance(n, ast.Slice) for n in ast.walk(node.targets[0].slice))
                from_slice = any(isinstance(n, ast.Slice) for n in ast.walk(node.value))
                number = isinstance(node.value, (ast.Constant, ast.UnaryOp))
                if from_slice or (into_slice and not number):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not found, found


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gemm_input_vjps_in_chunks_of_images_equal_per_seed_calls(case, monkeypatch):
    """GEMM + col2im and the row-major correlation build their patches a few images at a time
    (im2col.CHUNK_BYTES): with one image per chunk, the seed-batched VJP equals per-seed calls."""
    rng = np.random.default_rng(8)
    x, w, b, (s, p, d, groups) = make(case, np.float64, rng)
    y = K.conv2d_forward(x, w, b, s, p, d, groups)
    g = rng.standard_normal((3,) + y.shape)
    sp, pp, dp = ref.pair(s), ref.pair(p), ref.pair(d)
    x_shape = (3 * x.shape[0],) + x.shape[1:]
    monkeypatch.setattr(im2col, "CHUNK_BYTES", 1)
    paths = [lambda gg, xs: im2col.conv2d_grad_input_gemm(gg, w, xs, sp, pp, dp, groups)]
    if groups == 1:
        paths.append(lambda gg, xs: im2col.conv2d_grad_input_rows(gg, w, xs, sp, pp, dp))
    for path in paths:
        dx = path(g.reshape((-1,) + y.shape[1:]), x_shape).reshape((3,) + x.shape)
        for k in range(3):
            np.testing.assert_allclose(dx[k], ref.conv2d_grad_input(g[k], w, x.shape, s, p, d, groups),
                                       rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [c for c in CASES if ref.pair(c[5]) == (3, 3)] + [
    (1, 2, 9, 6, 20, 3, 1, 0, 2, 1), (2, 3, 5, 7, 5, 3, 3, 2, 1, 1), (1, 1, 3, 6, 7, 3, 1, -1, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_3x3_kernel_equals_the_generic_correlation(case, dtype):
    """_corr2d_3x3 (all 9 taps per pixel from a padded row buffer) against _corr2d, including
    stride 3, dilation, groups, more output channels than one block, and a crop (negative padding,
    as in the input VJP)."""
    N, C, O, H, W, k, s, p, d, groups = case
    rng = np.random.default_rng(9)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C // groups, 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    OH, OW = K.conv_output_size(H, 3, s, p, d), K.conv_output_size(W, 3, s, p, d)
    for ob, rb in [(8, OH), (3, 2), (1, 1)]:
        got, want = np.full((2, N, O, OH, OW), np.nan, dtype)
        K._corr2d_3x3(x, w, b, got, s, s, p, p, d, d, groups, ob, rb, 0, -1)
        K._corr2d(x, w, b, want, s, s, p, p, d, d, groups, ob, rb, 0, -1)
        np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("case", [c for c in CASES if ref.pair(c[5]) == (3, 3) and ref.pair(c[6]) == (1, 1)] + [
    (1, 2, 9, 6, 20, 3, 1, 0, 2, 1), (1, 1, 3, 6, 7, 3, 1, -1, 1, 1), (2, 4, 6, 5, 9, 3, 1, 2, 1, 2),
    (3, 16, 1, 11, 13, 3, 1, 1, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_padded_3x3_kernel_equals_the_generic_correlation(case, dtype):
    """_corr2d_3x3_padded (stride 1, input padded once by _padded) against _corr2d: dilation, groups,
    one output channel (the depth head), more channels than a block, and a crop (negative padding)."""
    N, C, O, H, W, k, s, p, d, groups = case
    rng = np.random.default_rng(10)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C // groups, 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    OH, OW = K.conv_output_size(H, 3, 1, p, d), K.conv_output_size(W, 3, 1, p, d)
    xp = K._padded(x, (p, p), (OH + 2 * d, OW + 2 * d))
    for ob in (8, 3, 1):
        got, want = np.full((2, N, O, OH, OW), np.nan, dtype)
        K._corr2d_3x3_padded(xp, w, b, got, d, d, groups, ob, 0, -1)
        K._corr2d(x, w, b, want, 1, 1, p, p, d, d, groups, ob, OH, 0, -1)
        np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("case", [(2, 3, 16, 9, 13, 3, 1, 1, 1, 1), (1, 3, 5, 8, 7, 3, 1, 1, 1, 1),
                                  (1, 3, 1, 6, 6, 3, 1, 0, 1, 1), (2, 3, 4, 11, 9, 3, 1, 2, 2, 1),
                                  (1, 3, 3, 7, 8, 3, 1, -1, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rgb_3x3_kernel_equals_the_generic_correlation_and_serves_first_layers(case, dtype, monkeypatch):
    """_corr2d_3x3_rgb (three input channels, two output channels per pass) against _corr2d: an odd
    number of output channels (the last pairs with itself), one output channel, dilation, a crop;
    and conv2d_forward on an RGB input takes it and matches the NumPy reference."""
    N, C, O, H, W, _, _, p, d, groups = case
    rng = np.random.default_rng(12)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C, 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    OH, OW = K.conv_output_size(H, 3, 1, p, d), K.conv_output_size(W, 3, 1, p, d)
    got, want = np.full((2, N, O, OH, OW), np.nan, dtype)
    K._corr2d_3x3_rgb(K._padded(x, (p, p), (OH + 2 * d, OW + 2 * d)), w, b, got, d, d, 0, -1)
    K._corr2d(x, w, b, want, 1, 1, p, p, d, d, groups, 8, OH, 0, -1)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    if p >= 0:
        kernel, calls = K._corr2d_3x3_rgb, []
        monkeypatch.setattr(K, "_corr2d_3x3_rgb", lambda *a: (calls.append(1), kernel(*a))[1])
        y = K.conv2d_forward(x, w, b, 1, p, d)
        assert calls, "an RGB 3x3 forward should run the three-channel kernel"
        np.testing.assert_allclose(y, ref.conv2d(x, w, b, 1, p, d, 1), **TOL[dtype])


@pytest.mark.parametrize("case", [(2, 16, 8, 10, 12, 3, 1, 1, 1, 1), (1, 24, 5, 9, 7, 3, 1, 2, 2, 1),
                                  (3, 16, 4, 8, 11, 5, 1, 1, 1, 1), (2, 32, 3, 6, 6, (3, 1), 1, (1, 0), 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stride_1_input_vjp_as_a_forward_convolution_matches_reference(case, dtype, monkeypatch):
    """>= 16 input channels at stride 1 (padding up to dilation*(k-1)): the input VJP runs as the
    forward row-major convolution of g with the flipped, transposed weight; with seed dimensions too."""
    rng = np.random.default_rng(11)
    x, w, b, args = make(case, dtype, rng)
    y = K.conv2d_forward(x, w, b, *args)
    g = rng.standard_normal((2,) + y.shape).astype(dtype)
    used = []
    real = im2col.conv2d_rows
    monkeypatch.setattr(im2col, "conv2d_rows", lambda *a: (used.append(a[0].shape), real(*a))[1])
    dx = K.conv2d_grad_input(g, w, x.shape, *args, algorithm=K.ConvAlgorithm.GEMM)
    assert used and used[0][0] == 2 * x.shape[0]
    for k in range(2):
        np.testing.assert_allclose(dx[k], ref.conv2d_grad_input(g[k], w, x.shape, *args), **TOL[dtype])


@pytest.mark.parametrize("case", [c for c in CASES if c[9] == 1], ids=[i for c, i in zip(CASES, IDS) if c[9] == 1])
def test_row_major_forward_in_chunks_of_images_matches_reference(case, monkeypatch):
    """The row-major forward builds its patches a few images at a time (im2col.CHUNK_BYTES): with one
    image per chunk it still matches the reference, image by image."""
    rng = np.random.default_rng(12)
    x, w, b, (s, p, d, groups) = make(case, np.float64, rng)
    x = np.concatenate([x, rng.standard_normal(x.shape)])  # at least two images, so two chunks
    y_shape = ref.conv2d(x, w, b, s, p, d).shape
    monkeypatch.setattr(im2col, "CHUNK_BYTES", 1)
    y = im2col.conv2d_rows(x, w, b if b is not None else np.zeros(w.shape[0]), y_shape, ref.pair(s), ref.pair(p),
                           ref.pair(d))
    np.testing.assert_allclose(y, ref.conv2d(x, w, b, s, p, d), rtol=1e-10, atol=1e-10)


# depthwise: (N, C, multiplier, H, W, kernel, stride, padding, dilation): 3x3 and 5x5 at strides 1
# and 2, a channel multiplier, padding wider than the reach, dilation, planes smaller than the kernel
DEPTHWISE = [(2, 5, 1, 9, 8, 3, 1, 1, 1), (1, 6, 1, 10, 11, 5, 2, 2, 1), (2, 3, 2, 7, 9, 3, 2, 1, 1),
             (1, 4, 1, 4, 4, 5, 1, 2, 1), (1, 3, 3, 8, 7, 3, 1, 2, 2), (3, 2, 1, 6, 5, (3, 5), (2, 1), (0, 3), 1),
             (1, 4, 1, 2, 3, 5, 2, 3, 1)]


@pytest.mark.parametrize("case", DEPTHWISE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["planes", "channels-last"])
def test_depthwise_kernels_equal_the_generic_correlation_and_reference(case, dtype, layout, monkeypatch):
    """The depthwise forward against _corr2d and the reference; its input VJP (a scatter into the
    padded plane) against the correlation formulation and the reference, seeds folded in; in
    planes and channels-last (which serves a channel multiplier of 1 only)."""
    monkeypatch.setattr(K.depthwise, "channels_last_pays", lambda C, m, *_, **__: layout == "channels-last" and m == 1)
    N, C, m, H, W, k, s, p, d = case
    kh, kw = ref.pair(k)
    s, p, d = ref.pair(s), ref.pair(p), ref.pair(d)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((C * m, 1, kh, kw)).astype(dtype)
    b = rng.standard_normal(C * m).astype(dtype)
    OH, OW = K.conv_output_size(H, kh, s[0], p[0], d[0]), K.conv_output_size(W, kw, s[1], p[1], d[1])
    shape = (N, C * m, OH, OW)
    want = np.full(shape, np.nan, dtype)
    K._corr2d(x, w, b, want, s[0], s[1], p[0], p[1], d[0], d[1], C, 1, OH, 0, -1)
    got = K.depthwise.depthwise_forward(x, w, b, shape, s, p, d)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    np.testing.assert_allclose(K.conv2d_forward(x, w, b, s, p, d, C), ref.conv2d(x, w, b, s, p, d, C), **TOL[dtype])
    g = rng.standard_normal((2,) + shape).astype(dtype)
    dx = K.conv2d_grad_input(g, w, x.shape, s, p, d, C)
    for k_ in range(2):
        np.testing.assert_allclose(dx[k_], ref.conv2d_grad_input(g[k_], w, x.shape, s, p, d, C), **TOL[dtype])
        np.testing.assert_allclose(dx[k_], K.conv2d_grad_input_direct(g[k_], w, x.shape, s, p, d, C), **TOL[dtype])


def test_depthwise_layers_run_channels_last_except_strided_vjps_on_large_planes(monkeypatch):
    """The cost model sends depthwise layers channels-last, small planes of many channels (5x5 on
    672 channels of 8x8) and large planes of few (3x3 on 32 channels of 56x56, which the
    register-tiled 3x3 kernel would serve) alike, but keeps the input VJP of a stride-2 layer on
    112x112 planes given NCHW on planes (channels-last, it would work on a stride-dilated cotangent
    four times the size); either way forward and input VJP equal the reference."""
    calls = []
    real = K.depthwise.channels_last_kernels
    monkeypatch.setattr(K.depthwise, "channels_last_kernels", lambda *a: calls.append(a[2]) or real(*a))
    rng = np.random.default_rng(18)
    for C, size, k, s, forward, vjp in ((672, 8, 5, 1, True, True), (32, 56, 3, 1, True, True),
                                        (32, 112, 3, 2, True, False)):
        x = rng.standard_normal((1, C, size, size))
        w = rng.standard_normal((C, 1, k, k))
        calls.clear()
        y = K.conv2d_forward(x, w, None, s, k // 2, 1, C)
        assert bool(calls) == forward, (C, size, k, s)
        np.testing.assert_allclose(y, ref.conv2d(x, w, np.zeros(C), s, k // 2, 1, C), rtol=1e-10, atol=1e-10)
        g = rng.standard_normal(y.shape)
        calls.clear()
        dx = K.conv2d_grad_input(g, w, x.shape, s, k // 2, 1, C)
        assert bool(calls) == vjp, (C, size, k, s)
        np.testing.assert_allclose(dx, ref.conv2d_grad_input(g, w, x.shape, s, k // 2, 1, C), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [(2, 6, 4, 5, 7, 1, 1, 0, 1, 1), (1, 8, 12, 9, 8, 1, 2, 0, 1, 1),
                                  (2, 6, 9, 7, 6, 1, (2, 3), 0, 1, 3), (1, 4, 2, 3, 3, 1, 3, 0, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pointwise_paths_match_reference(case, dtype):
    """1x1 convolutions without padding (a GEMM on the input as it is): strides that skip the last
    rows and columns, groups, fewer outputs than inputs; seeds folded into the VJP."""
    rng = np.random.default_rng(12)
    x, w, b, args = make(case, dtype, rng)
    y = K.conv2d_forward(x, w, b, *args)
    np.testing.assert_allclose(y, ref.conv2d(x, w, b, *args), **TOL[dtype])
    g = rng.standard_normal((3,) + y.shape).astype(dtype)
    dx = K.conv2d_grad_input(g, w, x.shape, *args)
    for k_ in range(3):
        np.testing.assert_allclose(dx[k_], ref.conv2d_grad_input(g[k_], w, x.shape, *args), **TOL[dtype])


# stride 1, groups 1: (N, C, O, H, W, kernel, padding, dilation): 3x3, 5x5, rectangular, dilation,
# no padding, padding wider than the reach (a crop in the input VJP), one output channel
SHIFTED = [(1, 8, 16, 9, 11, 3, 1, 1), (2, 5, 7, 8, 6, 3, 2, 2), (3, 4, 6, 7, 9, (3, 5), (0, 2), 1),
           (1, 6, 4, 12, 10, 5, 2, 1), (2, 3, 1, 6, 6, 3, 0, 1), (1, 2, 3, 5, 5, 3, 4, 1)]


@pytest.mark.parametrize("case", SHIFTED)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("in_place", [True, False], ids=["cblas", "numpy"])
def test_shifted_products_match_reference(case, dtype, in_place, monkeypatch):
    """The accumulated products on shifted views of the padded input (forward, and the input VJP
    with seeds folded into the batch), through NumPy's cblas and through the NumPy fallback."""
    if in_place and not K.blas.IN_PLACE_GEMM:
        pytest.skip("NumPy's cblas gemm not found")
    if not in_place:
        monkeypatch.setattr(K.blas, "_gemm", {})
    N, C, O, H, W, k, p, d = case
    kh, kw = ref.pair(k)
    p, d = ref.pair(p), ref.pair(d)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C, kh, kw)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    want = ref.conv2d(x, w, b, 1, p, d, 1)
    np.testing.assert_allclose(K.shifted.conv2d_shifted(x, w, b, want.shape, p, d), want, **TOL[dtype])
    g = rng.standard_normal((2,) + want.shape).astype(dtype)
    dx = K.shifted.conv2d_grad_input_shifted(g.reshape((-1,) + want.shape[1:]), w, (2 * N,) + x.shape[1:], p, d)
    for k_ in range(2):
        np.testing.assert_allclose(dx[k_ * N:(k_ + 1) * N], ref.conv2d_grad_input(g[k_], w, x.shape, 1, p, d, 1),
                                   **TOL[dtype])


def test_large_stride_1_maps_take_the_shifted_products(monkeypatch):
    """A map whose patches outgrow the caches (64 channels, 3x3 at dilation 2, 96x96: 21 MB; at
    dilation 1 Winograd's tiles serve it) runs on shifted views in both directions; one whose
    patches fit (8x8) does not."""
    if not K.blas.IN_PLACE_GEMM:
        pytest.skip("NumPy's cblas gemm not found")
    calls = []
    for name in ("conv2d_shifted", "conv2d_grad_input_shifted"):
        real = getattr(K.shifted, name)
        monkeypatch.setattr(K.shifted, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
    rng = np.random.default_rng(14)
    for size, expected in ((96, ["conv2d_shifted", "conv2d_grad_input_shifted"]), (8, [])):
        calls.clear()
        x = rng.standard_normal((1, 64, size, size)).astype(np.float32)
        w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
        y = K.conv2d_forward(x, w, None, 1, 2, 2)
        K.conv2d_grad_input(np.ones_like(y), w, x.shape, 1, 2, 2)
        assert calls == expected


# 3x3 at stride 1: (N, C, O, H, W, padding): odd and even sizes (a last tile row or column half
# outside the output), no padding, padding wider than the reach (a crop in the input VJP),
# one channel in or out, maps smaller than a tile
WINOGRAD = [(2, 5, 7, 9, 11, 1), (1, 8, 6, 8, 8, 1), (3, 4, 3, 7, 6, 0), (1, 3, 1, 6, 9, 2),
            (2, 1, 4, 5, 5, 3), (1, 6, 5, 3, 4, (1, 0)), (1, 2, 2, 1, 1, 1)]


@pytest.mark.parametrize("case", WINOGRAD)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("route", ["native", "cblas", "numpy", "blocks"])
def test_winograd_tiles_match_reference(case, dtype, route, monkeypatch):
    """F(2x2, 3x3) (forward, and the input VJP with two seeds folded into the batch, which reads
    the forward's weight transform flipped) against the reference: with the products called from
    the compiled block, through NumPy's cblas from Python, through the NumPy fallback, and in
    blocks of one tile row in parts on the kernels' threads."""
    if route == "native" and not K.blas.NATIVE_GEMM or route == "cblas" and not K.blas.IN_PLACE_GEMM:
        pytest.skip("NumPy's cblas gemm not found")
    if route in ("cblas", "numpy"):
        monkeypatch.setattr(K.blas, "NATIVE_GEMM", False)
    if route == "numpy":
        monkeypatch.setattr(K.blas, "_gemm", {})
    if route == "blocks":
        monkeypatch.setattr(K.winograd, "BLOCK_BYTES", 1)
        monkeypatch.setattr(K.threads, "PARALLEL_FLOPS", 0)
    N, C, O, H, W, p = case
    p = ref.pair(p)
    rng = np.random.default_rng(15)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C, 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    want = ref.conv2d(x, w, b, 1, p, 1, 1)
    np.testing.assert_allclose(K.winograd.conv2d_winograd(x, w, b, want.shape, p), want, **TOL[dtype])
    g = rng.standard_normal((2,) + want.shape).astype(dtype)
    dx = K.winograd.conv2d_grad_input_winograd(g.reshape((-1,) + want.shape[1:]), w, (2 * N,) + x.shape[1:], p)
    for k_ in range(2):
        np.testing.assert_allclose(dx[k_ * N:(k_ + 1) * N], ref.conv2d_grad_input(g[k_], w, x.shape, 1, p, 1, 1),
                                   **TOL[dtype])


def test_winograd_serves_3x3_layers_with_many_channels_and_nothing_else(monkeypatch):
    """The cost model sends 128-channel 3x3 layers at stride 1 to Winograd in both directions,
    and the results equal the reference; few channels, a stride, a dilation, groups, another
    kernel size, or too few tiles for a large weight (512 channels at 4x4) go elsewhere."""
    calls = []
    for name in ("conv2d_winograd", "conv2d_grad_input_winograd"):
        real = getattr(K.winograd, name)
        monkeypatch.setattr(K.winograd, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
    rng = np.random.default_rng(16)
    both = ["conv2d_winograd", "conv2d_grad_input_winograd"]
    # (C, O, size, kernel, stride, padding, dilation, groups), expected calls
    for (C, O, size, k, s, p, d, groups), expected in (((128, 128, 32, 3, 1, 1, 1, 1), both),
                                                       ((8, 8, 32, 3, 1, 1, 1, 1), []),
                                                       ((128, 128, 32, 3, 2, 1, 1, 1), []),
                                                       ((128, 128, 32, 3, 1, 2, 2, 1), []),
                                                       ((128, 128, 32, 3, 1, 1, 1, 2), []),
                                                       ((128, 128, 32, 5, 1, 2, 1, 1), []),
                                                       ((512, 512, 4, 3, 1, 1, 1, 1), [])):
        calls.clear()
        x = rng.standard_normal((1, C, size, size))
        w = rng.standard_normal((O, C // groups, k, k)) / np.sqrt(C * k * k)
        y = K.conv2d_forward(x, w, None, s, p, d, groups)
        g = rng.standard_normal(y.shape)
        dx = K.conv2d_grad_input(g, w, x.shape, s, p, d, groups)
        assert calls == expected, (C, O, size, k, s, p, d, groups)
        if expected:
            np.testing.assert_allclose(y, ref.conv2d(x, w, np.zeros(O), s, p, d, groups), rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(dx, ref.conv2d_grad_input(g, w, x.shape, s, p, d, groups), rtol=1e-10,
                                       atol=1e-10)


def test_winograd_matches_torch_in_float32():
    """A 128-channel layer that takes Winograd, against PyTorch's convolution and its input VJP:
    the tiles' float32 rounding stays within the usual tolerance."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 128, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((128, 128, 3, 3)) / 34).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    assert K._winograd_pays(w.shape, (1, 1), (1, 1), 1, 2, (16, 16), 4)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, torch.tensor(w), torch.tensor(b), 1, 1)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(K.conv2d_forward(x, w, b, 1, 1), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(K.conv2d_grad_input(g, w, x.shape, 1, 1), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
