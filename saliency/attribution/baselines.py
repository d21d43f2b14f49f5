"""Baselines: what integrated gradients starts its path from and occlusion fills its window with, and
the sets of baselines DeepLiftShap and GradientShap average over.

A baseline is a number (every pixel that value: 0 is black), an array broadcasting to x, or a
callable of x giving an array of x's shape, such as `Blur()`: the image blurred, which keeps its
colours and coarse layout while removing its detail (Sturmfels et al., "Visualizing the Impact of
Feature Attribution Baselines", Distill 2020).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class Blur:
    """The image under a Gaussian blur of standard deviation `sigma` pixels (default: the larger
    side / 16), each channel on its own, the edges reflected."""

    sigma: float | None = None

    def __call__(self, x: ArrayLike) -> np.ndarray:
        x = np.asarray(x)
        sigma = max(x.shape[-2:]) / 16 if self.sigma is None else float(self.sigma)
        if not np.isfinite(sigma) or sigma < 0:
            raise ValueError(f"the blur's sigma must be a finite number >= 0, got {self.sigma!r}")
        if sigma == 0:
            return x.copy()
        radius = int(np.ceil(3 * sigma))
        taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
        taps /= taps.sum()
        out: Any = x.astype(np.float64)
        for axis in (-2, -1):
            size = out.shape[axis]
            pad = [(0, 0)] * out.ndim
            pad[axis] = (radius, radius)
            padded = np.pad(out, pad, mode="symmetric")
            out = sum(w * np.take(padded, np.arange(k, k + size), axis=axis) for k, w in enumerate(taps))
        return out.astype(x.dtype)


def baseline_text(value: Any) -> Optional[str]:
    """The command-line form of a baseline (`parse_baseline` reads it back), or None for an array."""
    if isinstance(value, Blur):
        return "blur" if value.sigma is None else f"blur:{value.sigma:g}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return None


def parse_baseline(text: Any) -> Blur | float:
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


@dataclass(frozen=True)
class Uniform:
    """`count` images of uniform noise in [low, high), drawn from a generator seeded with `seed` (the
    same images at every call): a set of baselines for deeplift_shap and gradient_shap."""

    count: int = 16
    low: float = 0.0
    high: float = 1.0
    seed: int = 0

    def __call__(self, x: ArrayLike) -> np.ndarray:
        x = np.asarray(x)
        if isinstance(self.count, bool) or not isinstance(self.count, (int, np.integer)) or self.count < 1:
            raise ValueError(f"Uniform needs a positive count of baselines, got {self.count!r}")
        rng = np.random.default_rng(self.seed)
        return rng.uniform(self.low, self.high, (int(self.count),) + x.shape[-3:]).astype(x.dtype)


def baselines_like(baselines: Any, xs: np.ndarray) -> np.ndarray:
    """A set of baselines as an array (B, C, H, W) of x's dtype, for images xs (N, C, H, W): an array
    (B, C, H, W) (or one image (C, H, W)), a callable of xs giving one (`Uniform(16)`), or a list of
    baselines as integrated gradients takes them (numbers, images, `Blur()` of the first image)."""
    b = baselines._array if hasattr(baselines, "_array") else baselines
    if callable(b):
        b = b(xs)
    elif isinstance(b, (list, tuple)):
        b = np.stack([np.broadcast_to(np.asarray(item(xs[:1])[0] if callable(item) else item, xs.dtype),
                                      xs.shape[1:]) for item in b])
    arr = np.asarray(b, dtype=xs.dtype)
    if arr.shape == xs.shape[1:]:
        arr = arr[None]
    if arr.ndim != 4 or arr.shape[1:] != xs.shape[1:] or len(arr) == 0:
        raise ValueError(f"baselines must be images of the input's shape {xs.shape[1:]} stacked as (B, C, H, W), "
                         f"got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("baselines hold NaN or infinite values")
    return np.ascontiguousarray(arr)


def baselines_text(value: Any) -> Optional[str]:
    """The command-line form of a set of baselines (`parse_baselines` reads it back), or None."""
    if isinstance(value, Uniform) and (value.low, value.high, value.seed) == (0.0, 1.0, 0):
        return f"uniform:{value.count}"
    if isinstance(value, (list, tuple)):
        texts = [baseline_text(v) for v in value]
        return None if None in texts else ",".join(t for t in texts if t is not None)
    return None


def parse_baselines(text: Any) -> Uniform | list[Blur | float]:
    """A set of baselines from its command-line form: `uniform:COUNT` (noise images in [0, 1)), or a
    comma-separated list of baselines (numbers, `blur`, `blur:SIGMA`): `0,1` is a black and a white
    image."""
    text = str(text).strip().lower()
    if text.startswith("uniform:"):
        try:
            count = int(text[len("uniform:"):])
        except ValueError:
            raise ValueError("uniform:COUNT takes a whole number of images") from None
        if count < 1:
            raise ValueError("uniform:COUNT needs at least one image")
        return Uniform(count)
    try:
        return [parse_baseline(item) for item in text.split(",")]
    except ValueError:
        raise ValueError("baselines are uniform:COUNT or a comma-separated list of numbers, blur or "
                         "blur:SIGMA") from None
