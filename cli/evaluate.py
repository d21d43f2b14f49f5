"""`saliency evaluate`: deletion and insertion curves of every map of one or more stores (made by
`saliency batch`), and the randomisation check on a sample, written up as a short report:
OUT/evaluation.md (a table per store and method), OUT/evaluation.png (the mean curves) and
OUT/evaluation.json (every number)."""
import json
from pathlib import Path

import numpy as np

from saliency.models import zoo

from saliency import attribution, viz
from saliency._write import write_text
from saliency.attribution import store as stores
from saliency.attribution import distributed, store_lock

from .mapping import MapError


def store_at(path):
    """The map store's folder at `path` (a maps.zarr or maps folder itself, or the output folder
    holding one), or None."""
    path = Path(path)
    for candidate in (path, path / stores.ZARR_NAME, path / stores.FOLDER_NAME):
        if (candidate / "zarr.json").is_file() or (candidate / "index.json").is_file():
            return candidate
    return None


def find_store(path, lock="read"):
    """The store at `path` (as `store_at` finds it), opened with its lock for reading (refused while
    a run writes it; `store.close()` releases it); lock=None: opened without (its rows read
    afresh show a run's progress)."""
    path = Path(path)
    found = store_at(path)
    if found is not None:
        return attribution.open_store(found, lock=lock)
    candidates = (path, path / stores.ZARR_NAME, path / stores.FOLDER_NAME)
    for candidate in candidates:  # a run that has just begun to write one: say so
        if store_lock.lock_path(candidate).exists():
            store_lock.acquire(candidate, shared=True).release()
    if not path.exists():
        raise MapError(f"{path} does not exist")
    raise MapError(f"{path} holds no map store; make one with: saliency batch FOLDER --out {path}")


def model_source(store, model, weights, model_args, random_seed=None):
    """The `zoo.ModelSource` of the model to evaluate the store's maps with, pinned to the identity
    of the model that made them (what the store recorded). `model` None: the store's zoo model
    or torchvision architecture; a store made with a model file names it, and the file is
    imported only when the user names it (--model): a store shared by someone else cannot make
    this command run code. A model file given no weights is built with the random seed the store
    recorded, unless given."""
    record = store.attrs.get("record") or {}
    if model is None:
        if not record.get("model"):
            raise MapError(f"the store {store.path} does not say which model made its maps; give --model")
        if record["model"] not in zoo.SPECS and not zoo.is_vision(record["model"]) and not zoo.is_onnx(record["model"]):
            args = f" --model-args '{record['model_args']}'" if record.get("model_args") else ""
            weights_hint = f" --weights {record['weights']}" if record.get("weights") else ""
            raise MapError(f"the maps of {store.path} were made with the model file {record['model']}; evaluating "
                           f"them runs that file, so name it yourself: --model {record['model']}{weights_hint}{args}")
        model, weights, model_args = record["model"], record.get("weights"), record.get("model_args")
    if random_seed is None and weights is None and model == record.get("model"):
        random_seed = record.get("random_seed")
    source = zoo.ModelSource(model, weights, model_args, random_seed)
    return source.pinned(record["identity"]) if record.get("identity") else source


def model_of(source, store):
    """The model of `source` (from `model_source`); a MapError when it is not the model that made
    the maps of `store` (its identity differs from the one the store recorded)."""
    net, _, identity = source.load()
    changes = zoo.identity_changes(dict(source.expected or ()), identity)
    if changes:
        raise MapError(f"the maps of {store.path} were made by another model than {source.model}"
                       f"{' with ' + source.weights if source.weights else ''}: {'; '.join(changes)}; evaluate "
                       f"them with the model and weights that made them")
    return net


def check_preprocess(store, net, request):
    """`model_of`'s model given the --classes names of `request` (a `preprocessing.Request`); a
    MapError when the preprocessing options given make another preprocessing than the one that
    read the images of the store's maps (the evaluation reads them as the store records)."""
    from saliency.attribution.resume import json_round_trip

    made = request.apply(net)
    if not (request.shapes_given or request.values_given):
        return
    then = store.attrs.get("preprocess")
    now = json_round_trip(made.record()) if made is not None else None
    if then != now:
        def shown(record):
            return viz.Preprocess.from_record(record).describe() if record else "none (the image at the model's size)"

        raise MapError(f"the images of {store.path}'s maps were read with {shown(then)}; the options given make "
                       f"{shown(now)}; evaluate them without preprocessing options, or with the same")


