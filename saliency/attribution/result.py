"""`Attribution`: what every method returns (the map, and how it was made)."""
from dataclasses import dataclass, field

import numpy as np


@dataclass(repr=False)
class Attribution:
    """One attribution result.

    map: ndarray of the input's shape, (N, C, H, W) or (C, H, W), in the input's float dtype;
        for a batched seed (K seeds) a leading K dimension, (K, N, C, H, W) or (K, C, H, W).
        Grad-CAM maps have one channel: (N, 1, H, W) (see `gradcam`).
    seed: the seed used, with anything output-dependent fixed (predicted() becomes the argmax classes).
    method: the method's name, e.g. "integrated_gradients".
    output: the model output at x (without the batch dimension when x had none).
    seconds: wall time of the call.
    extras: method-specific results, e.g. "completeness_error" for integrated gradients.
    """

    map: np.ndarray
    seed: object
    method: str
    output: np.ndarray
    seconds: float
    extras: dict = field(default_factory=dict)

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and dtype != self.map.dtype:
            return self.map.astype(dtype)
        return self.map.copy() if copy else self.map

    @property
    def shape(self):
        return self.map.shape

    @property
    def completeness_error(self):
        """sum(map) - (f(x) - f(baseline)) per image (integrated gradients only)."""
        try:
            return self.extras["completeness_error"]
        except KeyError:
            raise AttributeError(f"{self.method} does not report a completeness error; "
                                 f"integrated_gradients does") from None

    def __repr__(self):
        m = self.map
        lo, hi = (float(m.min()), float(m.max())) if m.size else (0.0, 0.0)
        extra = "".join(f", {k}={_short(v)}" for k, v in self.extras.items())
        return (f"Attribution(method={self.method!r}, seed='{self.seed}', map={m.shape} {m.dtype} "
                f"in [{lo:.3g}, {hi:.3g}], output={np.shape(self.output)}, seconds={self.seconds:.3g}{extra})")


def _short(value):
    a = np.asarray(value)
    if a.dtype.kind == "f" and a.size <= 4:
        return np.array2string(a, precision=3, separator=", ")
    if a.size > 4:
        return f"<{a.dtype} {a.shape}>"
    return repr(value)
