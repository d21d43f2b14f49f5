"""A map store as the explore page browses it: a row per image (its file, the predicted class, its
error, and the deletion and insertion areas where `saliency evaluate` wrote them), its stored
maps, and its images read again as the run that made the maps read them.

    view = StoreView(attribution.open_store("out/maps"), scores=read_scores("report/evaluation.json", store))
    view.rows()          # [{"index": 0, "file": "a.png", "predicted": 3, ...}, ...]
    view.map(5)          # the stored map of image 5
    view.input(model, 5) # image 5 as the model takes it (for the live view)

The store is read afresh on each request: the rows of a store that a run is still writing fill in
as its batches are done. Only the files the store lists are read, by their index in it.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..attribution.sources import ImageSource
from ..attribution.store_evaluation import stored_preprocess
from ..attribution.store_files import StoreError, read_json

if TYPE_CHECKING:
    import os

    import numpy as np

    from ..attribution.store_base import MapStore

EVALUATION = "evaluation.json"  # the file of `saliency evaluate` that holds every number
MAX_EVALUATION = 256 << 20  # bytes of an evaluation.json read (a million images' areas take some 40 MB)

# The table's columns: (key, heading, what it holds), in the page's order
COLUMNS = (("index", "#", "the image's place in the store"), ("file", "file", "the image file"),
           ("predicted", "predicted", "the class the model predicted (classifiers)"),
           ("error", "error", "why the image has no map"),
           ("deletion", "deletion AUC", "area under the deletion curve (lower is better)"),
           ("insertion", "insertion AUC", "area under the insertion curve (higher is better)"))


class ScoresError(ValueError):
    """An evaluation file that cannot be read, or holds no evaluation of the store's maps."""


def read_scores(path: str | os.PathLike[str], store: MapStore) -> dict[str, tuple[Optional[float], Optional[float]]]:
    """{file: (deletion AUC, insertion AUC)} of the store's images, from the evaluation.json that
    `saliency evaluate` wrote (`path`: the file or the folder holding it): its entry made with the
    store's method and seed whose images are all the store's. ScoresError when it does not read or
    holds no such entry."""
    path = Path(path)
    if path.is_dir():
        path = path / EVALUATION
    try:
        report = read_json(path, MAX_EVALUATION)
    except (OSError, ValueError) as exc:
        raise ScoresError(f"cannot read the evaluation {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(report, dict):
        raise ScoresError(f"{path} is not an evaluation written by saliency evaluate (not a JSON object)")
    files = set(store.files)
    for label, entry in report.items():
        if not _entry_fits(entry) or entry["method"] != store.attrs.get("method"):
            continue
        if entry.get("seed") != store.attrs.get("seed") or not set(entry["files"]) <= files:
            continue
        scores = zip(entry["files"], entry["deletion_auc"], entry["insertion_auc"])
        return {f: (_number(d), _number(i)) for f, d, i in scores}
    raise ScoresError(f"{path} holds no evaluation of the maps of {store.path} (method "
                      f"{store.attrs.get('method')}, seed {store.attrs.get('seed')}, its images); evaluate them "
                      f"with: saliency evaluate {store.path.parent} --out REPORT")


def _entry_fits(entry: Any) -> bool:
    """Whether one entry of an evaluation.json has the fields a row's scores come from."""
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), list):
        return False
    lists = [entry.get("deletion_auc"), entry.get("insertion_auc")]
    return all(isinstance(a, list) and len(a) == len(entry["files"]) for a in lists)


def _number(value: Any) -> Optional[float]:
    """A score as JSON gives it: a finite float, else None."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


class StoreView:
    """The store `store` (a MapStore) as rows and maps; `scores` from `read_scores` (or None);
    `classes`: the class names of the model that made the maps (or None)."""

    def __init__(self, store: MapStore, scores: Optional[dict[str, tuple[Optional[float], Optional[float]]]] = None,
                 classes: Optional[Sequence[str]] = None) -> None:
        self.store, self.scores, self.classes = store, scores or {}, list(classes or [])

    def summary(self) -> dict[str, Any]:
        store = self.store
        return {"path": str(store.path), "method": store.attrs.get("method"), "seed": store.attrs.get("seed"),
                "images": len(store), "map_shape": list(store.map_shape), "scored": bool(self.scores),
                "columns": [{"key": k, "heading": h, "title": t} for k, h, t in COLUMNS]}

    def rows(self) -> list[dict[str, Any]]:
        """A dict per image of the store, in its order: the COLUMNS' values (None where there is none)
        and "done" (whether its map is there)."""
        store = self.store
        done, predicted, errors = store.done, store.predicted, store.errors
        out: list[dict[str, Any]] = []
        for i, name in enumerate(store.files):
            k = int(predicted[i])
            deletion, insertion = self.scores.get(name, (None, None))
            out.append({"index": i, "file": name, "done": bool(done[i] and not errors[i]),
                        "predicted": None if k < 0 else self.classes[k] if k < len(self.classes) else str(k),
                        "error": errors[i] or (None if done[i] else "not done yet"),
                        "deletion": deletion, "insertion": insertion})
        return out

    def index(self, text: Any) -> int:
        """The image index a request names (its text), checked against the store; StoreError if not one."""
        try:
            index = int(text)
        except (TypeError, ValueError):
            raise StoreError(f"index must be an image's number in the store, got {text!r}") from None
        if not 0 <= index < len(self.store):
            raise StoreError(f"index {index} is out of range for the {len(self.store)} images of the store")
        return index

    def map(self, index: int) -> np.ndarray:
        """The stored map of image `index` (*map_shape), a StoreError when it has none."""
        return self.store.attribution(index).map

    def picture(self, index: int) -> np.ndarray:
        """Image `index` as a picture at the map's size (what the model saw), a StoreError if it does not read."""
        got = self.store.picture(index)
        if got is None:
            raise StoreError(f"the image {self.store.files[index]} cannot be read (moved or deleted since the run?)")
        return got

    def input(self, model: object, index: int) -> np.ndarray:
        """Image `index` as `model` takes it, read as the run read it (its recorded preprocessing):
        float32 (C, H, W); a StoreError saying why when it does not read."""
        source = ImageSource(model, [self.store.files[index]], stored_preprocess(self.store))
        if tuple(source.shape[1:]) != tuple(self.store.map_shape[-2:]):
            raise StoreError(f"the model reads {self.store.files[index]} at {source.shape}, the store's maps are "
                             f"{self.store.map_shape}: open the store with the model that made its maps")
        x, errors = source.read(0, 1)
        if errors[0]:
            raise StoreError(f"the image {self.store.files[index]} cannot be read: {errors[0]}")
        return x[0]

    def first_done(self) -> Optional[int]:
        """The index of the first image with a map, or None."""
        return next((r["index"] for r in self.rows() if r["done"]), None)


__all__ = ["COLUMNS", "ScoresError", "StoreView", "read_scores"]
