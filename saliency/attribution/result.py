"""`Attribution`: what every method returns (the map, and how it was made)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

if TYPE_CHECKING:
    import os
    from pathlib import Path

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


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
    input: the image(s) x the map is of, as the method took them (cast to the map's dtype).
    classes: the model's class names, where it has them (for captions).

    It shows itself: in a notebook as the picture `saliency map` draws (the image, a dense output
    beside it, the map); `.figure()`, `.show()`, `.plot(ax)` and `.save(path)` draw it too, each
    taking `index=` (the image of a batch) and a `viz.Style` or its fields (`sign=`, `reduce=`,
    `overlay=`, ...).
    """

    map: np.ndarray
    seed: Any  # a saliency.attribution.seeds.Seed
    method: str
    output: np.ndarray | None  # None for a map read from a store (the model is not run)
    seconds: float
    extras: dict[str, Any] = field(default_factory=dict)
    input: np.ndarray | None = None
    classes: list[str] | None = None

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        if dtype is not None and dtype != self.map.dtype:
            return self.map.astype(dtype)
        return self.map.copy() if copy else self.map

    @property
    def shape(self) -> tuple[int, ...]:
        """map.shape: the input's shape, with a leading K for K batched seeds (one channel for Grad-CAM)."""
        return self.map.shape

    @property
    def completeness_error(self) -> Any:
        """sum(map) - (f(x) - f(baseline)) per image (integrated gradients only)."""
        try:
            return self.extras["completeness_error"]
        except KeyError:
            raise AttributeError(f"{self.method} does not report a completeness error; "
                                 f"integrated_gradients does") from None

    def figure(self, index: int = 0, style: Any = None, **style_fields: Any) -> Figure:
        """The matplotlib Figure of image `index`: the image, a dense output beside it, the map
        (`viz.attribution_figure`), drawn in `style` (a `viz.Style`) or these of its fields."""
        from .. import viz

        return viz.attribution_figure(self, index=index, classes=self.classes, style=_style(style, style_fields))

    def plot(self, ax: Optional[Axes] = None, index: int = 0, seed_index: int = 0, style: Any = None,
             **style_fields: Any) -> Axes:
        """Draw the map of image `index` (seed `seed_index` of K) on a matplotlib Axes (default:
        pyplot's current one), over the image with overlay=True; returns the Axes."""
        from .. import viz

        return viz.plot_attribution(self, ax, index=index, seed_index=seed_index, style=_style(style, style_fields))

    def show(self, index: int = 0, style: Any = None, **style_fields: Any) -> None:
        """Show `figure(index, ...)` in a window (or inline in a notebook) through pyplot."""
        import matplotlib.pyplot as plt

        fig = self.figure(index, style, **style_fields)
        manager: Any = plt.figure(figsize=fig.get_size_inches()).canvas.manager  # a pyplot window to hold it
        manager.canvas.figure = fig
        fig.set_canvas(manager.canvas)
        plt.show()

    def save(self, path: str | os.PathLike[str], index: int = 0, style: Any = None,
             **style_fields: Any) -> Path:
        """Write `figure(index, ...)` to `path` (.png, .pdf or .svg); returns the path."""
        from .. import viz

        return viz.save(self.figure(index, style, **style_fields), path)

    def _repr_png_(self) -> bytes:
        """The PNG bytes a notebook shows for this result: `figure()` of its first image."""
        from .. import viz

        return viz.png_bytes(self.figure())

    def __repr__(self) -> str:
        m = self.map
        lo, hi = (float(m.min()), float(m.max())) if m.size else (0.0, 0.0)
        extra = "".join(f", {k}={_short(v)}" for k, v in self.extras.items())
        output: Any = self.output  # np.shape(None) is ()
        return (f"Attribution(method={self.method!r}, seed='{self.seed}', map={m.shape} {m.dtype} "
                f"in [{lo:.3g}, {hi:.3g}], output={np.shape(output)}, seconds={self.seconds:.3g}{extra})")


def _short(value: Any) -> str:
    a = np.asarray(value)
    if a.dtype.kind == "f" and a.size <= 4:
        return np.array2string(a, precision=3, separator=", ")
    if a.size > 4:
        return f"<{a.dtype} {a.shape}>"
    return repr(value)


def _style(style: Any, fields: dict[str, Any]) -> Any:
    """A `viz.Style` from a style and/or its fields (fields override the style's)."""
    from dataclasses import replace

    from ..viz import Style

    base = Style() if style is None else style
    return replace(base, **fields) if fields else base
