"""A small run for the store tests: a random classifier of 12x12 images and a few PNGs of that
size, so that a store of each format is made in milliseconds. `fixtures/old_stores` holds the
stores the version before the store's marker and checks wrote of the same run (five images,
batches of 2, `attribution.batch(tiny_model(), ["images/img0.png", ...], "gradient", out=...,
batch_size=2, record={"model": "make_cnn"})` run in that folder)."""
from pathlib import Path

import numpy as np
import pytest
from _attribution_models import make_cnn
from PIL import Image

from saliency.attribution import store as stores

OLD_STORES = Path(__file__).parent / "fixtures" / "old_stores"
needs_zarr = pytest.mark.skipif(not stores.zarr_available(), reason="zarr is not installed")
FORMATS = [pytest.param(True, marks=needs_zarr, id="zarr"), pytest.param(False, id="npy")]


def tiny_model():
    """make_cnn in float32, reading its images at 12x12."""
    model = make_cnn(np.float32)
    model.input_shape = (3, 12, 12)
    return model


def write_images(folder, count=5, names=None, seed=7):
    """`count` random 12x12 PNGs in `folder` (img0.png, ... or `names`); their paths as str."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        paths.append(str(folder / (names[i] if names else f"img{i}.png")))
        Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(paths[-1], format="PNG")
    return paths


def chunk_of(store, k, name="maps"):
    """The file of batch k's chunk of array `name` (zarr) or of its maps / record (folder)."""
    if store.backend == "zarr":
        return store.path.joinpath(name, "c", str(k), *["0"] * (len(store.map_shape) if name == "maps" else 0))
    return store.path / (f"maps.{k}.npy" if name == "maps" else f"batch.{k}.json")
