"""`saliency evaluate`: deletion and insertion curves of every map of one or more stores (made by
`saliency batch`), and the randomisation check on a sample, written up as a short report:
OUT/evaluation.md (a table per store and method), OUT/evaluation.png (the mean curves) and
OUT/evaluation.json (every number)."""
import json
from pathlib import Path

import numpy as np

from saliency import attribution, viz
from saliency._write import write_text
from saliency.attribution import store as stores

from .mapping import MapError, method_options


def find_store(path):
    """The store at `path`: a maps.zarr or maps folder itself, or the output folder holding one."""
    path = Path(path)
    for candidate in (path, path / stores.ZARR_NAME, path / stores.FOLDER_NAME):
        if (candidate / "zarr.json").is_file() or (candidate / "index.json").is_file():
            return attribution.open_store(candidate)
    if not path.exists():
        raise MapError(f"{path} does not exist")
    raise MapError(f"{path} holds no map store; make one with: saliency batch FOLDER --out {path}")


def model_spec(store, model, weights, model_args):
    """The description of the model that made the store's maps ({"model", "weights",
    "model_args"}): as given, or as the store's record says."""
    if model is None:
        record = store.attrs.get("record") or {}
        if not record.get("model"):
            raise MapError(f"the store {store.path} does not say which model made its maps; give --model")
        model, weights, model_args = record["model"], record.get("weights"), record.get("model_args")
    return {"model": model, "weights": weights, "model_args": model_args}


def model_of(spec):
    """The model of a `model_spec`."""
    from saliency.models.zoo import resolve

    return resolve(spec["model"], spec["weights"], spec["model_args"])


def evaluate(store, net, steps, sample, sign, progress, dask_client=None, spec=None):
    """`attribution.evaluate_store` of `store` with its run's method options; with `dask_client`,
    the curves computed on its workers (each loading the model of `spec`), the randomisation
    check here."""
    options = method_options(net, store.attrs.get("method"), (store.attrs.get("record") or {}).get("layer"))
    curves = None
    if dask_client is not None:
        from .distributed import curves as dask_curves

        attribution.store_evaluation.check(net, store, sign=sign)  # a store it cannot evaluate: one line, no task
        curves = dask_curves(dask_client, spec, store, steps=steps, sign=sign, progress=progress)
    return attribution.evaluate_store(net, store, steps=steps, sample=sample, sign=sign, progress=progress,
                                      curves=curves, **options)


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
