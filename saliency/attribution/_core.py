"""What every method shares: input checks, the forward pass, the VJP of a seed, the result.

Every gradient goes through `autograd.grad` (never `.backward()`), so no `.grad` is touched.
During a call the model's parameters behave as if they did not require grad, in the calling
thread only (`frozen`; the parameters themselves are not changed): the backward pass then
computes no weight gradients it would throw away.
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import numpy as np

from .. import autograd
from ..autograd import grad_mode, rules
from ..autograd.errors import LayerInputError
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.tensor import Tensor
from . import seeds as _seeds
from .result import Attribution

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..autograd.errors import LayerInputError as _LayerInputError
    from ..autograd.tensor import TensorLike

# A model: a saliency.nn.Module or any function from a Tensor (N, C, H, W) to a Tensor (N, ...).
Model = Callable[[Tensor], Tensor]
# A progress callback: progress(done, total).
Progress = Callable[[int, int], Any]

# Input elements per forward pass when a method runs many copies of x (noisy copies, path points,
# occluded images) and no batch size is given: 512 KB of float32 input per pass. The budget is
# small on purpose: the activations of a big pass leave the caches, so bigger passes are slower
# per image, not faster (benchmarks/methods.py times the methods).
DEFAULT_BUDGET = 1 << 17

# Seeds per backward pass for a batched seed (pixels(), classes(), jacobian_rows) when no chunk is
# given: as many as keep K * (input elements of the pass) within this budget, at least 1: 10 seeds
# of a 3x128x128 image. A batched backward holds K gradients of the activations it passes, so
# thousands of seeds need several passes; a pass of a few seeds shares the graph's traversal
# between them while their gradients still fit the caches.
SEED_BUDGET = 4 * DEFAULT_BUDGET


class InputError(ValueError):
    """An input a method cannot use: empty, not finite, or not fitting the model's first layer."""


class ModelError(RuntimeError):
    """The model failed on an input: its forward raised (or called sys.exit), or it returned
    something other than a floating-point Tensor (N, ...) that depends on x. The model's own
    exception, if any, is the `__cause__`."""


def check_finite(arr: np.ndarray, name: str = "x") -> None:
    """Raise InputError naming how many NaN and infinite values `arr` holds and where, if any."""
    if arr.dtype.kind != "f" or np.isfinite(arr).all():
        return
    bad = ~np.isfinite(arr)
    nan = int(np.isnan(arr).sum())
    inf = int(bad.sum()) - nan
    counts = " and ".join(f"{n} {kind} value{'s' if n != 1 else ''}" for n, kind in ((nan, "NaN"), (inf, "infinite"))
                          if n)
    where = [tuple(int(i) for i in idx) for idx in np.argwhere(bad)[:3]]
    images: Any = np.flatnonzero(bad.reshape(len(arr), -1).any(axis=1)) if arr.ndim == 4 else []
    in_images = f" in image{'s' if len(images) > 1 else ''} {', '.join(map(str, images[:8]))}" \
        f"{' ...' if len(images) > 8 else ''}" if len(images) else ""
    raise InputError(f"{name} holds {counts}{in_images} (at index {', '.join(map(str, where))}"
                     f"{', ...' if bad.sum() > 3 else ''}); a map needs a finite input: replace them, "
                     f"e.g. with np.nan_to_num")


