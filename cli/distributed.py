"""`saliency batch` and `saliency evaluate` with `--workers N` or `--scheduler ADDRESS`: the same
runs on a Dask cluster.

The client splits the store's batches into tasks of about TASK_IMAGES images and sends each task
the model's description (name or file, weights, arguments) and the store's path, never the model
or any map. A worker loads the model once per process and keeps it (`_models`), then reads its
task's images and works on them: for `batch`, it computes their maps with `attribution.fill`
and writes them into the store itself (the client made the store, `attribution.prepare`); for
`evaluate`, it reads their maps from the store and returns only the deletion and insertion
curves (`attribution.store_evaluation.batch_curves`). Maps never pass through the scheduler.

A batch is marked done only after its maps are written and a task skips the batches already
done, so a task that Dask runs again after its worker died rewrites only the batches that worker
had not finished. The store's folder must be one path that every worker can read and write (on
one machine: any folder).
"""
import contextlib
import json

from saliency import attribution
from saliency.kernels.memory import KEEP_BYTES

from .mapping import MapError, method_options

TASK_IMAGES = 256
INSTALL = "pip install 'saliency-maps[scale]'"

_models = {}  # in each worker process: {model description: model}


def client(workers=None, scheduler=None):
    """(Dask client, local cluster or None): a cluster of `workers` local processes, or the running
    scheduler at `scheduler`."""
    if workers and scheduler:
        raise MapError("give --workers (a local cluster) or --scheduler (a running one), not both")
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
    # faults cost as much as computing the maps. The local workers keep freed memory instead, as
    # the command line does (kernels.memory.keep_freed_memory, here through glibc's variables).
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    environ.update({"MALLOC_TRIM_THRESHOLD_": str(KEEP_BYTES), "MALLOC_MMAP_THRESHOLD_": str(KEEP_BYTES)})
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    return Client(cluster), cluster


@contextlib.contextmanager
def connected(workers=None, scheduler=None):
    """The Dask client of `client(workers, scheduler)`, closed with its local cluster at the end;
    None when neither is given (the work runs in this process)."""
    if not (workers or scheduler):
        yield None
        return
    dask_client, cluster = client(workers, scheduler)
    try:
        yield dask_client
    finally:
        dask_client.close()
        if cluster is not None:
            cluster.close()


def _model(spec):
    """The model of `spec` (a `zoo.ModelSource`'s record, and the `identity` the client's model
    has), loaded once per worker process; a model that differs from the client's (another weights
    or model file at the same path on this machine, another random initialisation) is refused."""
    from saliency.models import zoo

    key = json.dumps(spec, sort_keys=True)
    if key not in _models:
        source = zoo.ModelSource(spec["model"], spec["weights"], spec["model_args"], spec.get("random_seed"))
        model, source, identity = source.load()
        changes = zoo.identity_changes(spec.get("identity"), identity)
        if changes:
            import socket

            raise MapError(f"the model on the Dask worker on {socket.gethostname()} differs from the one the run "
                           f"was started with: {'; '.join(changes)}; every worker must see the same model and "
                           f"weights files")
        _models[key] = model
    return _models[key]


def _task(spec, files, method, seed, store_path, batches, png, look, layer):
    """One task, on a worker: the batches `batches` of the run into the store at `store_path`."""
    net = _model(spec)
    store = attribution.open_store(store_path)
    sign, reduce, overlay = look
    return attribution.dataset.fill(net, files, method, seed, store, batches, png=png, sign=sign, reduce=reduce,
                                    overlay=overlay, **method_options(net, method, layer))


def _tasks(batches, batch_size):
    """`batches` in groups of about TASK_IMAGES images, one group per task."""
    per_task = max(1, TASK_IMAGES // batch_size)
    return [batches[i:i + per_task] for i in range(0, len(batches), per_task)]


def _gather(dask_client, store, futures, progress):
    """The results of `futures` ({future: the batches of `store` it works on}) as they finish,
    calling progress(images done, images) after each: a task counts its batches' images (also when
    Dask ran it again after its worker died and it skipped the batches already done), the images
    of no task count as done. On any failure (or Ctrl-C) the other tasks are cancelled; a task's
    `_Refused` is raised here as the error it stands for (one line, as in a run in one process)."""
    from distributed import as_completed

    results = []
    finished = len(store) - sum(_images(store, batches) for batches in futures.values())
    try:
        for future in as_completed(futures):
            result = future.result()
            if isinstance(result, _Refused):
                raise result.error
            results.append(result)
            finished += _images(store, futures[future])
            if progress is not None:
                progress(finished, len(store))
    except BaseException:
        dask_client.cancel(list(futures))
        raise
    return results


class _Refused:
    """What a task returns instead of raising an error of the input (a damaged store, a full disk,
    a model that differs): Dask would log a failed task's traceback on the worker; the client
    raises `error` itself."""

    def __init__(self, error):
        self.error = error


def _reporting(fn, *args):
    """fn(*args) on a worker, its input errors returned as a `_Refused`."""
    try:
        return fn(*args)
    except (attribution.StoreError, attribution.InputError, MapError) as exc:
        return _Refused(type(exc)(str(exc)))


def _images(store, batches):
    return sum(b - a for a, b in map(store.span, batches))


def run(dask_client, spec, files, method, seed, out, *, batch_size, png=None, look=("abs", "sum", False),
        layer=None, resume=False, record=None, progress=None, net=None):
    """The run of `saliency batch` on `dask_client`'s workers; returns the store. `net`: the model
    of `spec`, where the caller has it already."""
    net = _model(spec) if net is None else net  # here too: the store's shape, the options checked before any task
    files = [str(f) for f in files]
    store = attribution.dataset.prepare(net, files, method, seed, out, batch_size=batch_size, resume=resume,
                                        record=record, **method_options(net, method, layer))
    with store:  # the client holds the store's lock for the run; the workers write inside it
        done = store.done
        todo = [k for k in range(store.batches) if not done[k * batch_size:(k + 1) * batch_size].all()]
        futures = {dask_client.submit(_reporting, _task, spec, files, method, seed, str(store.path), group, png,
                                      look, layer, pure=False): group for group in _tasks(todo, batch_size)}
        _gather(dask_client, store, futures, progress)
        return store.check_whole()  # read back: every batch done and whole, or a StoreError


def _curves_task(spec, store_path, batches, steps, sign):
    """One task, on a worker: the deletion and insertion curves of the batches `batches` of the
    store at `store_path`."""
    return attribution.store_evaluation.batch_curves(_model(spec), store_path, batches, steps=steps, sign=sign)


def curves(dask_client, spec, store, *, steps, sign, progress=None):
    """The deletion and insertion curves of every map of `store` (made by the model of `spec`),
    computed on `dask_client`'s workers: the BatchCurves of its batches, for `evaluate_store`'s
    `curves=`. The caller checks the store first (`store_evaluation.check`, in this process: a
    damaged store is one line before any task is sent) and holds its lock for reading
    (`evaluate.find_store`)."""
    done = store.done
    todo = [k for k in range(store.batches) if done[k * store.batch_size:(k + 1) * store.batch_size].any()]
    futures = {dask_client.submit(_reporting, _curves_task, spec, str(store.path), group, steps, sign,
                                  pure=False): group for group in _tasks(todo, store.batch_size)}
    return [c for result in _gather(dask_client, store, futures, progress) for c in result]
