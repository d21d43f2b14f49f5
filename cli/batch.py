"""`saliency batch`: the maps of every image in a folder, streamed in batches into a store.

The wiring only: the pipeline, the store and the PNG names are `saliency.attribution.batch`,
`saliency.attribution.store` and `saliency.attribution.output_names`. This module lists the
folder's images, draws the progress bar (images per second, time left) and sums the run up.
"""
import sys
import time
from pathlib import Path

import typer

from saliency.attribution import store as stores

from .mapping import IMAGE_SUFFIXES, MapError

SHOWN_FAILURES = 10


def batch_files(folder):
    """The image files (by suffix) directly inside `folder`, sorted."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MapError(f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise MapError(f"{folder} holds no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
    return files


class Progress:
    """A progress bar on stderr for `attribution.batch`'s progress(done, total) calls, showing the
    images per second of this run and the time left."""

    def __init__(self, total, label):
        self.bar = typer.progressbar(length=total, label=label, file=sys.stderr,
                                     item_show_func=lambda _: self.rate)
        self.shown, self.first, self.started, self.rate = 0, None, time.perf_counter(), ""

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def __call__(self, done, total):
        if self.first is None:  # images done before this run (--resume) do not count in the rate
            self.first = done - min(done, total)
            self.started = time.perf_counter()
        elapsed = time.perf_counter() - self.started
        self.rate = f"{(done - self.first) / elapsed:.0f} images/s" if elapsed > 0 else ""
        self.bar.update(done - self.shown)
        self.shown = done


def summary(store, interrupted=False):
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


def zarr_note(out):
    """One line when the store is the .npy folder because Zarr is not installed."""
    if stores.zarr_available():
        return None
    return (f"note: zarr is not installed, so the maps are .npy chunks in {stores.store_path(out, False)}; "
            f"for a Zarr store: {stores.INSTALL_ZARR}")
