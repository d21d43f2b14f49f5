"""`saliency evaluate`: the metrics of every map of one or more stores (made by `saliency batch`;
by default the deletion and insertion curves, and the randomisation check on a sample), written
up as a short report: OUT/evaluation.md (a table of the stores and their metrics),
OUT/evaluation.png (the mean curves and the numbers) and OUT/evaluation.json (every number)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from saliency.models import zoo

from saliency import attribution, viz
from saliency._write import write_text
from saliency.attribution import store as stores
from saliency.attribution import distributed, store_lock

from .mapping import MapError, ProgressCallback

if TYPE_CHECKING:
    from saliency.attribution.store_base import MapStore
    from saliency.attribution.store_evaluation import StoreEvaluation

    from .preprocessing import Request


def store_at(path: str | os.PathLike[str]) -> Path | None:
    """The map store's folder at `path` (a maps.zarr or maps folder itself, or the output folder
    holding one), or None."""
    path = Path(path)
    for candidate in (path, path / stores.ZARR_NAME, path / stores.FOLDER_NAME):
        if (candidate / "zarr.json").is_file() or (candidate / "index.json").is_file():
            return candidate
    return None


def find_store(path: str | os.PathLike[str], lock: str | None = "read") -> MapStore:
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


def model_source(store: MapStore, model: str | None, weights: str | None, model_args: str | None,
                 random_seed: int | None = None) -> zoo.ModelSource:
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


def model_of(source: zoo.ModelSource, store: MapStore) -> zoo.Model:
    """The model of `source` (from `model_source`); a MapError when it is not the model that made
    the maps of `store` (its identity differs from the one the store recorded)."""
    net, _, identity = source.load()
    changes = zoo.identity_changes(dict(source.expected or ()), identity)
    if changes:
        raise MapError(f"the maps of {store.path} were made by another model than {source.model}"
                       f"{' with ' + source.weights if source.weights else ''}: {'; '.join(changes)}; evaluate "
                       f"them with the model and weights that made them")
    return net


def check_preprocess(store: MapStore, net: zoo.Model, request: Request) -> None:
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
        def shown(record: dict[str, Any] | None) -> str:
            return viz.Preprocess.from_record(record).describe() if record else "none (the image at the model's size)"

        raise MapError(f"the images of {store.path}'s maps were read with {shown(then)}; the options given make "
                       f"{shown(now)}; evaluate them without preprocessing options, or with the same")


def report_folder(out: str | os.PathLike[str]) -> Path:
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


def check_steps(store: MapStore, steps: int) -> None:
    """A MapError when `steps` asks for more fractions than the store's maps have pixels."""
    pixels = store.map_shape[-1] * store.map_shape[-2]
    if steps > pixels:
        raise MapError(f"--steps {steps} is more than the {pixels} pixels of the maps of {store.path}; at most one "
                       f"step per pixel, e.g. --steps 16")


def metric_options(texts: Iterable[str] | None) -> dict[str, dict[str, Any]]:
    """{metric: {option: value}} from --metric-option texts "METRIC.OPTION=VALUE", each value read by
    the option's own parser; a MapError naming a text that does not fit."""
    from saliency.attribution import metrics

    out: dict[str, dict[str, Any]] = {}
    for text in texts or ():
        name, _, value = text.partition("=")
        metric, _, option = name.strip().partition(".")
        if not value or metric not in metrics.METRICS or not option:
            raise MapError(f"--metric-option takes METRIC.OPTION=VALUE with METRIC one of "
                           f"{', '.join(metrics.METRICS)}, e.g. max_sensitivity.radius=0.1; got {text!r}")
        options = {o.name: o for o in metrics.METRICS[metric].options}
        if option not in options:
            have = ", ".join(options) or "none"
            raise MapError(f"the metric {metric} has no option {option!r} (its options: {have})")
        out.setdefault(metric, {})[option] = options[option].parse(value)
    return out


def evaluate(store: MapStore, net: zoo.Model, steps: int, sample: int, sign: str,
             progress: ProgressCallback | None, dask_client: Any = None, source: zoo.ModelSource | None = None,
             metrics: str | Sequence[str] | None = None, options: dict[str, dict[str, Any]] | None = None,
             masks: Any = None, random_seed: int = 0) -> StoreEvaluation:
    """`attribution.evaluate_store` of `store` (the randomisation check with the options its run
    recorded); with `dask_client`, the metrics of each batch computed on its workers (each
    building the model of `source`), the randomisation check here."""
    from saliency.attribution import metrics as known

    metrics = known.DEFAULT if metrics is None else metrics
    kwargs: dict[str, Any] = {"steps": steps, "sign": sign, "metrics": metrics, "metric_options": options,
                              "masks": masks}
    curves = None
    if dask_client is not None:
        assert source is not None  # the workers build the model of `source`
        attribution.store_evaluation.check(net, store, **kwargs)  # a store it cannot evaluate: one line, no task
        curves = distributed.curves(dask_client, source, store, random_seed=random_seed, progress=progress, **kwargs)
    return attribution.evaluate_store(net, store, sample=sample, progress=progress, curves=curves,
                                      random_seed=random_seed, **kwargs)


