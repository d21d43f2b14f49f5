"""`saliency batch --workers N` or `--scheduler ADDRESS`: the same run on a Dask cluster.

The client makes the store (`attribution.prepare`), splits the batches still to compute into
tasks of about TASK_IMAGES images, and sends each task the model's description (name or file,
weights, arguments), never the model or any map. A worker loads the model once per process and
keeps it (`_models`), computes its task's batches with `attribution.fill` and writes them into
the store itself: maps never pass through the scheduler. A batch is marked done only after its
maps are written and a task skips the batches already done, so a task that Dask runs again after
its worker died rewrites only the batches that worker had not finished. The store's folder must
be one path that every worker can read and write (on one machine: any folder).
"""
import json

from saliency import attribution

from .mapping import MapError, method_options

TASK_IMAGES = 256
INSTALL = "pip install 'saliency-maps[scale]'"

_models = {}  # in each worker process: {model description: model}


def client(workers=None, scheduler=None):
    """(Dask client, local cluster or None): a cluster of `workers` local processes, or the running
    scheduler at `scheduler`."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise MapError(f"--workers and --scheduler run on Dask, which is not installed: {INSTALL}") from None
    if scheduler:
        try:
            return Client(scheduler, timeout="10s"), None
        except (OSError, TimeoutError) as exc:
            raise MapError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 in its workers, so that freed memory goes back
    # to the system at once; then every large array of every batch comes back as fresh pages whose
    # faults cost as much as computing the maps. The workers keep glibc's own setting.
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    return Client(cluster), cluster


def _model(spec):
    from saliency.models.zoo import resolve

    key = json.dumps(spec, sort_keys=True)
    if key not in _models:
        _models[key] = resolve(spec["model"], spec["weights"], spec["model_args"])
    return _models[key]


def _task(spec, files, method, seed, store_path, batches, png, look, layer):
    """One task, on a worker: the batches `batches` of the run into the store at `store_path`."""
    net = _model(spec)
    store = attribution.open_store(store_path)
    sign, reduce, overlay = look
    return attribution.dataset.fill(net, files, method, seed, store, batches, png=png, sign=sign, reduce=reduce,
                                    overlay=overlay, **method_options(net, method, layer))


def run(dask_client, spec, files, method, seed, out, *, batch_size, png=None, look=("abs", "sum", False),
        layer=None, resume=False, record=None, progress=None):
    """The run of `saliency batch` on `dask_client`'s workers; returns the store."""
    from distributed import as_completed

    net = _model(spec)  # here too: the store's shape, and the options checked before any task
    files = [str(f) for f in files]
    store = attribution.dataset.prepare(net, files, method, seed, out, batch_size=batch_size, resume=resume,
                                        record=record, **method_options(net, method, layer))
    done = store.done
    todo = [k for k in range(store.batches) if not done[k * batch_size:(k + 1) * batch_size].all()]
    per_task = max(1, TASK_IMAGES // batch_size)
    groups = [todo[i:i + per_task] for i in range(0, len(todo), per_task)]
    finished = int(done.sum())
    futures = [dask_client.submit(_task, spec, files, method, seed, str(store.path), group, png, look, layer,
                                  pure=False) for group in groups]
    try:
        for future in as_completed(futures):
            finished += future.result()
            if progress is not None:
                progress(finished, len(files))
    except BaseException:
        dask_client.cancel(futures)
        raise
    return attribution.open_store(store.path)
