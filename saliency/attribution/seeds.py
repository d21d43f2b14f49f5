"""Seeds: which `v` goes into `backward(v)`, built from (and checked against) the model output.

A seed's `vector(y)` takes the model output `y` (an ndarray of shape (N, ...)) and returns `v`
of the same shape: the map is then the gradient of sum(v * y). A batched seed (`pixels`,
`classes`) has `count = K` and returns v of shape (K, N, ...): K maps from one backward pass.
Classification outputs are (N, K); dense outputs are (N, C, H, W) (or (N, H, W)), and pixel and
region seeds address their last two dimensions, over all channels unless `channel` is given.
A segmentation output (N, classes, H, W) has `segment(k)`: the class-k logits of the pixels
predicted k. A seed that does not fit the output raises `SeedError`.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["Seed", "SeedError", "classes", "one_hot", "ones", "parse", "pixel", "pixels", "predicted", "region",
           "segment", "target", "weights"]


class SeedError(ValueError):
    """A seed that does not fit the model output, or a seed string that cannot be read."""


def _index(value: Any, what: str) -> int:
    """A non-negative Python int, or SeedError naming `what`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise SeedError(f"{what} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise SeedError(f"{what} must be a non-negative integer, got {value}")
    return int(value)


def _classes_of(y: np.ndarray, seed: Seed) -> int:
    """The number of classes of a classification output (N, K), or SeedError."""
    if y.ndim != 2:
        raise SeedError(f"{seed} needs a classification output of shape (N, K), but the output has shape "
                        f"{y.shape}; use ones(), pixel(), region() or weights() for a dense output")
    return y.shape[1]


def _map_of(y: np.ndarray, seed: Seed) -> tuple[int, ...]:
    """(H, W) of a dense output (N, C, H, W) or (N, H, W), or SeedError."""
    if y.ndim < 3:
        raise SeedError(f"{seed} needs a dense output of shape (N, C, H, W), but the output has shape {y.shape}; "
                        f"use one_hot(), predicted(), classes() or ones() for a classification output")
    return y.shape[-2:]


def _named(k: int, classes: Optional[Sequence[str]]) -> str:
    """Class or channel k for a caption: 'k (name)' when `classes` names it."""
    return f"{k} ({classes[k]})" if classes is not None and k < len(classes) else str(k)


def _check_channel(channel: Optional[int], y: np.ndarray) -> None:
    if channel is not None and (y.ndim < 4 or channel >= y.shape[1]):
        have = f"{y.shape[1]} channels (valid: 0..{y.shape[1] - 1})" if y.ndim >= 4 else f"shape {y.shape}"
        raise SeedError(f"channel {channel} is out of range for an output with {have}")


def _fill(v: np.ndarray, channel: Optional[int], rows: Any, cols: Any) -> np.ndarray:
    """Set v[..., channel or all, rows, cols] = 1 on a dense v (seed dimensions first)."""
    if channel is None:
        v[..., rows, cols] = 1
    else:
        v[..., channel, rows, cols] = 1
    return v


class Seed:
    """Base class: `vector(y)` builds v from the output `y`; `describe()` says what v is."""

    count: Optional[int] = None  # K for a batched seed (v has a leading K dimension), None for one seed

    def vector(self, y: np.ndarray) -> np.ndarray:
        """v for the output `y`: an array of y's shape, or (K, *y.shape) for a batched seed; SeedError if the
        seed does not fit `y`. Each seed implements it."""
        raise NotImplementedError

    def resolve(self, y: np.ndarray) -> Seed:
        """The seed with everything that depends on the output fixed (predicted() -> one_hot(argmax))."""
        return self

    def check(self, y: np.ndarray) -> None:
        """Raise SeedError if the seed does not fit the output `y` (by default: build v)."""
        self.vector(y)

    def vectors(self, y: np.ndarray, start: int, stop: int) -> np.ndarray:
        """v of seeds start..stop-1 of a batched seed, shape (stop - start, *y.shape): what one
        backward pass of a chunked batch needs, without the other seeds' rows."""
        return self.vector(y)[start:stop]

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        """A short caption, e.g. 'class 3' or 'pixel (10, 20)'; `classes` are optional class names."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"<seed: {self.describe()}>"


class _Ones(Seed):
    def vector(self, y: np.ndarray) -> np.ndarray:
        return np.ones(y.shape, dtype=y.dtype)

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        return "all ones"


class _OneHot(Seed):
    def __init__(self, k: Any, chosen_by_argmax: bool = False) -> None:  # an int, or one per image
        self.k: int | tuple[int, ...]
        if np.ndim(k) == 0:
            self.k = _index(k, "class")
        else:
            self.k = tuple(_index(c, "class") for c in k)
            if not self.k:
                raise SeedError("one_hot() needs a class index or one class index per image, got an empty list")
        self.chosen_by_argmax = chosen_by_argmax

    def vector(self, y: np.ndarray) -> np.ndarray:
        n, n_classes = y.shape[0], _classes_of(y, self)
        ks = self.k if isinstance(self.k, tuple) else (self.k,) * n
        if len(ks) != n:
            raise SeedError(f"one_hot() got {len(ks)} class indices for a batch of {n} images; pass one per image "
                            f"or a single int")
        for k in ks:
            if k >= n_classes:
                raise SeedError(f"class {k} is out of range for an output with {n_classes} classes "
                                f"(valid: 0..{n_classes - 1})")
        v = np.zeros(y.shape, dtype=y.dtype)
        v[np.arange(n), list(ks)] = 1
        return v

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        def name(k: int) -> str:
            return f"{k} ({classes[k]})" if classes is not None and k < len(classes) else str(k)
        lead = "predicted class" if self.chosen_by_argmax else "class"
        if isinstance(self.k, tuple):
            if len(set(self.k)) == 1:
                return f"{lead} {name(self.k[0])}"
            return f"{lead}es " + ", ".join(name(k) for k in self.k)
        return f"{lead} {name(self.k)}"


class _Predicted(Seed):
    def resolve(self, y: np.ndarray) -> Seed:
        _classes_of(y, self)
        return _OneHot(tuple(int(k) for k in np.argmax(y, axis=1)), chosen_by_argmax=True)

    def vector(self, y: np.ndarray) -> np.ndarray:
        return self.resolve(y).vector(y)

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        return "predicted class"


class _Pixel(Seed):
    def __init__(self, row: int, col: int, channel: Optional[int] = None) -> None:
        self.row, self.col = _index(row, "pixel row"), _index(col, "pixel column")
        self.channel = None if channel is None else _index(channel, "channel")

    def check(self, y: np.ndarray) -> None:
        h, w = _map_of(y, self)
        if self.row >= h or self.col >= w:
            raise SeedError(f"pixel ({self.row}, {self.col}) is outside the {h}x{w} output map "
                            f"(rows 0..{h - 1}, cols 0..{w - 1})")
        _check_channel(self.channel, y)

    def vector(self, y: np.ndarray) -> np.ndarray:
        self.check(y)
        return _fill(np.zeros(y.shape, dtype=y.dtype), self.channel, self.row, self.col)

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        tail = "" if self.channel is None else f" channel {_named(self.channel, classes)}"
        return f"pixel ({self.row}, {self.col})" + tail


def _is_int_box(value: Any) -> bool:
    """Whether `value` is a tuple or list of four integers (not bools)."""
    return isinstance(value, (tuple, list)) and len(value) == 4 and all(
        isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_)) for b in value)


class _Region(Seed):
    def __init__(self, mask_or_box: Any, channel: Optional[int] = None) -> None:
        self.mask: Any  # a bool array (H, W), or None for a box
        self.box: Optional[tuple[int, int, int, int]]
        self.channel = None if channel is None else _index(channel, "channel")
        # a box of Python ints of any size stays as it is: NumPy would turn ints past int64 into floats
        arr = mask_or_box if _is_int_box(mask_or_box) else np.asarray(mask_or_box)
        if isinstance(arr, np.ndarray) and arr.dtype == np.bool_ and arr.ndim == 2:
            if not arr.any():
                raise SeedError("region mask selects no pixels; pass a mask with at least one True pixel")
            self.mask, self.box = arr.copy(), None
        elif _is_int_box(arr) or (arr.shape == (4,) and arr.dtype.kind in "iu"):
            r0, c0, r1, c1 = (_index(int(b), "box corner") for b in arr)
            if r1 <= r0 or c1 <= c0:
                raise SeedError(f"region box {(r0, c0, r1, c1)} is empty; a box is (r0, c0, r1, c1) with r0 < r1 "
                                f"and c0 < c1, end-exclusive")
            self.mask, self.box = None, (r0, c0, r1, c1)
        else:
            raise SeedError(f"region() takes a boolean mask of shape (H, W) or a box (r0, c0, r1, c1) of ints, "
                            f"got {arr.dtype} of shape {arr.shape}")

    def vector(self, y: np.ndarray) -> np.ndarray:
        h, w = _map_of(y, self)
        _check_channel(self.channel, y)
        v = np.zeros(y.shape, dtype=y.dtype)
        if self.box is not None:
            r0, c0, r1, c1 = self.box
            if r1 > h or c1 > w:
                raise SeedError(f"region box {self.box} does not fit the {h}x{w} output map (need r1 <= {h} "
                                f"and c1 <= {w}; the box is end-exclusive)")
            return _fill(v, self.channel, slice(r0, r1), slice(c0, c1))
        if self.mask.shape != (h, w):
            raise SeedError(f"region mask of shape {self.mask.shape} does not fit the {h}x{w} output map; "
                            f"pass a mask of shape ({h}, {w})")
        return _fill(v, self.channel, *np.nonzero(self.mask))

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        tail = "" if self.channel is None else f" channel {_named(self.channel, classes)}"
        if self.box is not None:
            r0, c0, r1, c1 = self.box
            return f"region rows {r0}..{r1 - 1}, cols {c0}..{c1 - 1}{tail}"
        return f"region of {int(self.mask.sum())} pixels{tail}"


class _Segment(Seed):
    def __init__(self, k: Optional[int]) -> None:
        self.k = None if k is None else _index(k, "class")

    def resolve(self, y: np.ndarray) -> Seed:
        if y.ndim != 4:
            raise SeedError(f"{self} needs a segmentation output of shape (N, classes, H, W), but the output has "
                            f"shape {y.shape}; use one_hot() or predicted() for a classification output")
        labels = np.argmax(y, axis=1)
        if self.k is None:  # each image's commonest predicted class (the lowest of a tie)
            ks = np.array([np.bincount(m.ravel(), minlength=y.shape[1]).argmax() for m in labels], np.int64)
        else:
            _check_channel(self.k, y)
            ks = np.full(len(y), self.k, np.int64)
        return _SegmentMask(ks, labels == ks[:, None, None])

    def vector(self, y: np.ndarray) -> np.ndarray:
        return self.resolve(y).vector(y)

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        if self.k is None:
            return "the commonest predicted class where predicted"
        return f"class {_named(self.k, classes)} where predicted"


class _SegmentMask(Seed):
    """segment(k) resolved at an output: v = 1 at channel ks[n] of image n's pixels `mask[n]`
    (mask (N, H, W))."""

    def __init__(self, ks: np.ndarray, mask: np.ndarray) -> None:
        self.ks, self.mask = ks, mask

    def vector(self, y: np.ndarray) -> np.ndarray:
        if y.ndim != 4 or y.shape[0] != self.mask.shape[0] or y.shape[2:] != self.mask.shape[1:]:
            raise SeedError(f"{self} was resolved for an output of {self.mask.shape[0]} images of "
                            f"{self.mask.shape[1]}x{self.mask.shape[2]} pixels, not of shape {y.shape}")
        _check_channel(int(self.ks.max()), y)
        v = np.zeros(y.shape, dtype=y.dtype)
        v[np.arange(len(y)), self.ks] = self.mask
        return v

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        ks = sorted(set(self.ks.tolist()))
        what = "class" if len(ks) == 1 else "classes"
        what += " " + ", ".join(_named(k, classes) for k in ks)
        return f"{what} where predicted ({int(self.mask.sum())} pixels)"


class _Weights(Seed):
    label = "weights"

    def __init__(self, v: Any) -> None:
        self.v = np.array(v.numpy() if hasattr(v, "numpy") else v, copy=True)
        if self.v.dtype.kind not in "biuf":
            raise SeedError(f"{self.label}() needs a numeric array, got dtype {self.v.dtype}")

    def vector(self, y: np.ndarray) -> np.ndarray:
        try:
            return np.broadcast_to(self.v, y.shape).astype(y.dtype)
        except ValueError:
            raise SeedError(f"{self.label} of shape {self.v.shape} do not broadcast to the output shape {y.shape}; "
                            f"pass an array of shape {y.shape} or one that broadcasts to it") from None

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        return f"{self.label} of shape {self.v.shape}"


class _Target(_Weights):
    label = "target"


class _Pixels(Seed):
    def __init__(self, points: Any, channel: Optional[int] = None) -> None:
        try:
            self.items = [_Pixel(*p, channel=channel) for p in points]  # type: ignore[misc]  # p: (row, col)
        except TypeError:
            raise SeedError(f"pixels() takes a list of (row, col) pairs, got {points!r}") from None
        if not self.items:
            raise SeedError("pixels() needs at least one (row, col) pair")
        self.count: int = len(self.items)
        self.channel = self.items[0].channel
        self.rows = np.array([p.row for p in self.items], dtype=np.intp)
        self.cols = np.array([p.col for p in self.items], dtype=np.intp)

    def check(self, y: np.ndarray, start: int = 0, stop: Optional[int] = None) -> None:
        h, w = _map_of(y, self)
        outside = np.flatnonzero((self.rows[start:stop] >= h) | (self.cols[start:stop] >= w))
        if outside.size:
            self.items[start + outside[0]].check(y)
        _check_channel(self.channel, y)

    def vectors(self, y: np.ndarray, start: int, stop: int) -> np.ndarray:
        self.check(y, start, stop)
        rows, cols = self.rows[start:stop], self.cols[start:stop]
        v = np.zeros((len(rows),) + y.shape, dtype=y.dtype)
        j = np.arange(len(rows))
        if self.channel is None:
            v[j, ..., rows, cols] = 1
        else:
            v[j, :, self.channel, rows, cols] = 1
        return v

    def vector(self, y: np.ndarray) -> np.ndarray:
        return self.vectors(y, 0, self.count)

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        shown = ", ".join(f"({p.row}, {p.col})" for p in self.items[:4])
        tail = "" if self.channel is None else f" channel {_named(self.channel, classes)}"
        return f"{self.count} pixels {shown}" + (", ..." if self.count > 4 else "") + tail


class _Classes(Seed):
    def __init__(self, ks: Sequence[int | Sequence[int]]) -> None:
        if np.ndim(ks) not in (1, 2) or len(ks) == 0:
            raise SeedError(f"classes() takes a non-empty list of class indices (or of one class index per image "
                            f"each), got {ks!r}")
        self.items = [_OneHot(k) for k in ks]
        self.count: int = len(self.items)

    def check(self, y: np.ndarray) -> None:
        for s in self.items:
            s.vector(y)

    def vectors(self, y: np.ndarray, start: int, stop: int) -> np.ndarray:
        return np.stack([s.vector(y) for s in self.items[start:stop]])

    def vector(self, y: np.ndarray) -> np.ndarray:
        return self.vectors(y, 0, self.count)

    def describe(self, classes: Optional[Sequence[str]] = None) -> str:
        return "classes " + ", ".join(s.describe(classes)[len("class "):] for s in self.items)


def ones() -> Seed:
    """v = all ones: the gradient of the sum of the output."""
    return _Ones()


def one_hot(k: int | Sequence[int]) -> Seed:
    """v = 1 at class k of a classification output (N, K); `k` an int, or one int per image."""
    return _OneHot(k)


def predicted() -> Seed:
    """v = 1 at each image's highest-scoring class (argmax of the output (N, K))."""
    return _Predicted()


def pixel(row: int, col: int, *, channel: Optional[int] = None) -> Seed:
    """v = 1 at output pixel (row, col) of a dense output, in every channel (or only `channel`)."""
    return _Pixel(row, col, channel)


def region(mask_or_box: Any, *, channel: Optional[int] = None) -> Seed:
    """v = 1 inside a region of a dense output: a boolean mask (H, W), or a box (r0, c0, r1, c1)
    with end-exclusive r1 and c1 (rows r0..r1-1, cols c0..c1-1), in every channel (or only `channel`)."""
    return _Region(mask_or_box, channel)


def segment(k: Optional[int] = None) -> Seed:
    """v = 1 at class k of a segmentation output (N, classes, H, W), at the pixels whose predicted
    class (argmax over classes) is k, found at x: the gradient of the sum of the class-k logits of
    the pixels predicted k (pytorch-grad-cam's SemanticSegmentationTarget). No such pixel: v = 0.
    k None: each image's commonest predicted class (the default seed of a segmentation model)."""
    return _Segment(k)


def weights(v: Any) -> Seed:
    """v = the given array, broadcast to the output shape: the gradient of sum(v * y)."""
    return _Weights(v)


def target(t: Any) -> Seed:
    """v = a target array (e.g. ground truth), broadcast to the output shape: the gradient of sum(t * y)."""
    return _Target(t)


def pixels(points: Sequence[tuple[int, int]] | np.ndarray, *, channel: Optional[int] = None) -> Seed:
    """K pixel seeds [(row, col), ...] in one backward pass: v of shape (K, *output shape)."""
    return _Pixels(points, channel)


def classes(ks: Sequence[int | Sequence[int]]) -> Seed:
    """K class seeds [k, ...] in one backward pass: v of shape (K, N, n_classes). Each k is a class
    index, or a list of one class index per image (as one_hot() takes)."""
    return _Classes(ks)


_FORMS = ("predicted, ones, class:K, segment or segment:K, pixel:ROW,COL, region:R0,C0,R1,C1, classes:K1,K2,..., "
          "pixels:ROW,COL;ROW,COL;... (pixel, region and pixels take @K for output channel K only: pixel:ROW,COL@K)")


def _parse_many(text: str, name: str, args: str, channel: Optional[int] = None) -> Seed:
    """classes:K1,K2,... or pixels:R,C;R,C;... (at least one entry each)."""
    entries: list[Any]
    try:
        if name == "classes":
            entries = [_ascii_int(a) for a in args.split(",")]
        else:
            entries = [tuple(_ascii_int(v) for v in a.split(",")) for a in args.split(";")]
            if any(len(e) != 2 for e in entries):
                raise ValueError
    except ValueError:
        raise SeedError(f"cannot read seed {text!r}; use one of: {_FORMS}") from None
    return classes(entries) if name == "classes" else pixels(entries, channel=channel)


def _ascii_int(text: str) -> int:
    """An int written in ASCII digits with an optional sign (int() also reads '٣' or '1_000'), else
    ValueError."""
    body = text.strip()
    if not body.lstrip("+-").isascii() or not body.lstrip("+-").isdigit() or len(body) - len(body.lstrip("+-")) > 1:
        raise ValueError(f"not an integer: {text!r}")
    return int(body)


def parse(text: str) -> Seed:
    """A seed from its command-line form: 'predicted', 'ones', 'class:K', 'segment:K' (the class-K
    logits of the pixels predicted K; 'segment': each image's commonest predicted class),
    'pixel:ROW,COL', 'region:R0,C0,R1,C1' (box end-exclusive), or K seeds at once (K maps in one
    backward pass): 'classes:K1,K2,...' and 'pixels:ROW,COL;ROW,COL;...'. A pixel, region or
    pixels seed ending in '@K' takes output channel K only ('pixel:100,40@15': class 15's logit at
    that pixel of a segmentation)."""
    if not isinstance(text, str):
        raise SeedError(f"a seed string is one of {_FORMS}, got {type(text).__name__} {text!r}")
    body, at, channel_text = text.strip().partition("@")
    name, colon, args = body.partition(":")
    name = name.strip().lower()
    channel = None
    if at:
        try:
            channel = _ascii_int(channel_text)
        except ValueError:
            channel = -1
        if name not in ("pixel", "region", "pixels") or channel < 0:
            raise SeedError(f"cannot read seed {text!r}: @K (a non-negative channel) follows only pixel, region "
                            f"or pixels; use one of: {_FORMS}")
    if name in ("classes", "pixels"):
        return _parse_many(text, name, args, channel)
    try:
        nums = [_ascii_int(a) for a in args.split(",")] if args.strip() else []
    except ValueError:
        nums = None
    arity = {"predicted": (0,), "ones": (0,), "class": (1,), "segment": (0, 1), "pixel": (2,), "region": (4,)}
    if name not in arity or nums is None or len(nums) not in arity[name] or (not args.strip() and colon):
        raise SeedError(f"cannot read seed {text!r}; use one of: {_FORMS}")
    if name == "predicted":
        return predicted()
    if name == "ones":
        return ones()
    if name == "class":
        return one_hot(nums[0])
    if name == "segment":
        return segment(*nums)
    if name == "pixel":
        return pixel(*nums, channel=channel)
    return region(tuple(nums), channel=channel)
