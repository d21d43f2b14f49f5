"""`saliency explore`: the page's Explorer for what the command line names, an image file or a
store of maps made by `saliency batch`."""
from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable

from saliency import explore as serving
from saliency._typing import Float32
from saliency.attribution.store_evaluation import stored_preprocess
from saliency.models import zoo

from .evaluate import check_preprocess, find_store, model_of, model_source, store_at
from .mapping import MapError, model_and_input, model_input, picture_of, reading

if TYPE_CHECKING:
    from saliency.attribution.store_base import MapStore

    from .preprocessing import Request

Scores = dict[str, tuple[float | None, float | None]]  # {file: (deletion AUC, insertion AUC)}

DEFAULT_MODEL = "shapes"  # the model of an image given no --model


def explorer(path: str, model: str | None, weights: str | None, model_args: str | None, random_seed: int | None,
             evaluation: str | None, request: Request | None) -> tuple[serving.Explorer, list[str], str]:
    """(Explorer, notes, what it shows) for `path`, an image file or a store (its folder or the
    output folder of `saliency batch` holding it), and the command's model and preprocessing
    options (`preprocessing.Request` or None)."""
    if store_at(path) is not None or Path(path).is_dir():
        return _store_explorer(path, model, weights, model_args, random_seed, evaluation, request)
    if evaluation is not None:
        raise MapError("--evaluation goes with a store (saliency explore STORE), not with an image file")
    source = zoo.ModelSource(model or DEFAULT_MODEL, weights, model_args, random_seed)
    net, x, _, notes = model_and_input(path, source, request)
    preprocess = reading(net, request.apply(net) if request is not None else None)
    made = serving.Explorer(net, x, read=lambda f: model_input(net, f, preprocess),
                            picture=lambda image: picture_of(image, preprocess), name=Path(path).name)
    return made, notes, path


def _store_explorer(path: str, model: str | None, weights: str | None, model_args: str | None,
                    random_seed: int | None, evaluation: str | None,
                    request: Request | None) -> tuple[serving.Explorer, list[str], str]:
    store = find_store(path, lock=None)  # not locked: a run may go on writing it, its rows fill in
    scores, notes = _scores(store, evaluation)
    net, why = _model(store, path, model, weights, model_args, random_seed)
    read: Callable[[IO[bytes]], tuple[Float32, str | None]] | None = None
    picture: Callable[[Float32], Float32] | None = None
    if net is not None:
        if request is not None:
            check_preprocess(store, net, request)
        preprocess = reading(net, stored_preprocess(store))
        read = lambda f: model_input(net, f, preprocess)  # noqa: E731: one line, used once
        picture = lambda image: picture_of(image, preprocess)  # noqa: E731
    elif request is not None and (request.shapes_given or request.values_given):
        raise MapError("the preprocessing options read images for a model; without --model the store's images "
                       "are shown as its run read them")
    view = serving.StoreView(store, scores, getattr(net, "classes", None))
    made = serving.Explorer(net, None, read=read, picture=picture, store=view, why=why)
    if why:
        notes.append(f"note: {why}")
    done = int(sum(r["done"] for r in view.rows()))
    return made, notes, f"the store {store.path} ({done} of {len(store)} maps done)"


def _scores(store: MapStore, evaluation: str | None) -> tuple[Scores | None, list[str]]:
    """({file: (deletion, insertion)} or None, notes): from the --evaluation given (a file that does
    not fit is an error), else from evaluation.json beside the store, if there (one that does not
    fit is a note)."""
    if evaluation is not None:
        try:
            return serving.read_scores(evaluation, store), []
        except serving.ScoresError as exc:
            raise MapError(str(exc)) from None
    beside = store.path.parent / serving.browse.EVALUATION
    if not beside.is_file():
        return None, []
    try:
        return serving.read_scores(beside, store), [f"scores from {beside}"]
    except serving.ScoresError as exc:
        return None, [f"note: no scores shown: {exc}"]


def _model(store: MapStore, path: str, model: str | None, weights: str | None, model_args: str | None,
           random_seed: int | None) -> tuple[zoo.Model | None, str | None]:
    """(the model that made the store's maps, None) to show its images live, or (None, why not)
    when the store's model is a file the user has not named (the page never runs a file it was not
    given) or is not recorded."""
    record = store.attrs.get("record") or {}
    if model is None and not record.get("model"):
        return None, (f"the store does not say which model made its maps; to open its images live, give it: "
                      f"saliency explore {path} --model MODEL")
    if model is None and not (record["model"] in zoo.SPECS or zoo.is_vision(record["model"]) or
                              zoo.is_onnx(record["model"])):  # an ONNX file is data: it runs no code
        weights_hint = f" --weights {record['weights']}" if record.get("weights") else ""
        args = f" --model-args '{record['model_args']}'" if record.get("model_args") else ""
        return None, (f"the maps were made with the model file {record['model']}, which runs only when you name "
                      f"it; to open the images live: saliency explore {path} --model {record['model']}"
                      f"{weights_hint}{args}")
    return model_of(model_source(store, model, weights, model_args, random_seed), store), None
