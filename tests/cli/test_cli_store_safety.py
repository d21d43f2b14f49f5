"""`saliency batch` and `saliency evaluate` on stores that are not theirs, in use by another run,
damaged, or on a full disk: one line and exit code 2, nothing deleted, never a success the store
does not back; names that are not UTF-8 go through."""
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from _cli import run_cli

from saliency import attribution
from saliency.attribution import store as stores
from saliency.attribution import store_files, store_lock
from saliency import models
from saliency.models import data

needs_zarr = pytest.mark.skipif(not stores.zarr_available(), reason="zarr is not installed")


def _png(path, chw):
    Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(path, format="PNG")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Eight shapes at the classifier's size: four batches of 2."""
    path = tmp_path_factory.mktemp("in")
    for i, chw in enumerate(data.shapes(8, seed=41)[0]):
        _png(path / f"img{i}.png", chw)
    return path


def _one_error(err):
    """The only line of `err` (an 'error: ...' line) but the progress bar's ("gradient maps" where
    stderr is not a terminal, written once batches were computed)."""
    lines = [line for line in err.strip().splitlines() if line != "gradient maps"]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_a_folder_that_is_not_a_store_is_refused_and_kept(folder, tmp_path, capsys):
    path = stores.store_path(tmp_path)
    path.mkdir()
    (path / "thesis.txt").write_text("precious")
    code, out, err = run_cli(capsys, "batch", folder, "--out", tmp_path)
    assert code == 2 and out == ""
    assert _one_error(err) == (f"error: {path} is not a map store of saliency-maps (it holds thesis.txt); nothing "
                               f"was deleted: move it away or give another --out")
    assert (path / "thesis.txt").read_text() == "precious"
    (path / "thesis.txt").unlink()
    assert run_cli(capsys, "batch", folder, "--out", tmp_path, "--batch-size", "2")[0] == 0
    (path / "notes.txt").write_text("mine")                           # put into a store of ours
    code, _, err = run_cli(capsys, "batch", folder, "--out", tmp_path)
    assert code == 2 and "is a map store, but also holds files that are not the store's (notes.txt)" in _one_error(err)
    assert (path / "notes.txt").exists() and attribution.open_store(path).done.all()


