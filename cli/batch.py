"""`saliency batch`: the maps of every image in a folder, streamed in batches into a store.

The wiring only: the pipeline, the store and the PNG names are `saliency.attribution.batch`,
`saliency.attribution.store` and `saliency.attribution.output_names`. This module lists the
folder's images, draws the progress bar (images per second, time left) and sums the run up.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from saliency.attribution import store as stores

from .mapping import IMAGE_SUFFIXES, MapError

if TYPE_CHECKING:
    from saliency.models import zoo

    from saliency.attribution.run import Run
    from saliency.attribution.store_base import MapStore

    from .preprocessing import Request

SHOWN_FAILURES = 10


def batch_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The image files (by suffix) directly inside `folder`, sorted: regular files and symbolic links
    to them. Anything else named like an image (a FIFO, a socket, a device, a folder, a symbolic link
    loop or a link to nothing) is skipped, found by os.stat and never opened; a folder holding only
    such entries is a MapError naming them."""
    from saliency.viz.files import file_problem

    folder = Path(folder)
    if not folder.is_dir():
        raise MapError(f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist")
    named = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    files = [p for p in named if p.is_file()]
    if not files:
        skipped = [f"{p.name} {file_problem(p) or 'is not a regular file'}" for p in named[:3]]
        more = f" and {len(named) - 3} more" if len(named) > 3 else ""
        why = f"; skipped {', '.join(skipped)}{more}" if skipped else ""
        raise MapError(f"{folder} holds no image files ({', '.join(sorted(IMAGE_SUFFIXES))}){why}")
    return files


class Progress:
    """A progress bar on stderr for `attribution.batch`'s progress(done, total) calls, showing the
    images per second of this run and the time left. The bar appears at the first call: a run
    refused before any batch (a store in use, a damaged one) prints its one line and no bar."""

    shown: int
    first: int | None  # done when this run began (None: before the first call)
    started: float
    rate: str  # images per second, shown beside the bar
    open: bool

    def __init__(self, total: int, label: str) -> None:
        self.bar = typer.progressbar(length=total, label=label, file=sys.stderr, item_show_func=self._rate)
        self.shown, self.first, self.started, self.rate, self.open = 0, None, time.perf_counter(), "", False

    def _rate(self, _: int | None) -> str:
        """What the bar shows beside it (its item_show_func): the rate."""
        return self.rate

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return self.bar.__exit__(*exc) if self.open else None

    def __call__(self, done: int, total: int) -> None:
        if not self.open:
            self.bar.__enter__()
            self.open = True
        if self.first is None:  # images done before this run (--resume) do not count in the rate
            self.first = done - min(done, total)
            self.started = time.perf_counter()
        elapsed = time.perf_counter() - self.started
        self.rate = f"{(done - self.first) / elapsed:.0f} images/s" if elapsed > 0 else ""
        self.bar.update(done - self.shown)
        self.shown = done


def summary(store: MapStore, interrupted: bool = False) -> tuple[list[str], bool]:
    """The lines that end a run: where the maps are, then up to SHOWN_FAILURES failures."""
    done, errors = store.done, store.errors
    failed = [(f, e) for f, e, d in zip(store.files, errors, done) if d and e]
    made = int(done.sum()) - len(failed)
    if interrupted:
        lines = [f"interrupted: {int(done.sum())} of {len(store)} images are done in {store.path}; run the same "
                 f"command with --resume to continue"]
    else:
        lines = [f"wrote {made} of {len(store)} maps to {store.path}"]
    if failed:
        lines.append(f"{len(failed)} image{'s' if len(failed) > 1 else ''} failed (their errors are in the store):")
        lines += [f"  {Path(f).name}: {e}" for f, e in failed[:SHOWN_FAILURES]]
        if len(failed) > SHOWN_FAILURES:
            lines.append(f"  ... and {len(failed) - SHOWN_FAILURES} more")
    return lines, bool(failed)


def output_folder(out: str | os.PathLike[str]) -> Path:
    """`--out` of `saliency batch`, absolute (a model that calls os.chdir cannot move it); an empty
    name is a MapError."""
    if not str(out).strip():
        raise MapError("--out is empty; give the folder for the maps, e.g. --out maps")
    return Path(out).absolute()


def run_batch(folder: str | os.PathLike[str], source: zoo.ModelSource, run: Run, workers: int | None = None,
              scheduler: str | None = None, request: Request | None = None) -> MapStore:
    """The store of `saliency batch`: the images of `folder`, the model of `source` (a
    `zoo.ModelSource`), the `attribution.Run` `run` (its model, record and preprocessing added
    here: the model's and the options' of `request`, a `preprocessing.Request`), in this process or
    on the Dask cluster of `workers` / `scheduler`; its notes and progress on stderr."""
    from dataclasses import replace

    from saliency import attribution
    from saliency.attribution import distributed

    files = batch_files(folder)
    out = run.out
    assert out is not None  # saliency batch always writes a store (--out)
    net, source, record, notes = load_run_model(source, out, run.resume)
    style = run.style
    record.update({"sign": style.sign, "reduce": style.reduce, "overlay": style.overlay, "png": run.png is not None})
    preprocess = request.apply(net) if request is not None else None
    run = replace(run, record=record, model=source, preprocess=preprocess)
    note = zarr_note(out)
    for line in notes + ([note] if note else []):
        typer.echo(line, err=True)
    with distributed.connected(workers, scheduler) as dask_client:
        if dask_client is None:
            with Progress(len(files), f"{run.name} maps") as bar:
                return cast("MapStore", attribution.batch(net, files, run=run, progress=bar))  # run.out: a store
        with Progress(len(files), f"{run.name} maps on {len(dask_client.scheduler_info()['workers'])} workers") as bar:
            return distributed.batch(dask_client, run, files, model=net, progress=bar)


def load_run_model(source: zoo.ModelSource, out: str | os.PathLike[str],
                   resume: bool) -> tuple[zoo.Model, zoo.ModelSource, dict[str, Any], list[str]]:
    """(model, source, record, notes) for a run into the store of `out`: the model of `source` (a
    `zoo.ModelSource`), built with the random seed the store recorded when a resumed run's model
    file has no weights and no --random-seed is given; the source pinned to the model's identity
    (`zoo.identity`: what other processes must build), the record keeping both. A resumed run
    whose model differs from the store's is a StoreError saying what changed."""
    from dataclasses import replace

    from saliency.models import zoo

    from .mapping import load_model

    earlier = _earlier_record(out) if resume else None
    if earlier is not None and source.random_init and source.random_seed is None:
        source = replace(source, random_seed=earlier.get("random_seed"))
    net, source, notes = load_model(source)
    identity = zoo.identity(net, source)
    if earlier is not None:
        changes = zoo.identity_changes(earlier.get("identity"), identity)
        if changes:
            raise stores.StoreError(f"--resume: the model differs from the one that made the maps in {out}: "
                                    f"{'; '.join(changes)}; resume with the same model, or run without --resume "
                                    f"to start again")
    return net, source.pinned(identity), {**source.record(), "identity": identity}, notes


def _earlier_record(out: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record of the store in `out`, or None when there is none to read (the run says why)."""
    for use_zarr in (True, False):
        path = stores.store_path(out, use_zarr)
        if path.exists():
            try:
                return stores.open_store(path).attrs.get("record") or {}
            except stores.StoreError:
                return None
    return None


def zarr_note(out: str | os.PathLike[str]) -> str | None:
    """One line when the store is the .npy folder because Zarr is not installed."""
    if stores.zarr_available():
        return None
    return (f"note: zarr is not installed, so the maps are .npy chunks in {stores.store_path(out, False)}; "
            f"for a Zarr store: {stores.INSTALL_ZARR}")
