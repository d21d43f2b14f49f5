"""`Run`: what one run of the batch pipeline computes and where it keeps it, as one value.

It is built once where a request comes in (the command line, a script: `Run.build`, which parses
and checks everything) and handed down whole: to `batch`, `prepare` and `fill`, to the Dask runner
(`distributed`), and into the store's attributes (`attrs`), which a resumed run compares.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np

from . import registry
from . import seeds as seeds_module
from ._core import InputError
from .sources import checked_preprocess

if TYPE_CHECKING:
    import os

BATCH_SIZE = 32


@dataclass(frozen=True)
class Run:
    """One run of the batch pipeline.

    method: the method's record (`registry.Method`; a function of your own gets one from
        `registry.method_of`). seed: a Seed or None (each model's default); seed_spec: the
        command-line form it was parsed from, if any (a store keeps it, for `evaluate`).
    options: the method's keyword arguments, checked against its record.
    style: a `viz.Style` for the heatmap PNGs (None: the default style); png: a folder for one
        heatmap PNG per map, or None.
    batch_size: images per batch (at most the number of images); out: the folder of the store
        (None: the maps in memory); resume: continue the store's run; use_zarr: force the store's
        format (None: Zarr when installed).
    record: more JSON values to keep in the store's attributes (the command line keeps its
        model's source and options there).
    model: where other processes get the model (the Dask runner's workers): a picklable callable
        of no argument that returns it, or None.
    preprocess: a `viz.Preprocess` that reads each image file (`preprocess(path)`), or None: the
        model's `.preprocess` when it has one (a torchvision architecture's), else the image at the
        model's `input_shape`. The store keeps its record, and a resumed run compares it.
    """

    method: registry.Method
    seed: Optional[seeds_module.Seed] = None
    seed_spec: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    style: Any = None  # a viz.Style
    png: str | os.PathLike[str] | None = None
    batch_size: int = BATCH_SIZE
    out: str | os.PathLike[str] | None = None
    resume: bool = False
    use_zarr: bool | None = None
    record: dict[str, Any] = field(default_factory=dict)
    model: Optional[Callable[[], Any]] = None
    preprocess: Any = None  # a viz.Preprocess

    @classmethod
    def build(cls, method: str | registry.Method | Callable[..., Any] = "gradient",
              seed: seeds_module.Seed | str | None = None, **parts: Any) -> Run:
        """A Run of `method` (a name, a registered function, a Method, or a method function of
        your own) and `seed` (a Seed, or its command-line form, parsed here), its other parts by
        name: Run's fields (batch_size=, out=, png=, style=, ...) and the method's options
        (steps=, n=, layer=, ...), each checked: an unknown name or a value the method cannot take
        is an InputError (`registry.OptionError`) naming it."""
        record = registry.method_of(method)
        seed_spec = seed.strip() if isinstance(seed, str) else None
        if isinstance(seed, str):
            seed = seeds_module.parse(seed)
        elif seed is not None and not isinstance(seed, seeds_module.Seed):
            raise TypeError(f"seed must be a seed object from saliency.attribution.seeds or its command-line form, "
                            f"got {type(seed).__name__}")
        own = {f.name for f in fields(cls)} - {"method", "seed", "seed_spec", "options"}
        options = record.check({k: v for k, v in parts.items() if k not in own})
        run = cls(record, seed, seed_spec, options, **{k: v for k, v in parts.items() if k in own})
        batch_size = run.batch_size
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
            raise InputError(f"batch_size must be a positive int, got {batch_size!r}")
        return replace(run, preprocess=checked_preprocess(run.preprocess))

    @property
    def name(self) -> str:
        """The method's name (its record's `name`)."""
        return self.method.name

    def map_shape(self, image_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one image's maps: the method's map of an image (C, H, W), after K seeds'."""
        shape = self.method.map_shape(image_shape)
        return shape if self.seed is None or self.seed.count is None else (self.seed.count,) + shape

    def attrs(self, classes: Optional[Sequence[str]] = None) -> dict[str, Any]:
        """The store's attributes of this run (JSON values): method, seed (described with the
        model's `classes`), its command-line form, the options, the record, the preprocessing."""
        seed_text = self.seed.describe(classes) if self.seed is not None else "default"
        return {"method": self.name, "seed": seed_text, "seed_spec": self.seed_spec,
                "options": self.method.record(self.options), "record": dict(self.record),
                "preprocess": self.preprocess.record() if self.preprocess is not None else None}
