"""How tensors and gradients are shown as text: PyTorch-style reprs and short summaries."""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray


def format_array(a: ArrayLike | None, precision: int = 4) -> str:
    """A short, readable rendering of a gradient or value (4 significant digits)."""
    if a is None:
        return "None"
    arr = np.asarray(a)
    if arr.size <= 12:
        if arr.ndim == 0:
            return f"{arr.item():.{precision}g}"
        return np.array2string(arr, separator=", ", max_line_width=1000,
                               formatter={"float_kind": lambda v: f"{v:.{precision}g}"}).replace("\n", "")
    return f"<{arr.dtype} {arr.shape}: min {arr.min():.{precision}g}, max {arr.max():.{precision}g}, " \
        f"sum {arr.sum():.{precision}g}>"


def format_data(a: NDArray[Any]) -> str:
    """The array as PyTorch prints it: floats with 4 decimals ('1.5000'), '1.' when all values are
    whole, scientific when they span more than 1000x; equal widths; long tensors summarized."""
    opts: dict[str, Any] = dict(separator=", ", prefix="tensor(", max_line_width=80, threshold=1000, edgeitems=3)
    if a.dtype.kind != "f":
        return np.array2string(a, **opts)
    shown = a
    if a.size > 1000:  # only the elements that will be printed decide the format
        for axis, n in enumerate(a.shape):
            if n > 6:
                shown = np.take(shown, list(range(3)) + list(range(n - 3, n)), axis=axis)
    values = shown[np.isfinite(shown) & (shown != 0)].astype(np.float64)
    big, small = (np.abs(values).max(), np.abs(values).min()) if values.size else (0.0, 0.0)
    if np.all(values == np.round(values)):
        fmt = "{:.4e}" if big > 1e8 else "{:.0f}."
    else:
        fmt = "{:.4e}" if big / small > 1000 or big > 1e8 or small < 1e-4 else "{:.4f}"

    def text(v: float | np.floating[Any]) -> str:
        return fmt.format(v) if np.isfinite(v) else str(float(v))

    width = max((len(text(v)) for v in values), default=0)  # zeros, nan and inf do not widen
    return np.array2string(a, formatter={"float_kind": lambda v: text(v).rjust(width)}, **opts)
