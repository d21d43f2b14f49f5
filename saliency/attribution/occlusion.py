"""Occlusion (Zeiler & Fergus, arXiv:1311.2901): a gradient-free check of what the output depends on."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ._core import Call, baseline_like, resolve, tile, weighted
from .baselines import baseline_text, parse_baseline
from .registry import Option, method

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model, Progress
    from .result import Attribution
    from .seeds import Seed


def _pair(value: Any, name: str) -> tuple[int, int]:
    pair = (value, value) if np.ndim(value) == 0 else tuple(value)
    if len(pair) != 2 or any(isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1 for p in pair):
        raise ValueError(f"{name} must be a positive int or a pair (rows, cols) of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def _starts(size: int, window: int, stride: int) -> list[int]:
    """Window starts every `stride` pixels, plus one flush with the far edge so every pixel is covered."""
    starts = list(range(0, size - window + 1, stride))
    if starts[-1] + window < size:
        starts.append(size - window)
    return starts


@method(options=(Option("window", int, "side of the square window occluded, in pixels", minimum=1),
                 Option("stride", int, "pixels between one window and the next", minimum=1),
                 Option("baseline", parse_baseline, "what fills the window: a number (0: black) or blur (the "
                        "image blurred)", text=baseline_text)),
        map_channels="input")
def occlusion(model: Model, x: TensorLike, seed: Optional[Seed] = None, *, window: Any = 8, stride: Any = 4,
              baseline: Any = 0.0, batch: Optional[int] = None, progress: Optional[Progress] = None) -> Attribution:
    """For each window position, F(x) - F(x with the window replaced by `baseline`), where F is
    the seed-weighted output sum(v * y) of each image; each pixel gets the mean of that change
    over the windows that cover it.

    Args:
      window: window size, an int or (rows, cols) (clipped to the image); it spans all channels,
        so the map has the same value in every channel.
      stride: step between windows, an int or (rows, cols); a last window flush with the bottom
        and right edges is added where the stride would leave pixels uncovered.
      baseline: a number, an array broadcastable to x, or a callable of x (`baselines.Blur()`),
        that fills the occluded window.
      batch: most images per forward pass (occluded copies of all N images run in chunks);
        default from the same input budget as smoothgrad.
      progress: optional callable(done, total) called after each chunk, counting windows.
    """
    wh, ww = _pair(window, "window")
    sh, sw = _pair(stride, "stride")
    call = Call(model, x)
    xs = call.x
    n, h, w = call.n, xs.shape[-2], xs.shape[-1]
    wh, ww = min(wh, h), min(ww, w)
    y = call.forward(xs)
    seed, v = resolve(seed, y, model)
    batched = seed.count is not None
    f0 = weighted(y, v, batched)  # ([K,] N)
    b = baseline_like(baseline, xs)
    boxes = [(r, c) for r in _starts(h, wh, sh) for c in _starts(w, ww, sw)]

    total = np.zeros(f0.shape + (h, w))
    count = np.zeros((h, w))
    per = call.chunk(batch, len(boxes))
    for start in range(0, len(boxes), per):
        chunk = boxes[start:start + per]
        m = len(chunk)
        images = np.repeat(xs[None], m, axis=0)
        for j, (r, c) in enumerate(chunk):
            images[j, :, :, r:r + wh, c:c + ww] = b[:, :, r:r + wh, c:c + ww]
        out = call.forward(images.reshape((m * n,) + xs.shape[1:]))
        drop = f0[..., None, :] - weighted(out, tile(v, m, batched), batched).reshape(f0.shape[:-1] + (m, n))
        for j, (r, c) in enumerate(chunk):
            total[..., r:r + wh, c:c + ww] += drop[..., j, :, None, None]
            count[r:r + wh, c:c + ww] += 1
        if progress is not None:
            progress(start + m, len(boxes))
    amap = np.broadcast_to((total / count)[..., None, :, :], f0.shape + xs.shape[1:])
    return call.finish("occlusion", amap, seed, y, {"window": (wh, ww), "stride": (sh, sw), "windows": len(boxes)})
