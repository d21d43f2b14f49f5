"""`Style`: how a map is drawn, as one value (sign, channel reduction, clipping, overlay, colormap).

The command line builds one from its options and hands it on; `heatmap`, `overlay` and the
figures take the same settings as keywords (`style.heatmap_kwargs()`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .errors import VizError

SIGNS = ("abs", "positive", "negative", "all")
REDUCES = ("sum", "max_abs", "rgb")


@dataclass(frozen=True)
class Style:
    """How to draw a map: `sign` ("abs", "positive", "negative", "all"), `reduce` ("sum",
    "max_abs", "rgb"), `clip_percentile` (the percentile of the magnitudes that maps to full
    colour), `overlay` (draw the map over the image, at `alpha`), `cmap` (a matplotlib colormap
    name; None: the default for the sign)."""

    sign: str = "abs"
    reduce: str = "sum"
    clip_percentile: float = 99
    overlay: bool = False
    alpha: float = 0.5
    cmap: str | None = None

    def __post_init__(self) -> None:
        if self.sign not in SIGNS:
            raise VizError(f"unknown sign {self.sign!r}; choose one of: {', '.join(SIGNS)}")
        if self.reduce not in REDUCES:
            raise VizError(f"unknown reduce {self.reduce!r}; choose one of: {', '.join(REDUCES)}")
        if isinstance(self.clip_percentile, bool) or not (0 < float(self.clip_percentile) <= 100):
            raise VizError(f"clip_percentile must be a number in (0, 100], got {self.clip_percentile!r}")
        if isinstance(self.alpha, bool) or not np.isfinite(self.alpha) or not 0 <= self.alpha <= 1:
            raise VizError(f"alpha must be a number in [0, 1], got {self.alpha!r}")

    def heatmap_kwargs(self) -> dict[str, Any]:
        """The keywords of `viz.heatmap` and `viz.overlay` for this style (`alpha` only with overlay)."""
        out: dict[str, Any] = {"sign": self.sign, "reduce": self.reduce, "clip_percentile": self.clip_percentile,
                               "cmap": self.cmap}
        if self.overlay:
            out["alpha"] = self.alpha
        return out

    def record(self) -> dict[str, Any]:
        """The style as JSON values (a batch store keeps it)."""
        return asdict(self)
