"""`saliency batch --workers`: the run on a local Dask cluster of worker processes stores the maps of
the single-process run, bit for bit, also when a worker is killed in the middle of it, and no batch
is written whole twice; `saliency evaluate --workers` reports the numbers of the single-process run."""
import json
import os
import signal
import sys
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from saliency import attribution
from saliency.attribution import store as stores
from saliency.cli.main import main
from saliency.models import data
from saliency.models.zoo import ModelSource

distributed = pytest.importorskip("distributed")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="worker processes, SIGKILL")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("images")
    masks = path.parent / (path.name + "_masks")
    masks.mkdir()
    images, _, info = data.shapes(48, seed=43, return_info=True)
    for i, chw in enumerate(images):
        Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(path / f"img{i:02d}.png")
        Image.fromarray(np.where(info["mask"][i] >= 0.5, 255, 0).astype(np.uint8)).save(masks / f"img{i:02d}.png")
    (path / "broken.png").write_bytes(b"not a png")
    return path


@pytest.fixture(scope="module")
def single(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    with pytest.raises(SystemExit):
        main(["batch", str(folder), "--out", str(out), "--batch-size", "4"])
    return attribution.open_store(stores.store_path(out))


def _same(a, b):
    np.testing.assert_array_equal(np.asarray(a.maps), np.asarray(b.maps))  # bit for bit, NaN where failed
    np.testing.assert_array_equal(a.predicted, b.predicted)
    assert a.errors == b.errors and a.files == b.files and a.done.all() and b.done.all()


def test_two_worker_processes_store_the_maps_of_one_process(folder, single, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["batch", str(folder), "--out", str(tmp_path), "--batch-size", "4", "--workers", "2"])
    assert info.value.code == 2  # broken.png
    assert "wrote 48 of 49 maps" in capsys.readouterr().out
    _same(attribution.open_store(stores.store_path(tmp_path)), single)


def test_a_worker_killed_mid_run_loses_nothing(folder, single, tmp_path, monkeypatch):
    from saliency.attribution import distributed as runner

    monkeypatch.setattr(runner, "TASK_IMAGES", 8)  # 7 tasks of two batches
    client, cluster = runner.client(workers=2)
    try:
        pids = client.run(os.getpid)
        killed = []

        def kill_one(done, total):
            if not killed:
                victim = sorted(pids.values())[0]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)

        run = attribution.Run.build("gradient", out=tmp_path, batch_size=4, model=ModelSource("shapes"))
        store = runner.batch(client, run, sorted(folder.iterdir()), progress=kill_one)
        assert killed and killed[0] not in client.run(os.getpid).values()  # the nanny started a new process
    finally:
        client.close()
        cluster.close()
    _same(store, single)


def _mark_first(marker, text):
    """Whether this call is the first of all processes to claim `marker` (then it holds `text`)."""
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return False
    os.write(fd, text.encode())
    os.close(fd)
    return True


class _LogWritesKillOnce(distributed.WorkerPlugin):
    """In every worker process, also one Dask starts again: a line "PID BATCH" appended to `log`
    after each batch written whole into a Zarr store. The first process to reach the `done` chunk
    of its second batch is killed (SIGKILL) before writing it: the batch's maps, predictions and
    errors are written, it is not marked done, and `marker` says "PID BATCH" of it."""

    name = "log-writes-kill-once"

    def __init__(self, log, marker):
        self.log, self.marker = str(log), str(marker)

    def setup(self, worker):
        log, marker, written = self.log, self.marker, []
        write_batch, put = stores._ZarrStore.write_batch, stores._ZarrStore._put

        def logged(store, k, *args):
            write_batch(store, k, *args)
            written.append(k)
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, f"{os.getpid()} {k}\n".encode())  # one write of a few bytes: lines never mix
            os.close(fd)

        def put_or_die(store, name, k, data):
            if name == "done" and len(written) == 1 and _mark_first(marker, f"{os.getpid()} {k}"):
                os.kill(os.getpid(), signal.SIGKILL)
            return put(store, name, k, data)

        stores._ZarrStore.write_batch = logged
        stores._ZarrStore._put = put_or_die


