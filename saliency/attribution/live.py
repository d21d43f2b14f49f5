"""One model's forward pass on one image, kept, and the gradient map of any seed from it.

    live = Live(model, x)                 # the forward pass, its graph kept
    live.gradient(seeds.pixel(100, 40))   # one backward pass through the kept graph (cropped for a pixel)
    live.gradient(seeds.classes(range(5)))  # K seeds, one batched pass

Each map costs one backward pass: for a pixel or region seed of a dense output, the cropped one,
milliseconds where a whole map costs the forward pass again. The graph is kept until the Live
is dropped. Several threads may ask at once: their backward passes run one at a time on the
shared graph, and `latest` lets a caller skip a request that a newer one has superseded.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..autograd.engine import _count_dependencies
from ..autograd.trace import render_graph, trace
from ._core import Call, resolve, seeds_per_pass

if TYPE_CHECKING:
    from ..autograd.tensor import TensorLike
    from ._core import Model
    from .result import Attribution
    from .seeds import Seed

# The most nodes `work` shows: beyond that its text is too long to read
WORK_NODES = 200


class Live:
    """`model` (as the methods take it) run once on `x` ((C, H, W) or (1, C, H, W)); `output` is its
    output (an ndarray with the batch dimension)."""

    def __init__(self, model: Model, x: TensorLike) -> None:
        self.model, self.x = model, x
        self._call = Call(model, x)
        if self._call.n != 1:
            raise ValueError(f"Live keeps the forward pass of one image; x holds {self._call.n}")
        self._xt, self._y = self._call.forward(self._call.x, grad=True)
        self.output: np.ndarray = self._y._array
        self._lock = threading.Lock()
        self._tickets: dict[Any, int] = {}
        self._count = 0

    def ticket(self, stream: Any = "default") -> int:
        """A number for a request of `stream` (one client's clicks): `latest(stream, n)` tells whether
        a newer one has been issued since."""
        with self._lock:
            self._count += 1
            self._tickets[stream] = self._count
            return self._count

    def latest(self, stream: Any, number: int) -> bool:
        """Whether `number` is still the newest ticket of `stream`."""
        return self._tickets.get(stream) == number

    def gradient(self, seed: Optional[Seed] = None, *, stream: Any = None,
                 number: Optional[int] = None) -> Optional[Attribution]:
        """The gradient map of `seed` (default as the methods' default) from the kept graph: an
        Attribution (a leading K for K batched seeds), or None when `number`, a ticket of `stream`,
        was superseded while the request waited for the graph."""
        seed, v = resolve(seed, self.output, self.model)
        call, y, xt = self._call, self._y, self._xt
        with self._lock:
            if stream is not None and self._tickets.get(stream) != number:
                return None
            started = time.perf_counter()
            if seed.count is None:
                g = call._backward(y, xt, v, False, "gradient", retain_graph=True)
            else:
                per = seeds_per_pass(None, len(v), xt._array.size)
                g = np.concatenate([call._backward(y, xt, v[start:start + per], True, "gradient", retain_graph=True)
                                    for start in range(0, len(v), per)])
            call.t0 = started  # the map's time is its backward pass
            return call.finish("gradient", g, seed, self.output)

    def work(self, seed: Optional[Seed] = None, limit: int = WORK_NODES) -> tuple[str, str]:
        """What the backward pass of `seed` does, as `saliency explain` shows it: (the graph below the
        output as a text tree, the table of every node the engine ran with the gradient it got and
        the VJP it sent). ValueError for a graph of more than `limit` nodes."""
        count = 1 + len(_count_dependencies([self._y.grad_fn]))  # the output's node and every node below it
        if count > limit:
            raise ValueError(f"the model's graph has {count} nodes; the backward pass is shown for models of at "
                             f"most {limit}")
        seed, v = resolve(seed, self.output, self.model)
        names = {"y": self._y, "x": self._xt}
        with self._lock, trace(names=names) as steps:
            self._call._backward(self._y, self._xt, v, seed.count is not None, "gradient", retain_graph=True)
        return render_graph(self._y, names=names), str(steps)