def seeds_per_pass(chunk: Optional[int], count: int, elements: int) -> int:
    """How many of `count` batched seeds go through one backward pass whose input has `elements`
    elements: `chunk` if given (a positive int), else from SEED_BUDGET; never more than `count`."""
    if chunk is None:
        per = max(1, SEED_BUDGET // max(1, elements))
    else:
        if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
            raise ValueError(f"chunk must be a positive int (seeds per backward pass), got {chunk!r}")
        per = int(chunk)
    return min(per, count)


class Call:
    """One method call: the input as (N, C, H, W), whether it had a batch dimension, the clock.

    x is cast to the dtype of the model's parameters when it has any (a float64 image for a
    float32 model), else kept; the map has that dtype. An integer or bool x (a uint8 image of
    0..255, say) is a TypeError: the maps are of float images in [0, 1], and guessing the scale of
    integers would silently change them.
    """

    def __init__(self, model: Model, x: TensorLike) -> None:
        if not callable(model):
            raise TypeError(f"model must be callable (a saliency.nn.Module or a function of a Tensor), "
                            f"got {type(model).__name__}")
        self.model = model
        self.t0 = time.perf_counter()
        arr = x._array if isinstance(x, Tensor) else np.asarray(x)
        if arr.dtype.kind in "biu":
            hint = "x.astype(np.float32) / 255" if arr.dtype == np.uint8 else "x.astype(np.float32)"
            raise TypeError(f"x has dtype {arr.dtype}; the methods take a floating-point image (values in [0, 1] for "
                            f"the zoo's models): convert it first, e.g. {hint}, or read it with "
                            f"saliency.viz.load_image")
        if arr.dtype.kind != "f":
            raise TypeError(f"x must be a numeric array or Tensor, got dtype {arr.dtype}")
        if arr.ndim not in (3, 4):
            raise ValueError(f"x must have shape (N, C, H, W) or (C, H, W), got shape {arr.shape}")
        if arr.ndim == 4 and arr.shape[0] == 0:
            raise InputError(f"x is an empty batch (shape {arr.shape}); pass at least one image")
        if 0 in arr.shape[-3:]:
            raise InputError(f"x has shape {arr.shape}: an image needs at least one channel, row and column")
        dtype = _param_dtype(model) or arr.dtype
        check_finite(arr)
        if arr.dtype != dtype:
            with np.errstate(over="ignore"):    # values too large for dtype: reported just below
                arr = arr.astype(dtype)
            check_finite(arr, f"x cast to the model's {dtype}")
        self.unbatched: bool = arr.ndim == 3
        self.x: np.ndarray = arr[None] if self.unbatched else arr  # never written to

    @property
    def n(self) -> int:
        """N, the number of images (1 for an unbatched x)."""
        return self.x.shape[0]

    def chunk(self, batch: Optional[int], copies: int, seeds: int = 1) -> int:
        """How many copies of the N images go through one forward pass (`seeds`: K, which multiplies
        the memory of the backward pass, counts against the default budget, not against `batch`)."""
        if batch is None:
            per = max(1, DEFAULT_BUDGET // (self.x.size * seeds))
        else:
            if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
                raise ValueError(f"batch must be a positive int (images per forward pass), got {batch!r}")
            per = max(1, int(batch) // self.n)
        return min(per, copies)

    def forward(self, x: np.ndarray, grad: bool = False, record: Any = None) -> Any:
        """The model output at x (an ndarray): its array (no graph recorded), or with grad=True the pair
        (x as a fresh leaf requiring grad, output Tensor). `record`: a rule-based method's Recording
        (saliency.autograd.rules), whose source becomes the leaf x."""
        xt = Tensor(x, requires_grad=grad)
        if record is not None:
            record.source = xt
        try:
            with (enable_grad() if grad else no_grad()), frozen(self.model):
                y = self.model(xt)
        except LayerInputError as exc:  # the model's layers do not fit the input, or each other: the run's error
            raise _first_layer_error(exc, x.shape) from None
        except SystemExit as exc:
            raise ModelError(f"the model called sys.exit({exc.code!r}) on an input of shape {tuple(x.shape)}") from None
        except (Exception, GeneratorExit) as exc:  # noqa: BLE001: the model's own code raised; KeyboardInterrupt passes
            if isinstance(exc, MemoryError):
                raise
            raise ModelError(f"the model failed on an input of shape {tuple(x.shape)}: {_said(exc)}") from exc
        if not isinstance(y, Tensor):
            raise ModelError(f"the model must return a Tensor, got {_kind(y)}; return the output tensor itself "
                             f"(for a model that returns several, wrap it: lambda x: model(x)[0])")
        if y.ndim < 1 or y.shape[0] != x.shape[0]:
            raise ModelError(f"the model's output of shape {tuple(y.shape)} has no batch dimension matching the "
                             f"input's {x.shape[0]} images; the model must map (N, C, H, W) to (N, ...)")
        if y._array.dtype.kind != "f":
            raise ModelError(f"the model's output has dtype {y._array.dtype}; a map needs a floating-point output "
                             f"(logits or scores, not e.g. their argmax)")
        if y._array.size == 0:
            raise ModelError(f"the model's output of shape {tuple(y.shape)} is empty; there is no value to attribute")
        return (xt, y) if grad else y._array

    def vjp(self, x: np.ndarray, v: np.ndarray, batched: bool) -> np.ndarray:
        """v^T dy/dx at x: ([K,] x.shape) ndarray; v has the output's shape ([K,] first)."""
        xt, y = self.forward(x, grad=True)
        return self.grad(y, xt, v, batched)

    def grad(self, y: Tensor, xt: Tensor, v: np.ndarray, batched: bool, rule: Any = "gradient") -> np.ndarray:
        """v^T dy/dxt with Relu's VJP following `rule` ("gradient" or "guided"; or a rule set); K batched seeds
        beyond `seeds_per_pass` run in several backward passes through the one graph."""
        if not batched or len(v) <= seeds_per_pass(None, len(v), xt._array.size):
            return self._backward(y, xt, v, batched, rule)
        return self.rows(y, xt, len(v), lambda start, stop: v[start:stop], rule)

    def rows(self, y: Tensor, xt: Tensor, count: int, vectors: Callable[[int, int], np.ndarray], rule: Any = "gradient",
             chunk: Optional[int] = None, reduce: Optional[Callable[[np.ndarray], Any]] = None,
             progress: Optional[Progress] = None) -> np.ndarray:
        """The gradients of `count` batched seeds, `seeds_per_pass(chunk, ...)` per backward pass
        (the graph is kept until the last): vectors(start, stop) gives the v of seeds start..stop-1.
        Returns their stack (count, *xt.shape), or with `reduce` the concatenation of reduce(g) over
        the passes (each result's first dimension must be the pass's seeds). After each pass
        progress(done, count) is called if given."""
        per = seeds_per_pass(chunk, count, xt._array.size)
        out: Optional[np.ndarray] = None
        parts: list[np.ndarray] = []
        for start in range(0, count, per):
            stop = min(start + per, count)
            g = self._backward(y, xt, vectors(start, stop), True, rule, retain_graph=stop < count)
            if reduce is None:
                if out is None:
                    out = np.empty((count,) + g.shape[1:], dtype=g.dtype)
                out[start:stop] = g
            else:
                part = np.asarray(reduce(g))
                if part.ndim < 1 or part.shape[0] != stop - start:
                    raise ValueError(f"reduce must return an array with one entry per seed of its chunk "
                                     f"(first dimension {stop - start}), got shape {part.shape}")
                parts.append(part)
            if progress is not None:
                progress(stop, count)
        return cast(np.ndarray, out) if reduce is None else np.concatenate(parts)

    def _backward(self, y: Tensor, xt: Tensor, v: np.ndarray, batched: bool, rule: Any,
                  retain_graph: bool = False) -> np.ndarray:
        """`rule`: "gradient" or "guided" (Relu's VJP), or a rule set (saliency.autograd.relevance)."""
        g = None
        if y.requires_grad:
            with autograd.relu_rule(rule) if isinstance(rule, str) else rules.using(rule):
                g = autograd.grad(y, xt, v, retain_graph=retain_graph, batched=batched, allow_unused=True)[0]
        if g is None:
            raise ModelError("the model output does not depend on x through recorded operations; the model "
                             "must compute its output from the Tensor it is given with saliency ops (not through "
                             ".numpy(), .detach() or argmax)")
        return g._array

    def finish(self, method: str, amap: np.ndarray, seed: _seeds.Seed, output: np.ndarray,
               extras: Optional[dict[str, Any]] = None) -> Attribution:
        """The Attribution; drops the batch dimension (axis 0, or 1 after K seeds) when x had none."""
        if self.unbatched:
            amap = amap[:, 0] if seed.count is not None else amap[0]
            output = output[0]
        classes = getattr(self.model, "classes", None)
        return Attribution(map=np.ascontiguousarray(amap, dtype=self.x.dtype), seed=seed, method=method,
                           output=output, seconds=time.perf_counter() - self.t0, extras=extras or {},
                           input=self.x[0] if self.unbatched else self.x,
                           classes=list(classes) if classes else None)

    def unbatch(self, a: np.ndarray, seed: _seeds.Seed) -> np.ndarray:
        """A per-image value ([K,] N) without its batch dimension when x had none."""
        if not self.unbatched:
            return a
        return a[:, 0] if seed.count is not None else a[0]


def _said(exc: BaseException) -> str:
    """An exception as `Type: message` on one line of at most 300 characters."""
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _kind(value: object) -> str:
    """What a model returned, for a message: a tuple of 2, a dict with keys ..., None, an int."""
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, dict):
        return f"a dict with keys {', '.join(map(repr, list(value)[:4]))}{', ...' if len(value) > 4 else ''}"
    if value is None:
        return "None"
    return f"a value of type {type(value).__name__}"


def _first_layer_error(exc: _LayerInputError, x_shape: tuple[int, ...]) -> Exception:
    """InputError for a layer that got x as it is (or x through elementwise ops, same shape, or x
    flattened): the model's first layer does not fit the input. Other layers' errors pass unchanged."""
    given = exc.input_shape
    if exc.what == "channels" and given[1:] == tuple(x_shape[1:]):
        return InputError(f"the model's first layer takes {exc.expected} channels; the input has {exc.got} "
                          f"(shape {tuple(x_shape)})")
    if exc.what == "features" and len(given) == 2 and given[1] == math.prod(x_shape[1:]):
        return InputError(f"the model's first layer takes {exc.expected} features; the input has {exc.got} "
                          f"({'x'.join(map(str, x_shape[1:]))} flattened)")
    return exc


def default_seed(seed: Optional[_seeds.Seed], y: np.ndarray, model: object = None) -> _seeds.Seed:
    """predicted() for a classification output (N, K), segment() (each image's commonest predicted
    class where predicted) for a model whose `task` is "segmentation", ones() otherwise; checks the type."""
    if seed is None:
        if y.ndim == 2:
            return _seeds.predicted()
        return _seeds.segment() if getattr(model, "task", None) == "segmentation" else _seeds.ones()
    if isinstance(seed, str):
        raise TypeError(f"seed must be a seed object, got the string {seed!r}; use seeds.parse({seed!r})")
    if not isinstance(seed, _seeds.Seed):
        raise TypeError(f"seed must be a seed object from saliency.attribution.seeds, got {type(seed).__name__}")
    return seed


def resolve(seed: Optional[_seeds.Seed], y: np.ndarray, model: object = None) -> tuple[_seeds.Seed, np.ndarray]:
    """(the resolved seed, its v) for the output array y of `model`."""
    seed = default_seed(seed, y, model).resolve(y)
    return seed, seed.vector(y)


def baseline_like(baseline: Any, xs: np.ndarray) -> np.ndarray:
    """The baseline as an array of x's shape and dtype: None is zeros, a number fills, an array
    broadcasts, a callable (`baselines.Blur()`) is called on x."""
    if baseline is None:
        return np.zeros_like(xs)
    b = baseline._array if isinstance(baseline, Tensor) else baseline
    if callable(b):
        b = b(xs)
    try:
        out = np.ascontiguousarray(np.broadcast_to(np.asarray(b, dtype=xs.dtype), xs.shape))
    except ValueError:
        raise ValueError(f"baseline of shape {np.shape(b)} does not broadcast to the input shape {xs.shape}; "
                         f"pass a number, an array of shape {xs.shape[1:]} or one of the input's shape") from None
    check_finite(out, "baseline")
    return out


def weighted(y: np.ndarray, v: np.ndarray, batched: bool) -> np.ndarray:
    """The seed-weighted output sum(v * y) per image: shape (N,), or (K, N) for K seeds."""
    lead = 1 + batched
    prod = v * y
    return prod.reshape(prod.shape[:lead] + (-1,)).sum(axis=-1, dtype=np.float64)


def tile(v: np.ndarray, copies: int, batched: bool) -> np.ndarray:
    """v repeated for `copies` stacked copies of the batch (copy-major: image i of copy j at j*N + i)."""
    axis = 1 if batched else 0
    reps = [1] * v.ndim
    reps[axis] = copies
    return np.tile(v, reps)


def fold(g: np.ndarray, copies: int, batched: bool) -> np.ndarray:
    """([K,] copies*N, ...) -> ([K,] copies, N, ...): the inverse of `tile`'s layout."""
    lead = g.shape[:1] if batched else ()
    rest = g.shape[len(lead):]
    return g.reshape(lead + (copies, rest[0] // copies) + rest[1:])


def _param_dtype(model: object) -> Optional[np.dtype[Any]]:
    """The dtype of the model's first floating-point parameter, or None (a function, or no parameters)."""
    params = getattr(model, "parameters", None)
    if callable(params):
        for p in params():
            if p.dtype.kind == "f":
                return p.dtype
    return None


def frozen(model: object) -> AbstractContextManager[Any]:
    """Parameters of `model` (if it has any) do not require grad inside the block, in this thread
    only: the parameters themselves are not changed, so another thread may train the model."""
    params = getattr(model, "parameters", None)
    return grad_mode.frozen([p for p in params() if p._requires_grad] if callable(params) else [])