@pytest.mark.skipif(not stores.zarr_available(), reason="zarr is not installed")
def test_a_worker_killed_mid_write_leaves_every_batch_written_whole_once(folder, single, tmp_path, monkeypatch):
    import cloudpickle

    from saliency.attribution import distributed as runner

    # the worker is killed from inside, at the one moment that leaves a batch half-written: a kill
    # from outside could also land between a batch's last write and its line in the log
    monkeypatch.setattr(runner, "TASK_IMAGES", 8)  # 7 tasks of two batches (the last of one)
    log, marker, out = tmp_path / "writes.log", tmp_path / "killed", tmp_path / "out"
    client, cluster = runner.client(workers=2)
    calls = []
    try:
        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
        try:
            client.register_plugin(_LogWritesKillOnce(log, marker))
        finally:
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        run = attribution.Run.build("gradient", out=out, batch_size=4, model=ModelSource("shapes"))
        store = runner.batch(client, run, sorted(folder.iterdir()), progress=lambda done, total: calls.append((done, total)))
        alive = client.run(os.getpid).values()
    finally:
        client.close()
        cluster.close()
    victim, half_written = map(int, marker.read_text().split())
    assert victim not in alive                                      # the nanny started a new process
    writes = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    assert Counter(k for _, k in writes) == Counter(range(store.batches))  # each batch written whole once
    assert sum(pid == victim for pid, _ in writes) == 1                      # the victim finished one batch,
    assert next(pid for pid, k in writes if k == half_written) != victim      # another process its second
    assert calls[-1] == (len(store), len(store))
    _same(store, single)
    files = {p.relative_to(store.path) for p in store.path.rglob("*") if p.is_file()}
    assert files == {p.relative_to(single.path) for p in single.path.rglob("*") if p.is_file()}  # nothing left over


def test_evaluate_on_two_worker_processes_reports_the_numbers_of_one_process(folder, single, tmp_path, capsys,
                                                                             monkeypatch):
    from saliency.attribution import distributed as runner

    monkeypatch.setattr(runner, "TASK_IMAGES", 16)  # 4 tasks of up to four batches
    masks = folder.parent / (folder.name + "_masks")  # every metric, each with its random draws
    args = ["evaluate", str(single.path), "--steps", "4", "--sample", "2", "--metrics", "all",
            "--masks", str(masks), "--metric-option", "road.fractions=0.2,0.7", "--metric-option",
            "max_sensitivity.samples=2", "--metric-option", "infidelity.samples=3"]
    for out, more in (("one", []), ("dask", ["--workers", "2"])):
        with pytest.raises(SystemExit) as info:
            main(args + ["--out", str(tmp_path / out)] + more)
            raise SystemExit(0)
        assert info.value.code == 0
    assert "on 2 workers" in capsys.readouterr().err
    one, dask = (json.loads((tmp_path / out / "evaluation.json").read_text()) for out in ("one", "dask"))
    assert len(one[str(single.path)]["deletion_auc"]) == 48           # broken.png has no map
    assert len(one[str(single.path)]["road_morf_curve"][0]) == 2 and len(one[str(single.path)]["sparseness"]) == 48
    assert dask == one                                                # every number, to the last bit
    assert (tmp_path / "dask" / "evaluation.md").read_text() == (tmp_path / "one" / "evaluation.md").read_text()
    assert (tmp_path / "dask" / "evaluation.png").stat().st_size > 0


def test_without_dask_the_options_say_how_to_get_it(folder, single, tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(SystemExit) as info:
        main(["batch", str(folder), "--out", str(tmp_path), "--workers", "2"])
    assert info.value.code == 2
    assert "Dask, which is not installed: pip install 'saliency-maps[scale]'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["evaluate", str(single.path), "--out", str(tmp_path / "report"), "--workers", "2"])
    assert info.value.code == 2
    assert capsys.readouterr().err == ("error: running on a cluster needs Dask, which is not installed: "
                                       "pip install 'saliency-maps[scale]'\n")
