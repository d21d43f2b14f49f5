"""Explicit Jacobians and finite-difference gradient checks (for small problems, in float64)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .backward import grad
from .grad_mode import no_grad
from .tensor import Tensor

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .._typing import Float64
    from .tensor import TensorLike


class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree."""


def jacobian(fn: Callable[[Tensor], Tensor], x: TensorLike) -> Tensor:
    """The full Jacobian of `fn` at `x`, shape fn(x).shape + x.shape.

    All its rows come from ONE batched backward pass: the seeds are the rows of the identity.
    """
    leaf = Tensor(np.array(x._array if isinstance(x, Tensor) else x, copy=True), requires_grad=True)
    y = fn(leaf)
    if not isinstance(y, Tensor):
        raise TypeError(f"fn must return a Tensor, got {type(y).__name__}")
    if not y.requires_grad:
        return Tensor(np.zeros(y.shape + leaf.shape, dtype=leaf.dtype))
    seeds = np.eye(y._array.size, dtype=y.dtype).reshape((y._array.size,) + y.shape)
    (rows,) = grad(y, leaf, seeds, batched=True, allow_unused=True)
    if rows is None:
        return Tensor(np.zeros(y.shape + leaf.shape, dtype=leaf.dtype))
    return Tensor(rows._array.reshape(y.shape + leaf.shape))


def _outputs(fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[Tensor, ...]:
    out = fn(*inputs)
    return (out,) if isinstance(out, Tensor) else tuple(out)


def numerical_jacobian(fn: Callable[..., Any], inputs: Sequence[Any], i: int, eps: float) -> list[Float64]:
    """d outputs / d inputs[i] by central differences; one (out.size, in.size) matrix per output."""
    tensor = inputs[i]
    original = tensor._array
    # perturb a C-ordered copy: reshape(-1) of a Fortran-ordered or read-only array is no writable view
    tensor._array = x = np.array(original, order="C", copy=True)
    flat = x.reshape(-1)
    try:
        return _central_differences(fn, inputs, flat, eps)
    finally:
        tensor._array = original


def _central_differences(fn: Callable[..., Any], inputs: Sequence[Any], flat: NDArray[Any],
                         eps: float) -> list[Float64]:
    """Columns of the Jacobian from perturbing each element of `flat`, a view of one input."""
    with no_grad():
        sizes = [o._array.size for o in _outputs(fn, inputs)]
        cols = [np.zeros((n, flat.size)) for n in sizes]
        for j in range(flat.size):
            old = flat[j]
            flat[j] = old + eps
            plus = [o._array.reshape(-1).astype(np.float64) for o in _outputs(fn, inputs)]
            flat[j] = old - eps
            minus = [o._array.reshape(-1).astype(np.float64) for o in _outputs(fn, inputs)]
            flat[j] = old
            for col, p, m in zip(cols, plus, minus):
                col[:, j] = (p - m) / (2 * eps)
    return cols


def analytical_jacobian(fn: Callable[..., Any], inputs: Sequence[Any], i: int, batched: bool) -> list[Float64]:
    """d outputs / d inputs[i] by backward passes: one per output element, or one batched pass."""
    outs = _outputs(fn, inputs)
    x = inputs[i]
    mats: list[Float64] = []
    for o in outs:
        n = o._array.size
        if not o.requires_grad:
            mats.append(np.zeros((n, x._array.size)))
            continue
        if batched:
            # seed k is scale[k] * e_order[k]: rows of the identity, shuffled and scaled, so that
            # a VJP that mixes up its seed dimension (flips, sums or transposes it) shows
            order = np.random.default_rng(0).permutation(n)
            scale = 1 + np.arange(n) / n
            seeds = (np.eye(n)[order] * scale[:, None]).astype(o.dtype).reshape((n,) + o.shape)
            (rows,) = grad(o, x, seeds, retain_graph=True, batched=True, allow_unused=True)
            mat = np.zeros((n, x._array.size))
            if rows is not None:
                mat[order] = rows._array.reshape(n, -1) / scale[:, None]
            mats.append(mat)
            continue
        dense = np.zeros((n, x._array.size))
        for k in range(n):
            seed = np.zeros(n, dtype=o.dtype)
            seed[k] = 1
            (row,) = grad(o, x, seed.reshape(o.shape), retain_graph=True, allow_unused=True)
            if row is not None:
                dense[k] = row._array.reshape(-1)
        mats.append(dense)
    return mats


def gradcheck(fn: Callable[..., Any], inputs: Tensor | Sequence[Any], *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, check_batched: bool = True, raise_exception: bool = True) -> bool:
    """Compare the gradients of fn(*inputs) with central finite differences.

    inputs: a Tensor or a sequence of Tensors; those with requires_grad=True are checked and
    should be float64. With check_batched, the K-seed batched pass must also give the same rows.
    Returns True, or raises GradcheckError naming the input and the largest mismatch.
    """
    args = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    checked = [i for i, t in enumerate(args) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck needs at least one input with requires_grad=True")
    for i in checked:
        if args[i].dtype != np.float64:
            raise TypeError(f"gradcheck input {i} has dtype {args[i].dtype}; finite differences need float64 "
                            f"(pass tensors made with dtype=np.float64 or call .double() on leaves)")
    for i in checked:
        numeric = numerical_jacobian(fn, args, i, eps)
        passes = [("backward", analytical_jacobian(fn, args, i, batched=False))]
        if check_batched:
            passes.append(("batched backward", analytical_jacobian(fn, args, i, batched=True)))
        for label, analytic in passes:
            for k, (a, n) in enumerate(zip(analytic, numeric)):
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    err = np.abs(a - n)
                    r, c = np.unravel_index(np.argmax(err), err.shape)
                    msg = (f"{label} gradient of output {k} with respect to input {i} differs from finite "
                           f"differences: at output element {r}, input element {c}, analytical {a[r, c]:.6g} vs "
                           f"numerical {n[r, c]:.6g} (max abs error {err.max():.3g}, atol={atol}, rtol={rtol})")
                    if raise_exception:
                        raise GradcheckError(msg)
                    return False
    return True
