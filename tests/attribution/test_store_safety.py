"""What a run does to what is already on disk: it replaces only a map store this tool wrote (and
never files put into one), it locks the store it writes (a second run or an evaluation is refused,
naming the first; a killed holder releases it), it never returns a store that does not read back
whole, a full disk names the file and what is done, and file names that UTF-8 cannot hold are
kept exactly. Stores the version before wrote still open, resume and evaluate."""
import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
from _store_fixtures import FORMATS, OLD_STORES, chunk_of, needs_zarr, tiny_model, write_images

from saliency import attribution
from saliency.attribution import store as stores
from saliency.attribution import store_files, store_lock


@pytest.fixture(scope="module")
def model():
    return tiny_model()


@pytest.fixture(scope="module")
def whole(model, tmp_path_factory):
    """The five images and the maps of one whole run of them (no store)."""
    paths = write_images(tmp_path_factory.mktemp("images"))
    return paths, attribution.batch(model, paths, "gradient", batch_size=2)


def _run(model, paths, out, use_zarr, **kwargs):
    return attribution.batch(model, paths, "gradient", out=out, batch_size=kwargs.pop("batch_size", 2),
                             use_zarr=use_zarr, **kwargs)


def _same(store, want):
    np.testing.assert_array_equal(np.asarray(store.maps), want.maps)
    np.testing.assert_array_equal(store.predicted, want.predicted)
    assert store.errors == list(want.errors) and store.done.all()


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_what_is_not_a_map_store_is_never_deleted(model, whole, tmp_path, use_zarr):
    paths, _ = whole
    path = stores.store_path(tmp_path, use_zarr)
    path.mkdir()
    (path / "thesis.txt").write_text("precious")
    with pytest.raises(attribution.StoreError, match=re.escape(
            f"{path} is not a map store of saliency-maps (it holds thesis.txt); nothing was deleted: move it away "
            f"or give another --out")):
        _run(model, paths, tmp_path, use_zarr)
    assert (path / "thesis.txt").read_text() == "precious"
    shutil.rmtree(path)
    path.write_text("a file")
    with pytest.raises(attribution.StoreError, match=re.escape(f"{path} is a file, not a map store; nothing")):
        _run(model, paths, tmp_path, use_zarr)
    assert path.read_text() == "a file"
    path.unlink()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "thesis.txt").write_text("precious")
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(attribution.StoreError, match="is a symbolic link, not a map store; nothing was deleted"):
        _run(model, paths, tmp_path, use_zarr)
    assert (tmp_path / "elsewhere" / "thesis.txt").read_text() == "precious"
    path.unlink()
    path.mkdir()                                                       # an empty folder is room enough
    assert _run(model, paths, tmp_path, use_zarr).done.all()


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_a_store_of_ours_is_replaced_file_by_file_never_with_files_of_others(model, whole, tmp_path, use_zarr):
    paths, want = whole
    first = _run(model, paths, tmp_path, use_zarr)
    assert first.attrs["format"] == store_files.MARKER
    inside = first.path / ("maps" if use_zarr else "notes")
    inside.mkdir(exist_ok=True)
    (inside / "notes.txt").write_text("mine")
    (first.path / "thesis.txt").write_text("precious")
    with pytest.raises(attribution.StoreError, match=re.escape(
            f"{first.path} is a map store, but also holds files that are not the store's (")) as info:
        _run(model, paths, tmp_path, use_zarr, batch_size=5)
    assert "thesis.txt" in str(info.value) and "notes.txt" in str(info.value)
    assert (first.path / "thesis.txt").exists() and (inside / "notes.txt").exists()
    _same(attribution.open_store(first.path), want)                       # nothing was deleted
    shutil.rmtree(inside) if not use_zarr else (inside / "notes.txt").unlink()
    (first.path / "thesis.txt").unlink()
    (chunk_of(first, 1).parent / ".left.by.a.killed.writer.part").write_bytes(b"x")  # the store's own
    second = attribution.batch(model, paths, "input_x_gradient", out=tmp_path, batch_size=5, use_zarr=use_zarr)
    assert second.attrs["method"] == "input_x_gradient" and second.batch_size == 5 and second.done.all()
    assert not chunk_of(first, 1).exists()                               # no chunk of the first run is left
    assert not list(second.path.rglob("*.part"))


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_a_store_of_the_version_before_opens_resumes_evaluates_and_is_ours(model, tmp_path, monkeypatch, use_zarr):
    shutil.copytree(OLD_STORES, tmp_path / "old")
    monkeypatch.chdir(tmp_path / "old")                                   # its files: images/img0.png, ...
    out = "zarr" if use_zarr else "npy"
    old = attribution.open_store(stores.store_path(out, use_zarr))
    assert "format" not in old.attrs and old.attrs["format_version"] == 1
    paths = [f"images/img{i}.png" for i in range(5)]
    assert old.files == paths and old.done.all() and old.damaged == {}
    want = attribution.batch(model, paths, "gradient", batch_size=2)
    np.testing.assert_allclose(np.asarray(old.maps), want.maps, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(old.predicted, want.predicted)
    kept = np.asarray(old.maps)
    chunk_of(old, 1, "done").unlink()                                    # batch 1 not done: resume computes it
    seen = []
    again = _run(model, paths, out, use_zarr, resume=True, record={"model": "make_cnn"},
                 progress=lambda done, total: seen.append(done))
    assert seen == [5] and again.done.all()                              # batch 1 alone
    np.testing.assert_allclose(np.asarray(again.maps), kept, rtol=1e-5, atol=1e-7)
    ev = attribution.evaluate_store(model, again.path, steps=2, sample=0)
    assert ev.files == paths and np.isfinite(ev.deletion_auc).all()
    assert _run(model, paths, out, use_zarr, batch_size=5).batch_size == 5  # ours: replaced


HOLDER = """
import sys, time
from saliency.attribution import store_lock
lock = store_lock.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(os.name != "posix", reason="flock, SIGKILL")
def test_a_store_is_locked_while_written_and_a_killed_holder_releases_it(model, whole, tmp_path):
    paths, want = whole
    path = stores.store_path(tmp_path, False)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        who = re.escape(f"{path} is being written by process {holder.pid} on {socket.gethostname()} (")
        since = r"\) since \d\d:\d\d; wait for it or stop it$"
        with pytest.raises(attribution.StoreError, match=who + r".*" + since):
            _run(model, paths, tmp_path, False)
        assert not path.exists()                                          # refused before anything was made
        with pytest.raises(attribution.StoreError, match=who):
            attribution.pipeline.prepare(model, paths, "gradient", out=tmp_path, batch_size=2, use_zarr=False)
        with pytest.raises(attribution.StoreError, match=who):
            attribution.open_store(path, lock="read")
        with pytest.raises(attribution.StoreError, match=who):
            attribution.evaluate_store(model, path, steps=2)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        holder.kill()
        holder.wait()
    assert store_lock.lock_path(path).exists()                            # what the killed process left
    _same(_run(model, paths, tmp_path, False), want)                      # ... holds no lock
    assert not store_lock.lock_path(path).exists()


def test_readers_share_the_lock_and_keep_writers_out(model, whole, tmp_path):
    paths, _ = whole
    store = _run(model, paths, tmp_path, False)
    with attribution.open_store(store.path, lock="read"), attribution.open_store(store.path, lock="read"):
        with pytest.raises(attribution.StoreError, match=re.escape(
                f"{store.path} is being read by process {os.getpid()} on ")):
            _run(model, paths, tmp_path, False)
        attribution.evaluate_store(model, store.path, steps=2, sample=0)  # a third reader
    with attribution.pipeline.prepare(model, paths, "gradient", out=tmp_path, batch_size=2, use_zarr=False) as open_:
        with pytest.raises(attribution.StoreError, match=re.escape(
                f"{store.path} is being written by process {os.getpid()} on ")):
            attribution.evaluate_store(model, open_.path, steps=2)
    assert _run(model, paths, tmp_path, False).done.all()
    assert not store_lock.lock_path(store.path).exists()


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_a_run_whose_store_does_not_read_back_whole_fails(model, whole, tmp_path, monkeypatch, use_zarr):
    paths, want = whole
    cls = stores._ZarrStore if use_zarr else stores._FolderStore
    write = cls.write_batch

    def write_then_lose_batch_0(store, k, *args):  # another process deleting a chunk under the run
        write(store, k, *args)
        if k == 1:
            chunk_of(store, 0).unlink()

    monkeypatch.setattr(cls, "write_batch", write_then_lose_batch_0)
    name = "maps/c/0/0/0/0" if use_zarr else "maps.0.npy"
    with pytest.raises(attribution.StoreError, match=re.escape(
            f"is not whole after the run: batch 0 (images 0-1): {name} is missing; run the same command with "
            f"--resume to compute it again")):
        _run(model, paths, tmp_path, use_zarr)
    monkeypatch.undo()
    seen = []
    _same(_run(model, paths, tmp_path, use_zarr, resume=True, progress=lambda d, t: seen.append(d)), want)
    assert seen == [5]                                                    # batch 0 alone computed again


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_a_full_disk_names_the_file_what_is_done_and_that_resume_continues(model, whole, tmp_path, monkeypatch,
                                                                         use_zarr):
    paths, want = whole
    path = stores.store_path(tmp_path, use_zarr)
    target = path / ("maps/c/1/0/0/0" if use_zarr else "maps.1.npy")
    write = store_files._write_chunk

    def full_at_batch_1(where, data):
        if where == target:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write(where, data)

    monkeypatch.setattr(store_files, "_write_chunk", full_at_batch_1)
    with pytest.raises(attribution.StoreError, match="^" + re.escape(
            f"cannot write {target}: No space left on device; 2 of 5 images are done in {path}; make room on its "
            f"disk and run the same command with --resume to continue") + "$"):
        _run(model, paths, tmp_path, use_zarr)
    monkeypatch.undo()
    assert attribution.open_store(path).done.tolist() == [True, True, False, False, False]
    _same(_run(model, paths, tmp_path, use_zarr, resume=True), want)


NAMES = ["caf\udcff.png", "back\\slash.png", "\u00e9t\u00e9.png", "x\\udcff.png", "plain.png"]


@pytest.mark.parametrize("use_zarr", FORMATS)
def test_names_utf8_cannot_hold_are_kept_exactly(model, tmp_path, use_zarr):
    paths = write_images(tmp_path / "in", names=NAMES)
    broken = str(tmp_path / "in" / "bad\udcfe.png")
    with open(broken, "wb") as f:
        f.write(b"not a png")
    paths.insert(2, broken)
    store = _run(model, paths, tmp_path / "out", use_zarr, png=tmp_path / "out")
    assert store.files == paths and store.done.all()
    # an error's text is kept as it was (zarr: with \\udcfe for what UTF-8 cannot hold)
    assert ("bad\\udcfe.png" if use_zarr else "bad\udcfe.png") in store.errors[2]
    assert not any(store.errors[:2] + store.errors[3:])
    assert (tmp_path / "out" / "caf\udcff_gradient.png").is_file()
    again = attribution.open_store(store.path)
    assert again.files == paths                                         # the very same str, surrogates and all
    chunk_of(again, 1, "done").unlink()
    assert _run(model, paths, tmp_path / "out", use_zarr, resume=True).done.all()  # the same images: resumed
    ev = attribution.evaluate_store(model, store.path, steps=2, sample=0)
    assert ev.files == paths[:2] + paths[3:]


@needs_zarr
def test_zarr_keeps_such_names_escaped_only_when_it_must(model, tmp_path):
    import zarr

    paths = write_images(tmp_path / "in", names=NAMES)
    store = _run(model, paths, tmp_path / "a", True)
    group = zarr.open_group(str(store.path), mode="r")
    assert group.attrs["file_names"] == "escaped"
    assert group["files"][:].tolist()[:2] == [str(tmp_path / "in" / "caf\\udcff.png"),
                                             str(tmp_path / "in" / "back\\\\slash.png")]
    plain = _run(model, paths[2:3] + paths[4:], tmp_path / "b", True)
    group = zarr.open_group(str(plain.path), mode="r")
    assert "file_names" not in group.attrs and group["files"][:].tolist() == plain.files
