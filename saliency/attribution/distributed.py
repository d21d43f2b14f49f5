"""A batch run, or the metrics of a store's maps, on a Dask cluster (`pip install 'saliency-maps[scale]'`).

    from saliency.attribution import Run, distributed
    from saliency.models.zoo import ModelSource

    run = Run.build("smoothgrad", out="maps/", model=ModelSource("shapes"), n=8)
    with distributed.connected(workers=2) as client:
        store = distributed.batch(client, run, image_paths)

The client splits the store's batches into tasks of about TASK_IMAGES images and sends each task
the run (whose `model` is a picklable callable that builds the model: a `zoo.ModelSource`, a
`functools.partial(models.load, "shapes")`, ...) and the store's path, never the model or any
map. A worker builds the model once per process and keeps it (`_models`), then reads its task's
images: for `batch` it computes their maps (`pipeline.fill`) and writes them into the store
itself (the client made the store, `pipeline.prepare`, and holds its lock); for `curves` it
reads their maps from the store and returns only their metrics' numbers
(`store_evaluation.batch_scores`). Maps never pass through the scheduler.

A batch is marked done only after its maps are written and a task skips the batches already
done, so a task that Dask runs again after its worker died rewrites only the batches that worker
had not finished. The store's folder, the images and the model's files must be at one path that
every worker can read (and the store's, write): on one machine, any folder.
"""
from __future__ import annotations

import contextlib
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from ..kernels.memory import KEEP_BYTES
from ._core import InputError
from .pipeline import fill, prepare
from .store import open_store
from .store_evaluation import batch_scores

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ._core import Progress
    from .run import Run
    from .store_base import MapStore
    from .store_evaluation import BatchScores

TASK_IMAGES = 256
INSTALL = "pip install 'saliency-maps[scale]'"

_models: dict[bytes, Callable[..., Any]] = {}  # in each worker process: {pickled model source: model}


class ClusterError(InputError):
    """A cluster that cannot be started or reached, or a run that cannot go to it."""


def client(workers: Optional[int] = None, scheduler: Optional[str] = None) -> tuple[Any, Any]:
    """(Dask client, local cluster or None): a cluster of `workers` local processes, or the running
    scheduler at the address `scheduler` (e.g. tcp://10.0.0.5:8786)."""
    if workers and scheduler:
        raise ClusterError("give workers (a local cluster) or a scheduler (a running one), not both")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError(f"running on a cluster needs Dask, which is not installed: {INSTALL}") from None
    if scheduler:
        try:
            return Client(scheduler, timeout="10s"), None
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
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
def connected(workers: Optional[int] = None, scheduler: Optional[str] = None) -> Iterator[Any]:
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


def _model(source: Callable[[], Any]) -> Any:
    """The model `source()` builds, once per worker process."""
    key = pickle.dumps(source)
    if key not in _models:
        _models[key] = source()
    return _models[key]


def _source_of(run: Run) -> Callable[[], Any]:
    if run.model is None or not callable(run.model):
        raise ClusterError("a run on a cluster needs its model's source: Run.build(..., model=SOURCE), a picklable "
                           "callable that builds the model (e.g. saliency.models.zoo.ModelSource(name))")
    return run.model


def _tasks(batches: Sequence[int], batch_size: int) -> list[Sequence[int]]:
    """`batches` in groups of about TASK_IMAGES images, one group per task."""
    per_task = max(1, TASK_IMAGES // batch_size)
    return [batches[i:i + per_task] for i in range(0, len(batches), per_task)]


def _gather(dask_client: Any, store: MapStore, futures: dict[Any, Sequence[int]],
            progress: Optional[Progress]) -> list[Any]:
    """The results of `futures` ({future: the batches of `store` it works on}) as they finish,
    calling progress(images done, images) after each: a task counts its batches' images (also when
    Dask ran it again after its worker died and it skipped the batches already done), the images
    of no task count as done. On any failure (or Ctrl-C) the other tasks are cancelled; a task's
    `_Refused` is raised here as the error it stands for (one line, as in a run in one process)."""
    from distributed import as_completed

    results: list[Any] = []
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

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _reporting(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) on a worker, its errors of the input (ValueError, LookupError and their kinds:
    StoreError, InputError, a model source's errors) returned as a `_Refused`."""
    try:
        return fn(*args)
    except (ValueError, LookupError) as exc:
        try:
            return _Refused(type(exc)(str(exc)))
        except TypeError:  # an exception class that takes other arguments: its message alone
            return _Refused(ClusterError(str(exc)))


def _images(store: MapStore, batches: Sequence[int]) -> int:
    return sum(b - a for a, b in map(store.span, batches))


def _batch_task(run: Run, files: Any, store_path: Path, batches: Sequence[int]) -> int:
    """One task, on a worker: the batches `batches` of the run into the store at `store_path`."""
    return fill(_model(cast(Callable[[], Any], run.model)), files, run, open_store(store_path), batches)


def batch(dask_client: Any, run: Run, images: Any, *, model: Any = None,
          progress: Optional[Progress] = None) -> MapStore:
    """The maps of `images` (files, at one path on every worker) for `run` (a `Run` with `out` and
    `model`) computed on `dask_client`'s workers into the run's store, as `pipeline.batch` would
    compute them in one process; returns the store, read back whole. `model`: the model of
    run.model, where the caller has it already (it checks the run before any task is sent)."""
    source = _source_of(run)
    model = source() if model is None else model
    files = [str(f) for f in images]
    store = prepare(model, files, run=run)
    with store:  # the client holds the store's lock for the run; the workers write inside it
        done, size = store.done, store.batch_size
        todo = [k for k in range(store.batches) if not done[k * size:(k + 1) * size].all()]
        futures = {dask_client.submit(_reporting, _batch_task, run, files, str(store.path), group, pure=False): group
                   for group in _tasks(todo, size)}
        _gather(dask_client, store, futures, progress)
        return store.check_whole()  # read back: every batch done and whole, or a StoreError


def _scores_task(source: Callable[[], Any], store_path: Path, batches: Sequence[int],
                 options: dict[str, Any]) -> list[BatchScores]:
    """One task, on a worker: the metrics of the batches `batches` of the store at `store_path`
    (`options`: batch_scores's keywords)."""
    return batch_scores(_model(source), store_path, batches, **options)


def curves(dask_client: Any, source: Callable[[], Any], store: MapStore, *, steps: int = 16, sign: str = "abs",
           metrics: str | Sequence[str] = ("deletion_insertion",),
           metric_options: Optional[dict[str, dict[str, Any]]] = None, masks: Any = None, random_seed: int = 0,
           progress: Optional[Progress] = None) -> list[BatchScores]:
    """The metrics (by default the deletion and insertion curves) of every map of `store` (made by
    the model `source()` builds), computed on `dask_client`'s workers: the BatchScores of its
    batches, for `evaluate_store`'s `curves=`, equal to those computed in one process. The caller
    checks the store first (`store_evaluation.check`, in its own process: a damaged store is one
    line before any task is sent) and holds its lock for reading. A masks folder must be at the
    same path on every worker, as the images are."""
    done = store.done
    todo = [k for k in range(store.batches) if done[k * store.batch_size:(k + 1) * store.batch_size].any()]
    options = {"steps": steps, "sign": sign, "metrics": metrics, "metric_options": metric_options,
               "masks": str(masks) if isinstance(masks, Path) else masks, "random_seed": random_seed}
    futures = {dask_client.submit(_reporting, _scores_task, source, str(store.path), group, options,
                                  pure=False): group for group in _tasks(todo, store.batch_size)}
    return [c for result in _gather(dask_client, store, futures, progress) for c in result]
