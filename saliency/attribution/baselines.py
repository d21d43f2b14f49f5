"""Baselines: what integrated gradients starts its path from and occlusion fills its window with.

A baseline is a number (every pixel that value: 0 is black), an array broadcasting to x, or a
callable of x giving an array of x's shape, such as `Blur()`: the image blurred, which keeps its
colours and coarse layout while removing its detail (Sturmfels et al., "Visualizing the Impact of
Feature Attribution Baselines", Distill 2020).
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Blur:
    """The image under a Gaussian blur of standard deviation `sigma` pixels (default: the larger
    side / 16), each channel on its own, the edges reflected."""

    sigma: float = None

    def __call__(self, x):
        x = np.asarray(x)
        sigma = max(x.shape[-2:]) / 16 if self.sigma is None else float(self.sigma)
        if not np.isfinite(sigma) or sigma < 0:
            raise ValueError(f"the blur's sigma must be a finite number >= 0, got {self.sigma!r}")
        if sigma == 0:
            return x.copy()
        radius = int(np.ceil(3 * sigma))
        taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
        taps /= taps.sum()
        out = x.astype(np.float64)
        for axis in (-2, -1):
            size = out.shape[axis]
            pad = [(0, 0)] * out.ndim
            pad[axis] = (radius, radius)
            padded = np.pad(out, pad, mode="symmetric")
            out = sum(w * np.take(padded, np.arange(k, k + size), axis=axis) for k, w in enumerate(taps))
        return out.astype(x.dtype)


def baseline_text(value):
    """The command-line form of a baseline (`parse_baseline` reads it back), or None for an array."""
    if isinstance(value, Blur):
        return "blur" if value.sigma is None else f"blur:{value.sigma:g}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return None


def parse_baseline(text):
    """A baseline from its command-line form: a number, `blur` or `blur:SIGMA`."""
    text = str(text).strip().lower()
    if text == "blur":
        return Blur()
    if text.startswith("blur:"):
        return Blur(float(text[len("blur:"):]))
    try:
        value = float(text)
    except ValueError:
        raise ValueError("a baseline is a number (0: black), blur or blur:SIGMA") from None
    if not np.isfinite(value):
        raise ValueError("a baseline must be finite")
    return value