def report_folder(out):
    """The folder `out` for the report, created and checked writable before any work."""
    from saliency._write import part_name

    out = Path(out).absolute()
    if not str(out).strip():
        raise MapError("--out is empty; give a folder for evaluation.md, evaluation.png and evaluation.json")
    probe = part_name(out / "evaluation.md")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise MapError(f"cannot write the report into --out {out}: {exc.strerror or exc}; nothing was "
                       f"evaluated") from None
    return out


def check_steps(store, steps):
    """A MapError when `steps` asks for more fractions than the store's maps have pixels."""
    pixels = store.map_shape[-1] * store.map_shape[-2]
    if steps > pixels:
        raise MapError(f"--steps {steps} is more than the {pixels} pixels of the maps of {store.path}; at most one "
                       f"step per pixel, e.g. --steps 16")


def evaluate(store, net, steps, sample, sign, progress, dask_client=None, source=None):
    """`attribution.evaluate_store` of `store` (the randomisation check with the options its run
    recorded); with `dask_client`, the curves computed on its workers (each building the model of
    `source`), the randomisation check here."""
    curves = None
    if dask_client is not None:
        attribution.store_evaluation.check(net, store, sign=sign)  # a store it cannot evaluate: one line, no task
        curves = distributed.curves(dask_client, source, store, steps=steps, sign=sign, progress=progress)
    return attribution.evaluate_store(net, store, steps=steps, sample=sample, sign=sign, progress=progress,
                                      curves=curves)


def _mean_std(values):
    return f"{np.mean(values):.4f} ± {np.std(values):.4f}" if len(values) else "-"


def report(results, out, steps, sign):
    """Write OUT/evaluation.md, .png and .json; returns the summary table's lines."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MapError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
    rows = ["| store | method | seed | images | deletion AUC (lower is better) | insertion AUC (higher is better) |",
            "| --- | --- | --- | ---: | ---: | ---: |"]
    for label, ev in results.items():
        rows.append(f"| {label} | {ev.method} | {ev.seed} | {len(ev.files)} | {_mean_std(ev.deletion_auc)} | "
                    f"{_mean_std(ev.insertion_auc)} |")
    text = [f"# Deletion and insertion, {steps} steps, pixels ordered by "
            f"{'|map|' if sign == 'abs' else 'the signed map'}", ""] + rows + [""]
    text += ["The score is the seed's output (a classifier's logit of the class the map was made for, or the "
             "sum of a dense output); the areas are under the curves over the fraction of pixels changed "
             "(evaluation.png: the mean curves, a band of one standard deviation).", ""]
    for label, ev in results.items():
        if ev.correlations is None:
            continue
        text += [f"## Randomisation check: {label} ({ev.correlations.shape[-1]} images)", "",
                 "Spearman rank correlation of |map| with the map after randomising the layers down to this "
                 "one (a map that depends on the model falls towards 0):", "",
                 "| layers randomised, top down, to | mean correlation |", "| --- | ---: |"]
        text += [f"| {layer} | {np.mean(c):.3f} |" for layer, c in zip(ev.layers, ev.correlations)] + [""]
    write_text(out / "evaluation.md", "\n".join(text))
    first = next(iter(results.values()))
    viz.save(viz.deletion_insertion_figure(first.fractions, {label: (ev.deletion, ev.insertion)
                                                             for label, ev in results.items()}),
             out / "evaluation.png")
    numbers = {label: {"method": ev.method, "seed": ev.seed, "files": ev.files, "fractions": ev.fractions.tolist(),
                       "deletion_auc": ev.deletion_auc.tolist(), "insertion_auc": ev.insertion_auc.tolist(),
                       "mean_deletion": ev.deletion.mean(axis=0).tolist() if len(ev.files) else [],
                       "mean_insertion": ev.insertion.mean(axis=0).tolist() if len(ev.files) else [],
                       "randomisation": None if ev.correlations is None else
                       {"layers": ev.layers, "correlations": np.asarray(ev.correlations).tolist()}}
               for label, ev in results.items()}
    write_text(out / "evaluation.json", json.dumps(numbers, indent=1) + "\n")
    return rows
