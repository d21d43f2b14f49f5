"""Plain NumPy references for the kernels (vectorized over the batch, loops only over kernel taps),
and the directional finite-difference check."""
import numpy as np


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _taps(H, W, KH, KW, s, p, d):
    """For each kernel tap: the slice of the padded input it reads, as (ky, kx, rows, cols)."""
    OH = (H + 2 * p[0] - d[0] * (KH - 1) - 1) // s[0] + 1
    OW = (W + 2 * p[1] - d[1] * (KW - 1) - 1) // s[1] + 1
    for ky in range(KH):
        for kx in range(KW):
            yield ky, kx, slice(ky * d[0], ky * d[0] + (OH - 1) * s[0] + 1, s[0]), \
                slice(kx * d[1], kx * d[1] + (OW - 1) * s[1] + 1, s[1])


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    s, p, d = pair(stride), pair(padding), pair(dilation)
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    Og = O // groups
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    out = None
    for ky, kx, rs, cs in _taps(H, W, KH, KW, s, p, d):
        parts = [np.einsum("nchw,oc->nohw", xp[:, gi * Cg:(gi + 1) * Cg, rs, cs], w[gi * Og:(gi + 1) * Og, :, ky, kx])
                 for gi in range(groups)]
        term = np.concatenate(parts, axis=1)
        out = term if out is None else out + term
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out


def conv2d_grad_input(g, w, x_shape, stride=1, padding=0, dilation=1, groups=1):
    """The adjoint of conv2d as a scatter (a different formulation from the kernels' correlation)."""
    s, p, d = pair(stride), pair(padding), pair(dilation)
    N, C, H, W = x_shape
    O, Cg, KH, KW = w.shape
    Og = O // groups
    dxp = np.zeros((N, C, H + 2 * p[0], W + 2 * p[1]), g.dtype)
    for ky, kx, rs, cs in _taps(H, W, KH, KW, s, p, d):
        for gi in range(groups):
            dxp[:, gi * Cg:(gi + 1) * Cg, rs, cs] += np.einsum(
                "nohw,oc->nchw", g[:, gi * Og:(gi + 1) * Og], w[gi * Og:(gi + 1) * Og, :, ky, kx])
    return dxp[:, :, p[0]:p[0] + H, p[1]:p[1] + W]


def conv2d_grad_weight(g, x, w_shape, stride=1, padding=0, dilation=1, groups=1):
    s, p, d = pair(stride), pair(padding), pair(dilation)
    N, C, H, W = x.shape
    O, Cg, KH, KW = w_shape
    Og = O // groups
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    dw = np.zeros(w_shape, g.dtype)
    for ky, kx, rs, cs in _taps(H, W, KH, KW, s, p, d):
        for gi in range(groups):
            dw[gi * Og:(gi + 1) * Og, :, ky, kx] = np.einsum(
                "nohw,nchw->oc", g[:, gi * Og:(gi + 1) * Og], xp[:, gi * Cg:(gi + 1) * Cg, rs, cs])
    return dw


def _windows(x, k, s, p, fill):
    """Stack of the pooling windows' taps: (kh*kw, N, C, OH, OW), taps in row-major scan order."""
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=fill)
    H, W = x.shape[2:]
    return np.stack([xp[:, :, rs, cs] for _, _, rs, cs in _taps(H, W, k[0], k[1], s, p, (1, 1))])


def max_pool2d(x, kernel, stride, padding):
    """(out, flat argmax index into each H*W plane, first max in scan order)."""
    k, s, p = pair(kernel), pair(stride), pair(padding)
    win = _windows(x, k, s, p, -np.inf)
    arg = np.argmax(win, axis=0)
    out = np.take_along_axis(win, arg[None], axis=0)[0]
    OH, OW = out.shape[2:]
    iy = np.arange(OH)[:, None] * s[0] - p[0] + arg // k[1]
    ix = np.arange(OW)[None, :] * s[1] - p[1] + arg % k[1]
    return out, iy * x.shape[3] + ix


def max_pool2d_grad_input(g, idx, x_shape):
    N, C, H, W = x_shape
    dx = np.zeros((N, C, H * W), g.dtype)
    n, c = np.meshgrid(np.arange(N), np.arange(C), indexing="ij")
    np.add.at(dx, (n[:, :, None], c[:, :, None], idx.reshape(N, C, -1)), g.reshape(N, C, -1))
    return dx.reshape(x_shape)


def avg_pool2d(x, kernel, stride, padding):
    k, s, p = pair(kernel), pair(stride), pair(padding)
    return _windows(x, k, s, p, 0.0).sum(axis=0) / (k[0] * k[1])


def adaptive_bins(size, n_out):
    return [(int(np.floor(i * size / n_out)), int(np.ceil((i + 1) * size / n_out))) for i in range(n_out)]


def adaptive_avg_pool2d(x, out_size):
    oh, ow = pair(out_size)
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    for i, (a, b) in enumerate(adaptive_bins(x.shape[2], oh)):
        for j, (c, d) in enumerate(adaptive_bins(x.shape[3], ow)):
            out[:, :, i, j] = x[:, :, a:b, c:d].mean(axis=(2, 3))
    return out


def upsample_nearest(x, s):
    return x.repeat(s, axis=2).repeat(s, axis=3)


def bilinear_matrix(size, s):
    """(size*s, size) interpolation matrix, align_corners=False."""
    A = np.zeros((size * s, size))
    for i in range(size * s):
        src = max((i + 0.5) / s - 0.5, 0.0)
        i0 = int(np.floor(src))
        i1 = min(i0 + 1, size - 1)
        A[i, i0] += 1 - (src - i0)
        A[i, i1] += src - i0
    return A


def upsample_bilinear(x, s):
    Ah, Aw = bilinear_matrix(x.shape[2], s), bilinear_matrix(x.shape[3], s)
    return np.einsum("ih,nchw,jw->ncij", Ah, x, Aw)


def batch_norm_train(x, weight, bias, eps):
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    return weight.reshape(1, -1, 1, 1) * (x - mean) / np.sqrt(var + eps) + bias.reshape(1, -1, 1, 1)


def directional_fd(f, x, u, eps=1e-6):
    """(f(x + eps u) - f(x - eps u)) / 2 eps: the Jacobian of f at x applied to u."""
    return (f(x + eps * u) - f(x - eps * u)) / (2 * eps)


def check_vjp(f, vjp, x, rng, rtol=1e-6, atol=1e-8):
    """The identity u . VJP(v) == v . (f(x + eps u) - f(x - eps u)) / 2 eps for random u, v (float64)."""
    u = rng.standard_normal(x.shape)
    y = f(x)
    v = rng.standard_normal(y.shape)
    lhs = np.vdot(v, directional_fd(f, x, u))
    rhs = np.vdot(vjp(v), u)
    np.testing.assert_allclose(rhs, lhs, rtol=rtol, atol=atol)