def _mean_std(values: ArrayLike) -> str:
    values = np.asarray(values, np.float64)
    known = values[np.isfinite(values)]
    if not len(known):
        return "-"
    told = f"{np.mean(known):.4f} ± {np.std(known):.4f}"
    return told if len(known) == len(values) else f"{told} ({len(known)} of {len(values)})"


def _columns(results: Mapping[str, StoreEvaluation]) -> list[tuple[str, str, str, str]]:
    """(metric, field, label, better) of every column some result has, in METRICS's order."""
    from saliency.attribution import metrics

    named = {m for ev in results.values() for m in ev.metrics}
    return [(m, field, label, better) for m in metrics.METRICS if m in named
            for field, label, better in metrics.METRICS[m].columns]


def report(results: Mapping[str, StoreEvaluation], out: str | os.PathLike[str], steps: int, sign: str) -> list[str]:
    """Write OUT/evaluation.md, .png and .json; returns the summary table's lines."""
    from saliency.attribution import metrics

    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MapError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
    columns = _columns(results)

    def row(cells: Sequence[object]) -> str:
        return "| " + " | ".join(map(str, cells)) + " |"

    rows = [row(["store", "method", "seed", "images"] + [f"{label} ({better} is better)"
                                                         for _, _, label, better in columns]),
            row(["---"] * 3 + ["---:"] * (1 + len(columns)))]
    for label, ev in results.items():
        rows.append(row([label, ev.method, ev.seed, len(ev.files)] + [
            _mean_std(ev.values[field]) if field in ev.values else "-" for _, field, _, _ in columns]))
    named = [m for m in metrics.METRICS if any(m in ev.metrics for ev in results.values())]
    text = [f"# Evaluation: {', '.join(named)}; pixels ordered by "
            f"{'|map|' if sign == 'abs' else 'the signed map'}", ""] + rows + [""]
    text += ["Each cell is the mean ± standard deviation over the images (with how many had a value, where some "
             "had none: an empty mask, an all-zero map). A score is the seed's output (a classifier's logit of "
             "the class the map was made for, or the sum of a dense output). evaluation.png: the mean curves, a "
             "band of one standard deviation, and the numbers as bars.", ""]
    for m in named:
        options = next(ev.options[m] for ev in results.values() if m in ev.options)
        shown = ", ".join(f"{k} {metrics.METRICS[m].options_text(k, v)}" for k, v in options.items())
        text += [f"- **{m}**{f' ({shown})' if shown else ''}: " + metrics.METRICS[m].about.replace("\n", " ")]
    text += [""]
    for label, ev in results.items():
        if ev.correlations is None:
            continue
        text += [f"## Randomisation check: {label} ({ev.correlations.shape[-1]} images)", "",
                 "Spearman rank correlation of |map| with the map after randomising the layers down to this "
                 "one (a map that depends on the model falls towards 0):", "",
                 "| layers randomised, top down, to | mean correlation |", "| --- | ---: |"]
        text += [f"| {layer} | {np.mean(c):.3f} |" for layer, c in zip(ev.layers, ev.correlations)] + [""]
    write_text(out / "evaluation.md", "\n".join(text))
    curves: dict[str, tuple[NDArray[Any], dict[str, NDArray[Any]]]] = {}
    numbers: dict[str, dict[str, NDArray[Any]]] = {}
    for m in named:
        for field, title in metrics.METRICS[m].curves:
            have = {label: ev.values[field] for label, ev in results.items() if field in ev.values and len(ev.files)}
            if have:
                points = next(ev.points[field] for ev in results.values() if field in ev.points)
                curves[title] = (points, have)
    for m, field, title, better in columns:
        if not metrics.METRICS[m].curves:
            numbers[f"{title} ({better} is better)"] = {
                label: ev.values[field] for label, ev in results.items() if field in ev.values}
    if curves or numbers:
        viz.save(viz.evaluation_figure(curves, numbers), out / "evaluation.png")
    write_text(out / "evaluation.json", json.dumps({label: _numbers(ev) for label, ev in results.items()},
                                                   indent=1, allow_nan=False, default=_plain) + "\n")
    return rows


def _plain(value: object) -> Any:
    """json.dumps's fallback: NumPy numbers and tuples as JSON's."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _listed(values: ArrayLike) -> Any:
    """An array as nested lists with NaN as null (JSON has no NaN)."""
    values = np.asarray(values, np.float64)
    # None: an object array holding None where not finite (NumPy's stubs take no None there; NumPy does)
    return np.where(np.isfinite(values), values, None).tolist()  # type: ignore[call-overload]


def _numbers(ev: StoreEvaluation) -> dict[str, Any]:
    """Every number of one store's evaluation, for evaluation.json."""
    from saliency.attribution import metrics

    out: dict[str, Any] = {"method": ev.method, "seed": ev.seed, "files": ev.files, "metrics": list(ev.metrics),
                           "options": {m: {k: metrics.METRICS[m].options_text(k, v) for k, v in o.items()}
                                       for m, o in ev.options.items()}}
    for field, values in ev.values.items():
        out[field] = _listed(values)
        if field in ev.points:
            out[f"{field}_points"] = _listed(ev.points[field])
            out[f"mean_{field}"] = _listed(values.mean(axis=0)) if len(values) else []
    if ev.fractions is not None:
        out["fractions"] = _listed(ev.fractions)
    out["randomisation"] = None if ev.correlations is None else {
        "layers": ev.layers, "correlations": _listed(ev.correlations)}
    return out
