"""Batch normalization over NCHW (per channel) and its VJPs, training and eval mode.

Training mode normalizes with the batch statistics (`batch_norm_stats`, biased variance) and
its VJP differentiates through them; eval mode uses running statistics, constants for the VJP.
Updating the running statistics (PyTorch: unbiased variance, momentum) is the caller's job.
Statistics are accumulated in float64; kernels loop over channels or (n, c) planes.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numba import prange

from ._jit import njit

from .conv2d import _fold_seeds, _float_array

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .._typing import FloatArray, Float64


@njit(cache=True)
def _channel_stats(x: FloatArray, mean: FloatArray, var: FloatArray) -> None:
    """x (N, C, L): per-channel mean and biased variance, two passes in float64."""
    N, C, L = x.shape
    for c in prange(C):
        s = 0.0
        for n in range(N):
            for i in range(L):
                s += x[n, c, i]
        m = s / (N * L)
        q = 0.0
        for n in range(N):
            for i in range(L):
                d = x[n, c, i] - m
                q += d * d
        mean[c] = m
        var[c] = q / (N * L)


@njit(cache=True, fastmath={"reassoc", "contract"})
def _normalize(x: FloatArray, out: FloatArray, mean: FloatArray, scale: FloatArray, shift: FloatArray) -> None:
    """out[n, c] = scale[c] * (x[n, c] - mean[c]) + shift[c]; x, out (N, C, L)."""
    N, C, L = x.shape
    for t in prange(N * C):
        n = t // C
        c = t % C
        for i in range(L):
            out[n, c, i] = scale[c] * (x[n, c, i] - mean[c]) + shift[c]


@njit(cache=True)
def _grad_sums(g: FloatArray, x: FloatArray, mean: FloatArray, sg: FloatArray, sgx: FloatArray) -> None:
    """Per seed k and channel c: sg = sum g, sgx = sum g * (x - mean), over (n, i); g (K, N, C, L)."""
    K, N, C, L = g.shape
    for t in prange(K * C):
        k = t // C
        c = t % C
        a = 0.0
        b = 0.0
        for n in range(N):
            for i in range(L):
                a += g[k, n, c, i]
                b += g[k, n, c, i] * (x[n, c, i] - mean[c])
        sg[k, c] = a
        sgx[k, c] = b


@njit(cache=True, fastmath={"reassoc", "contract"})
def _grad_x(g: FloatArray, x: FloatArray, dx: FloatArray, mean: FloatArray, a: FloatArray, bk: FloatArray,
            ck: FloatArray) -> None:
    """dx[k, n, c] = a[c] * g[k, n, c] + bk[k, c] * (x[n, c] - mean[c]) + ck[k, c]."""
    K, N, C, L = g.shape
    for t in prange(K * N * C):
        c = t % C
        n = (t // C) % N
        k = t // (C * N)
        for i in range(L):
            dx[k, n, c, i] = a[c] * g[k, n, c, i] + bk[k, c] * (x[n, c, i] - mean[c]) + ck[k, c]


def _check_x(x: ArrayLike) -> FloatArray:
    x = _float_array(x, "x")
    if x.ndim != 4:
        raise ValueError(f"x must have shape (N, C, H, W), got {x.shape!r}")
    return x


def _per_channel(v: ArrayLike | None, C: int, default: float, name: str) -> Float64:
    if v is None:
        return np.full(C, default, np.float64)
    v = np.asarray(v, np.float64).reshape(-1)
    if v.shape[0] != C:
        raise ValueError(f"{name} must have {C} entries (one per channel), got shape {v.shape!r}")
    return v


def batch_norm_stats(x: FloatArray) -> tuple[Float64, Float64]:
    """(N, C, H, W) -> (mean (C,), biased variance (C,)) in float64, over N, H, W."""
    x = _check_x(x)
    N, C = x.shape[:2]
    mean, var = np.empty(C), np.empty(C)
    _channel_stats(x.reshape(N, C, -1), mean, var)
    return mean, var


def batch_norm_forward(x: FloatArray, mean: ArrayLike, var: ArrayLike, weight: ArrayLike | None = None,
                       bias: ArrayLike | None = None, eps: float = 1e-5) -> FloatArray:
    """y = weight * (x - mean) / sqrt(var + eps) + bias per channel; batch stats (training) or running stats (eval)."""
    x = _check_x(x)
    N, C = x.shape[:2]
    mean, var = _per_channel(mean, C, 0.0, "mean"), _per_channel(var, C, 1.0, "var")
    scale = _per_channel(weight, C, 1.0, "weight") / np.sqrt(var + eps)
    out = np.empty_like(x)
    dt = x.dtype
    _normalize(x.reshape(N, C, -1), out.reshape(N, C, -1), mean.astype(dt), scale.astype(dt),
               _per_channel(bias, C, 0.0, "bias").astype(dt))
    return out


def _grad(g: FloatArray, x: FloatArray, mean: ArrayLike, var: ArrayLike, weight: ArrayLike | None, eps: float,
          training: bool) -> tuple[FloatArray, FloatArray, FloatArray]:
    x = _check_x(x)
    N, C = x.shape[:2]
    g2, seeds = _fold_seeds(g, 4, "g")
    if g2.shape[1:] != x.shape[1:] or g2.shape[0] != N * math.prod(seeds):
        raise ValueError(f"g must have shape (*seeds, {', '.join(map(str, x.shape))}), got {np.shape(g)!r}")
    x = x.astype(g2.dtype, copy=False)
    g4 = g2.reshape(-1, N, C, x.shape[2] * x.shape[3])
    K, M = g4.shape[0], N * x.shape[2] * x.shape[3]
    mean, var = _per_channel(mean, C, 0.0, "mean"), _per_channel(var, C, 1.0, "var")
    invstd = 1.0 / np.sqrt(var + eps)
    gamma = _per_channel(weight, C, 1.0, "weight")
    sg, sgx = np.empty((K, C)), np.empty((K, C))
    x3 = x.reshape(N, C, -1)
    _grad_sums(g4, x3, mean.astype(g2.dtype), sg, sgx)
    a = gamma * invstd
    if training:  # the batch statistics depend on x too
        bk, ck = -a * invstd ** 2 * sgx / M, -a * sg / M
    else:
        bk, ck = np.zeros((K, C)), np.zeros((K, C))
    dx = np.empty(g4.shape, g2.dtype)
    dt = g2.dtype
    _grad_x(g4, x3, dx, mean.astype(dt), a.astype(dt), bk.astype(dt), ck.astype(dt))
    return (dx.reshape(seeds + x.shape), (sgx * invstd).astype(dt).reshape(seeds + (C,)),
            sg.astype(dt).reshape(seeds + (C,)))


def batch_norm_grad_train(g: FloatArray, x: FloatArray, mean: ArrayLike, var: ArrayLike,
                          weight: ArrayLike | None = None,
                          eps: float = 1e-5) -> tuple[FloatArray, FloatArray, FloatArray]:
    """VJP of training-mode batch norm (mean, var = the batch's, from batch_norm_stats).

    g (*seeds, N, C, H, W) -> (dx (*seeds, N, C, H, W), dweight (*seeds, C), dbias (*seeds, C)).
    """
    return _grad(g, x, mean, var, weight, eps, True)


def batch_norm_grad_eval(g: FloatArray, x: FloatArray, mean: ArrayLike, var: ArrayLike, weight: ArrayLike | None = None,
                         eps: float = 1e-5) -> tuple[FloatArray, FloatArray, FloatArray]:
    """VJP of eval-mode batch norm (mean, var = running statistics, constants); shapes as batch_norm_grad_train."""
    return _grad(g, x, mean, var, weight, eps, False)