def _wait_for_lock(path, proc, timeout=120):
    """What the process `proc` wrote into the lock file of the store at `path`, once it holds it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            holder = json.loads(store_lock.lock_path(path).read_text())
            if holder.get("pid") == proc.pid:
                return holder
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    raise AssertionError(f"{proc.pid} never locked {path}")


@pytest.mark.skipif(os.name != "posix", reason="flock, SIGSTOP, SIGKILL")
def test_a_store_being_written_is_refused_to_a_second_run_and_to_evaluate(folder, tmp_path, capsys):
    out = tmp_path / "out"
    path = stores.store_path(out)
    first = [sys.executable, "-m", "saliency.cli.main", "batch", str(folder), "--out", str(out), "--method",
             "smoothgrad", "--batch-size", "1"]
    proc = subprocess.Popen(first, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        holder = _wait_for_lock(path, proc)
        os.kill(proc.pid, signal.SIGSTOP)                              # it holds the lock, and keeps it
        assert holder["command"] == f"saliency batch {folder} --out {out} --method smoothgrad --batch-size 1"
        since = time.strftime("%H:%M", time.localtime(holder["since"]))
        refusal = (f"error: {path} is being written by process {proc.pid} on {socket.gethostname()} "
                   f"(saliency batch {folder} --out {out} --method smoothgrad --batch-size 1) since {since}; wait "
                   f"for it or stop it")
        code, stdout, err = run_cli(capsys, "batch", folder, "--out", out)
        assert code == 2 and stdout == "" and _one_error(err) == refusal
        code, stdout, err = run_cli(capsys, "evaluate", out, "--out", tmp_path / "report")
        assert code == 2 and stdout == "" and _one_error(err) == refusal
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.communicate()
    code, stdout, err = run_cli(capsys, "batch", folder, "--out", out, "--batch-size", "2")  # the lock died with it
    assert code == 0, err
    assert stdout.startswith(f"wrote 8 of 8 maps to {path}")
    assert not store_lock.lock_path(path).exists()
    assert run_cli(capsys, "evaluate", out, "--out", tmp_path / "report", "--steps", "2", "--sample", "0")[0] == 0


@needs_zarr
def test_a_full_disk_says_which_file_how_far_and_that_resume_continues(folder, tmp_path, capsys, monkeypatch):
    path = stores.store_path(tmp_path)
    target = path / "maps" / "c" / "1" / "0" / "0" / "0"
    write = store_files._write_chunk

    def full_at_batch_1(where, data):
        if where == target:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write(where, data)

    monkeypatch.setattr(store_files, "_write_chunk", full_at_batch_1)
    code, out, err = run_cli(capsys, "batch", folder, "--out", tmp_path, "--batch-size", "2")
    assert code == 2 and out == ""
    assert _one_error(err) == (f"error: cannot write {target}: No space left on device; 2 of 8 images are done in "
                               f"{path}; make room on its disk and run the same command with --resume to continue")
    monkeypatch.undo()
    code, out, err = run_cli(capsys, "batch", folder, "--out", tmp_path, "--batch-size", "2", "--resume")
    assert code == 0 and out.startswith("wrote 8 of 8 maps"), err


@needs_zarr
def test_a_run_whose_store_is_not_whole_at_the_end_fails(folder, tmp_path, capsys, monkeypatch):
    write = stores._ZarrStore.write_batch

    def write_then_lose_batch_0(store, k, *args):  # another process deleting a chunk under the run
        write(store, k, *args)
        if k == 3:
            (store.path / "done" / "c" / "0").unlink()

    monkeypatch.setattr(stores._ZarrStore, "write_batch", write_then_lose_batch_0)
    code, out, err = run_cli(capsys, "batch", folder, "--out", tmp_path, "--batch-size", "2")
    assert code == 2 and out == ""
    assert _one_error(err) == (f"error: the map store {stores.store_path(tmp_path)} is not whole after the run: "
                               f"batch 0 (images 0-1): not done; run the same command with --resume to compute it "
                               f"again")


@pytest.fixture(scope="module")
def reference(folder, tmp_path_factory):
    """The maps of the folder in batches of 2 and their deletion areas (steps 2), from stores that
    were never damaged."""
    out = tmp_path_factory.mktemp("reference")
    store = attribution.batch(models.load("shapes"), sorted(folder.iterdir()), "gradient", out=out, batch_size=2)
    ev = attribution.evaluate_store(models.load("shapes"), store, steps=2, sample=0)
    return np.asarray(store.maps), ev.deletion_auc


DAMAGE = {  # (use_zarr, batch 1's file, what is done to it, the reason the store gives)
    "zarr chunk cut": (True, "maps/c/1/0/0/0", lambda p: os.truncate(p, 100), "maps/c/1/0/0/0 is 100 bytes, not 98304"),
    "npy record garbage": (False, "batch.1.json", lambda p: p.write_text("{"), "batch.1.json is not JSON"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_store_is_one_line_for_evaluate_and_resume_recomputes_it(folder, reference, tmp_path, capsys,
                                                                           monkeypatch, case):
    use_zarr, name, damage, reason = DAMAGE[case]
    if use_zarr and not stores.zarr_available():
        pytest.skip("zarr is not installed")
    monkeypatch.setattr(stores, "zarr_available", lambda: use_zarr)
    args = ["batch", folder, "--out", tmp_path, "--batch-size", "2"]
    assert run_cli(capsys, *args)[0] == 0
    path = stores.store_path(tmp_path)
    damage(path / name)
    report = ["--out", tmp_path / "report", "--steps", "2", "--sample", "0"]
    code, out, err = run_cli(capsys, "evaluate", tmp_path, *report)
    assert code == 2 and out == ""
    assert _one_error(err) == (f"error: the map store {path} has 1 batch marked done that cannot be read: batch 1 "
                               f"(images 2-3): {reason}; run saliency batch again with --out {tmp_path} --resume "
                               f"(the same images and options) to compute it again")
    code, out, err = run_cli(capsys, *args, "--resume")
    assert code == 0 and out.startswith(f"wrote 8 of 8 maps to {path}"), err
    np.testing.assert_array_equal(np.asarray(attribution.open_store(path).maps), reference[0])
    assert run_cli(capsys, "evaluate", tmp_path, *report)[0] == 0
    numbers = json.loads((tmp_path / "report" / "evaluation.json").read_text())[str(tmp_path)]
    np.testing.assert_array_equal(numbers["deletion_auc"], reference[1])


@needs_zarr
def test_file_names_that_are_not_utf8_go_through(folder, tmp_path, capsys):
    names = [os.fsdecode(b"caf\xff.png"), "back\\slash.png", "plain.png"]
    images = tmp_path / "in"
    images.mkdir()
    for name, source in zip(names, sorted(folder.iterdir())):
        (images / name).write_bytes(source.read_bytes())
    code, out, err = run_cli(capsys, "batch", images, "--out", tmp_path / "out", "--png")
    assert code == 0, err
    store = attribution.open_store(stores.store_path(tmp_path / "out"))
    assert store.files == [str(images / name) for name in sorted(names)]
    assert (tmp_path / "out" / os.fsdecode(b"caf\xff_gradient.png")).is_file()
    code, out, err = run_cli(capsys, "batch", images, "--out", tmp_path / "out", "--png", "--resume")
    assert code == 0 and out.startswith("wrote 3 of 3 maps"), err
    code, _, err = run_cli(capsys, "evaluate", tmp_path / "out", "--out", tmp_path / "report", "--steps", "2")
    assert code == 0, err


# -- on Dask -----------------------------------------------------------------------------------------

def test_on_dask_the_client_checks_the_store_before_sending_any_task(folder, tmp_path, capsys):
    from saliency.cli import evaluate

    assert run_cli(capsys, "batch", folder, "--out", tmp_path, "--batch-size", "2")[0] == 0
    store = attribution.open_store(stores.store_path(tmp_path))
    (store.path / ("maps/c/2/0/0/0" if store.backend == "zarr" else "maps.2.npy")).unlink()

    class NoClient:  # a task sent would fail on this
        def submit(self, *args, **kwargs):
            raise AssertionError("a task was sent")

    with pytest.raises(attribution.StoreError, match=r"batch 2 \(images 4-5\): maps"):
        evaluate.evaluate(store, models.load("shapes"), 2, 0, "abs", None, NoClient(), {})


@pytest.mark.slow
@needs_zarr
@pytest.mark.skipif(os.name != "posix", reason="worker processes")
def test_on_dask_a_workers_store_error_is_one_line(folder, tmp_path, capsys):
    pytest.importorskip("distributed")
    assert run_cli(capsys, "batch", folder, "--out", tmp_path, "--batch-size", "2")[0] == 0
    path = stores.store_path(tmp_path)
    chunk = path / "maps" / "c" / "2" / "0" / "0" / "0"
    chunk.write_bytes(np.full(chunk.stat().st_size // 4, np.nan, "<f4").tobytes())  # whole by its size
    done = subprocess.run([sys.executable, "-m", "saliency.cli.main", "evaluate", str(tmp_path), "--out",
                           str(tmp_path / "report"), "--steps", "2", "--sample", "0", "--workers", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2                                          # the worker's logs are in stderr too
    assert _one_error(done.stderr) == (f"error: the map store {path} is damaged: the map of {folder / 'img4.png'} "
                                       f"(batch 2) holds NaN or infinite values, though its batch is done without "
                                       f"an error; make the store again (saliency batch without --resume)")
