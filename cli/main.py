"""The `saliency` command line: typer commands that wire the library together."""
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import typer

from saliency.attribution import metrics as metric_registry
from saliency.attribution import registry

from .method_options import add_method_options
from .preprocessing import add_preprocess_options

if TYPE_CHECKING:
    from saliency.models.zoo import ModelSource

    from saliency.attribution.store_evaluation import StoreEvaluation

app = typer.Typer(
    help="Input-attribution maps (dy/dx) from an autograd engine that shows its work.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Input-attribution maps (dy/dx) from an autograd engine that shows its work."""


class UserError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


def _input_errors() -> tuple[type[Exception], ...]:
    """The library's exceptions that mean bad input (a file, a seed, a model, an option), not a bug."""
    from saliency.models.zoo import ZooError

    from saliency.attribution import InputError, ModelError, SeedError, StoreError
    from saliency.autograd.errors import LayerInputError
    from saliency.nn import WeightsError
    from saliency.viz import VizError

    from .mapping import MapError

    # ImageError is a VizError; LayerInputError: a user's model whose layers do not fit each other;
    # WeightsError: a --weights file that is malformed; ModelError: the model failed on the input
    return (MapError, SeedError, ZooError, VizError, InputError, LayerInputError, WeightsError, StoreError, ModelError,
            OSError)


METRIC_DEFAULT, METRIC_NAMES = metric_registry.DEFAULT, tuple(metric_registry.METRICS)
METHOD_HELP = "One of: " + ", ".join(registry.METHODS) + "."
MODEL_HELP = ("Zoo model name, a torchvision architecture (resnet50, vit_b_16, deeplabv3_resnet50, ...: "
              "saliency models lists them), or path/to/file.py:Name (a Module class or a function that builds "
              "the model).")
WEIGHTS_HELP = ("Weights to load into it: .npz, .safetensors or a .pth state dict (a torchvision architecture: "
                "its .pth file, found in PyTorch's hub cache when not given).")
SEED_FORMS = ("predicted, ones, class:K, segment:K (the class-K logits of the pixels predicted K; segment: the "
              "commonest predicted class, a segmentation model's default), pixel:ROW,COL or region:R0,C0,R1,C1 (@K "
              "after either: output channel K only)")
RANDOM_SEED_HELP = ("Random seed of the initial weights of a model file given no --weights (default: a new "
                    "one, printed), so that they are the same in every run and process.")


def _source(model: str, weights: str | None, model_args: str | None, random_seed: int | None) -> "ModelSource":
    """The `zoo.ModelSource` of a command's model options."""
    from saliency.models.zoo import ModelSource

    return ModelSource(model, weights, model_args, random_seed)


@app.command()
def explain(example: int = typer.Option(None, "--example", "-e", help="Show only this example (1-8).")) -> None:
    """Walk through the examples of the seed texts: graph, per-node VJPs, and x.grad == v^T J."""
    from .explain import explain as render

    try:
        text = render(example)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    typer.echo(text)


@app.command("map")
@add_method_options
@add_preprocess_options
def map_(image: str = typer.Argument(..., help="Image file (PNG, JPEG, ...; grey, RGB or RGBA, any size)."),
         model: str = typer.Option("shapes", "--model", "-m", help=MODEL_HELP),
         weights: str = typer.Option(None, "--weights", "-w", help=WEIGHTS_HELP),
         model_args: str = typer.Option(None, "--model-args", help="JSON arguments for Name of a model file: "
                                        "an object of keyword arguments, e.g. '{\"num_classes\": 10}', or an array."),
         method: str = typer.Option("gradient", "--method", help=METHOD_HELP),
         seed: str = typer.Option(None, "--seed", "-s", help=SEED_FORMS + " (default: predicted for a classifier, "
                                  "segment for a segmentation model, ones for another dense output)."),
         sign: str = typer.Option("abs", "--sign", help="abs, positive, negative or all."),
         reduce: str = typer.Option("sum", "--reduce", help="Channels to one map: sum, max_abs, or rgb (3 panels)."),
         overlay: bool = typer.Option(False, "--overlay", help="Draw the map over the image."),
         out: str = typer.Option(None, "--out", "-o", help="PNG to write (default: IMAGE-STEM_METHOD.png here); "
                                 "an existing file is overwritten, missing folders are created."),
         random_seed: int = typer.Option(None, "--random-seed", help=RANDOM_SEED_HELP),
         **method_options: str) -> None:
    """An attention map dy/dx of IMAGE as a heatmap PNG; prints the prediction, seed, method and time.
    Each method's options are listed below under its name."""
    from saliency import viz

    from . import method_options as generated
    from .look import progress_bar
    from .mapping import run
    from .preprocessing import take

    try:
        request = take(method_options)
        options = generated.parse(method, method_options)
        style = viz.Style(sign, reduce, overlay=overlay)
        with progress_bar(f"{method}", sys.stderr, delay=1.0) as bar:
            lines = run(image, _source(model, weights, model_args, random_seed), method, seed, style, out, options,
                        bar, request)
    except _input_errors() as exc:
        raise UserError(str(exc)) from None
    typer.echo("\n".join(lines))


@app.command("receptive-field")
@add_preprocess_options
def receptive_field(image: str = typer.Argument(..., help="Image file."),
                    pixel: str = typer.Option(..., "--pixel", "-p", help="Output pixel ROW,COL."),
                    model: str = typer.Option("depth", "--model", "-m", help="A model with a dense output."),
                    weights: str = typer.Option(None, "--weights", "-w", help="Weights to load into it."),
                    model_args: str = typer.Option(None, "--model-args", help="JSON arguments for Name of a model "
                                                   "file, as for saliency map."),
                    out: str = typer.Option(None, "--out", "-o", help="PNG to write (default: "
                                            "IMAGE-STEM_rf_ROW_COL.png); an existing file is overwritten, missing "
                                            "folders are created."),
                    random_seed: int = typer.Option(None, "--random-seed", help=RANDOM_SEED_HELP),
                    **preprocess_options: str) -> None:
    """Which input pixels one output pixel depends on: its gradient map, 50%/90% radii, theoretical box."""
    from .mapping import run_receptive_field
    from .preprocessing import take

    try:
        request = take(preprocess_options)
        lines = run_receptive_field(image, pixel, _source(model, weights, model_args, random_seed), out, request)
    except _input_errors() as exc:
        raise UserError(str(exc)) from None
    typer.echo("\n".join(lines))


@app.command()
@add_preprocess_options
def explore(image: str = typer.Argument(..., help="Image file, or a map store made by saliency batch (its "
                                        "--out folder, or the maps.zarr / maps folder in it)."),
            model: str = typer.Option(None, "--model", "-m", help=MODEL_HELP + " For a store: the model "
                                      "that made its maps (default: the one it records; a model file "
                                      "runs only when named here)."),
            weights: str = typer.Option(None, "--weights", "-w", help=WEIGHTS_HELP),
            model_args: str = typer.Option(None, "--model-args", help="JSON arguments for Name of a model file, "
                                           "as for saliency map."),
            random_seed: int = typer.Option(None, "--random-seed", help=RANDOM_SEED_HELP),
            evaluation: str = typer.Option(None, "--evaluation", help="For a store: the evaluation.json "
                                           "saliency evaluate wrote (or its --out folder), whose deletion and "
                                           "insertion areas the table shows (default: evaluation.json beside "
                                           "the store, if there)."),
            host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (another than 127.0.0.1 "
                                     "lets other machines in; the token is still required)."),
            port: int = typer.Option(0, "--port", help="Port to listen on (0: a free one)."),
            no_browser: bool = typer.Option(False, "--no-browser", help="Print the page's URL only."),
            **preprocess_options: str) -> None:
    """A local page for IMAGE: click an output pixel (or point at a class) and see its map at once. For
    a STORE: its images and maps in a table, sorted by any column, each opened live on click."""
    import webbrowser

    from saliency import explore as serving

    from .explore import explorer as make_explorer
    from .preprocessing import take

    try:
        request = take(preprocess_options)
        explorer, notes, what = make_explorer(image, model, weights, model_args, random_seed, evaluation, request)
    except _input_errors() as exc:
        raise UserError(str(exc)) from None
    try:
        server = serving.Server(explorer, host=host, port=port)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    for line in notes:
        typer.echo(line)
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: listening on {host}: other machines can reach the page (with its token)", err=True)
    typer.echo(f"serving {what} at {server.url}\n(Ctrl-C stops it)")
    if not no_browser:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    typer.echo("stopped")


@app.command("look-distance")
@add_preprocess_options
def look_distance(image: str = typer.Argument(..., help="Image file."),
                  model: str = typer.Option("depth", "--model", "-m", help="A model with a dense output."),
                  weights: str = typer.Option(None, "--weights", "-w", help="Weights to load into it."),
                  model_args: str = typer.Option(None, "--model-args", help="JSON arguments for Name of a model "
                                                 "file, as for saliency map."),
                  stride: int = typer.Option(None, "--stride", "-k", help="Measure every K-th output pixel "
                                             "(default: at most 1024 pixels, 4 for a 128x128 output; 1: all)."),
                  fraction: float = typer.Option(0.5, "--fraction", "-f", help="Share of the gradient mass the "
                                                 "radius holds: 0.5 or 0.9 (any value in (0, 1])."),
                  out: str = typer.Option(None, "--out", "-o", help="PNG to write (default: "
                                          "IMAGE-STEM_look_distance.png); an existing file is overwritten, "
                                          "missing folders are created."),
                  random_seed: int = typer.Option(None, "--random-seed", help=RANDOM_SEED_HELP),
                  **preprocess_options: str) -> None:
    """How far from each output pixel the model looks: the radius holding 50% (or 90%) of its gradient."""
    from .look import progress_bar, run_look_distance
    from .preprocessing import take

    try:
        request = take(preprocess_options)
        with progress_bar("pixel seeds", sys.stderr) as bar:
            lines = run_look_distance(image, _source(model, weights, model_args, random_seed), stride, fraction,
                                      out, bar, request)
    except _input_errors() as exc:
        raise UserError(str(exc)) from None
    typer.echo("\n".join(lines))


@app.command()
@add_method_options
@add_preprocess_options
def batch(folder: str = typer.Argument(..., help="Folder of images (its files, not subfolders)."),
          out: str = typer.Option(..., "--out", "-o", help="Folder for the maps (created if missing): OUT/maps.zarr "
                                  "(OUT/maps, .npy chunks, without zarr), and with --png one PNG per map."),
          model: str = typer.Option("shapes", "--model", "-m", help=MODEL_HELP),
          weights: str = typer.Option(None, "--weights", "-w", help=WEIGHTS_HELP),
          model_args: str = typer.Option(None, "--model-args", help="JSON arguments for Name of a model file, "
                                         "as for saliency map."),
          method: str = typer.Option("gradient", "--method", help=METHOD_HELP),
          seed: str = typer.Option(None, "--seed", "-s", help="As for saliency map, or K maps per image in one "
                                   "pass: classes:K1,K2,... or pixels:ROW,COL;ROW,COL;..."),
          png: bool = typer.Option(False, "--png", help="Also write a heatmap PNG per map into OUT, "
                                   "STEM_METHOD.png (existing ones of the same name are overwritten)."),
          sign: str = typer.Option("abs", "--sign", help="For --png: abs, positive, negative or all."),
          reduce: str = typer.Option("sum", "--reduce", help="For --png: sum, max_abs or rgb."),
          overlay: bool = typer.Option(False, "--overlay", help="For --png: draw each map over its image."),
          batch_size: int = typer.Option(32, "--batch-size", min=1, help="Images per forward and backward pass."),
          workers: int = typer.Option(None, "--workers", min=1, help="Run on a local Dask cluster of N worker "
                                      "processes (needs the scale extra)."),
          scheduler: str = typer.Option(None, "--scheduler", help="Run on the Dask cluster of this running "
                                        "scheduler, e.g. tcp://10.0.0.5:8786 (OUT must be a folder every worker "
                                        "can write)."),
          resume: bool = typer.Option(False, "--resume", help="Continue a stopped run: compute only the batches "
                                      "not in OUT's store (the images, options and model must be the same)."),
          random_seed: int = typer.Option(None, "--random-seed", help=RANDOM_SEED_HELP + " With --resume: the "
                                          "store's."),
          **method_options: str) -> None:
    """The maps of every image in FOLDER, a batch at a time, into one array store (and PNGs with
    --png). An image that fails is recorded with its error and the rest still run; Ctrl-C keeps
    every batch already computed. Exit code 0 when every map was made, 2 when any image failed
    (listed at the end and in the store) or nothing could run. Each method's options are listed
    below under its name; they are recorded in the store and must be the same to --resume."""
    from saliency import attribution, viz

    from . import method_options as generated
    from .batch import output_folder, run_batch, summary
    from .preprocessing import take

    folder_out: str | Path = out
    try:
        folder_out = output_folder(out)  # absolute: a model that calls os.chdir cannot move it
        request = take(method_options)
        run = attribution.Run.build(method, seed or None, out=folder_out, png=folder_out if png else None,
                                    style=viz.Style(sign, reduce, overlay=overlay), batch_size=batch_size,
                                    resume=resume, **generated.parse(method, method_options))
        store = run_batch(folder, _source(model, weights, model_args, random_seed), run, workers, scheduler,
                          request)
    except KeyboardInterrupt:
        try:
            lines, _ = summary(attribution.open_store(attribution.store.store_path(folder_out)), interrupted=True)
        except (attribution.StoreError, OSError):
            lines = ["interrupted before any map was stored"]
        typer.echo("\n" + "\n".join(lines), err=True)
        sys.exit(130)
    except _input_errors() as exc:
        raise UserError(str(exc)) from None
    lines, failed = summary(store)
    typer.echo(lines[0] + (f", their heatmap PNGs to {folder_out}" if png else ""))
    if failed:
        typer.echo("\n".join(lines[1:]), err=True)
        sys.exit(2)


@app.command()
@add_preprocess_options
def evaluate(stores: list[str] = typer.Argument(..., help="Map stores made by saliency batch (its --out folder, "
                                                "or the maps.zarr / maps folder in it); several to compare methods."),
             out: str = typer.Option(..., "--out", "-o", help="Folder for evaluation.md, evaluation.png and "
                                     "evaluation.json (created if missing)."),
             steps: int = typer.Option(16, "--steps", min=1, help="Fractions of the pixels changed: 0, 1/STEPS, ..."),
             sample: int = typer.Option(8, "--sample", min=0, help="Images for the randomisation check (0: none)."),
             sign: str = typer.Option("abs", "--sign", help="Order pixels by |map| (abs) or the signed map (all)."),
             model: str = typer.Option(None, "--model", "-m", help="The model (default: the one the store records)."),
             weights: str = typer.Option(None, "--weights", "-w", help="Its weights, with --model."),
             model_args: str = typer.Option(None, "--model-args", help="JSON arguments for Name of a model file."),
             workers: int = typer.Option(None, "--workers", min=1, help="Compute the curves on a local Dask "
                                         "cluster of N worker processes (needs the scale extra)."),
             scheduler: str = typer.Option(None, "--scheduler", help="Compute the curves on the Dask cluster of "
                                           "this running scheduler, e.g. tcp://10.0.0.5:8786 (the stores and "
                                           "their images must be at the same paths on every worker)."),
             random_seed: int = typer.Option(None, "--random-seed", help="Random seed of the initial weights of a "
                                             "--model file given no --weights (default: the store's)."),
             metrics: str = typer.Option(",".join(METRIC_DEFAULT), "--metrics", help="Comma-separated metrics, or "
                                         "all: " + ", ".join(METRIC_NAMES) + "."),
             masks: str = typer.Option(None, "--masks", help="Folder of ground-truth masks named after the images "
                                       "(cat.jpg -> cat.png; white: the object), for pointing_game and "
                                       "relevance_mass."),
             metric_option: list[str] = typer.Option(None, "--metric-option", help="METRIC.OPTION=VALUE, e.g. "
                                                     "max_sensitivity.radius=0.1 or road.fractions=0.1,0.5,0.9 "
                                                     "(repeatable)."),
             metric_seed: int = typer.Option(0, "--metric-seed", help="Seed of the metrics' random draws (noise, "
                                             "perturbations, the random logit's class)."),
             **preprocess_options: str) -> None:
    """The metrics of every map of each store (by default the deletion and insertion curves, and
    the randomisation check on a sample): a table of the stores (printed, and in
    OUT/evaluation.md), the mean curves and numbers (OUT/evaluation.png) and every number per
    image (OUT/evaluation.json). With --workers or --scheduler the metrics are computed on Dask,
    as saliency batch computes maps; the numbers are the same."""
    from saliency.attribution import distributed

    from .batch import Progress
    from saliency.attribution.metrics import parse_names

    from .evaluate import (
        check_preprocess,
        check_steps,
        evaluate as run,
        find_store,
        metric_options,
        model_of,
        model_source,
        report,
        report_folder,
    )
    from .preprocessing import take

    found = []  # each store opened with its lock for reading, released at the end
    try:
        request = take(preprocess_options)
        if sign not in ("abs", "all"):
            raise UserError(f"--sign must be abs or all, got {sign!r}")
        names, options = parse_names(metrics), metric_options(metric_option)
        if masks is not None and not Path(masks).is_dir():
            raise UserError(f"--masks {masks} is not a folder")
        folder = report_folder(out)  # a model that calls os.chdir cannot move it; unwritable: before any work
        for path in stores:
            found.append(find_store(path))
        for store in found:
            check_steps(store, steps)
        sources = [model_source(store, model, weights, model_args, random_seed) for store in found]
        with distributed.connected(workers, scheduler) as dask_client:
            results: dict[str, "StoreEvaluation"] = {}
            for path, store, source in zip(stores, found, sources):
                label = path if path not in results else f"{path} ({len(results)})"
                where = f" on {len(dask_client.scheduler_info()['workers'])} workers" if dask_client else ""
                net = model_of(source, store)
                check_preprocess(store, net, request)  # the images are read as the store records
                with Progress(len(store), f"evaluating {path}{where}") as bar:
                    results[label] = run(store, net, steps, sample, sign, bar, dask_client, source, names, options,
                                         masks, metric_seed)
        lines = report(results, folder, steps, sign)
    except _input_errors() as exc:
        raise UserError(str(exc)) from None
    finally:
        for store in found:
            store.close()
    typer.echo("\n".join(lines + [f"wrote {Path(out) / 'evaluation.md'}, evaluation.png and evaluation.json"]))


@app.command()
def shapes(out: str = typer.Argument(..., help="Folder to write images/, masks/ and labels.csv into (new or empty)."),
           count: int = typer.Option(64, "--count", "-n", min=1, help="How many images."),
           random_seed: int = typer.Option(0, "--random-seed", help="Seed of the drawing; the same seed gives the "
                                           "same images.")) -> None:
    """Images of the shapes dataset (the zoo's shapes model's task) with their ground-truth masks, for
    saliency batch and saliency evaluate --masks OUT/masks (pointing game, relevance mass)."""
    from saliency.models.data import write_shapes

    from .batch import Progress

    folder = Path(out)
    taken = [folder / name for name in ("images", "masks", "labels.csv")
             if (folder / name).exists() and (not (folder / name).is_dir() or any((folder / name).iterdir()))]
    if taken:
        raise UserError(f"{taken[0]} already exists; give a new or empty folder (nothing is overwritten)")
    try:
        with Progress(count, f"drawing {count} shapes") as bar:
            write_shapes(folder, count, random_seed, progress=bar)
    except OSError as exc:
        raise UserError(f"cannot write into {folder}: {exc.strerror or exc}") from None
    typer.echo(f"wrote {count} images to {folder / 'images'}, their masks to {folder / 'masks'} and "
               f"{folder / 'labels.csv'}")


@app.command()
def models(measure: bool = typer.Option(False, "--measure",
                                        help="Re-measure each model on fresh held-out data.")) -> None:
    """The zoo: each model's task, input, size and held-out quality, and how that was measured; then the
    torchvision architectures, their weight files and which are in PyTorch's hub cache."""
    from .zoo import models_table

    typer.echo(models_table(measure))


@app.command()
def train(name: str = typer.Argument(..., help="Which zoo model: shapes, digits or depth."),
          epochs: int = typer.Option(None, "--epochs", min=1, help="Epochs (default: the recipe's)."),
          random_seed: int = typer.Option(None, "--random-seed", help="Seed of every random draw (default: 0); "
                                          "the same random seed gives the same weights."),
          out: str = typer.Option(None, "--out", help="Weights file to write (default: NAME.npz here); "
                                  "a .json card goes beside it."),
          old_seed: int = typer.Option(None, "--seed", hidden=True, help="Deprecated name of --random-seed.")) -> None:
    """Train a zoo model from scratch with saliency's own engine (Adam), with a progress bar."""
    from saliency.models.zoo import ZooError

    from .mapping import MapError
    from .zoo import train as run

    # `--seed` of map and batch is the backward seed v; train's random seed was `--seed` too, and
    # still is for commands written before the rename: hidden, with a warning
    if old_seed is not None:
        if random_seed is not None:
            raise UserError("--seed is the old name of --random-seed; give only --random-seed")
        typer.echo("warning: train --seed is deprecated, use --random-seed (--seed is the backward seed "
                   "of map and batch)", err=True)
        random_seed = old_seed
    try:
        lines = run(name, epochs, 0 if random_seed is None else random_seed, out)
    except (ZooError, MapError, ModuleNotFoundError, OSError) as exc:
        raise UserError(str(exc)) from None
    typer.echo("\n".join(lines))


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      file: TextIO | None = None, line: str | None = None) -> None:
    """Warnings (an unwritable kernel cache, say) as one line on stderr, without a source line."""
    print(f"warning: {message}", file=file or sys.stderr)


def _compiling_note(folder: Path | None, stream: TextIO | None = None) -> None:
    """Said once on a terminal, when a run first compiles a kernel (the first run after installing:
    tens of seconds), like a progress bar. Where the cache folder cannot be written, its warning
    says so instead."""
    if folder is not None and (stream or sys.stderr).isatty():
        typer.echo(f"compiling the kernels this run needs, once (cached in {folder}); up to a minute on 2 cores",
                   err=True)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure is one clear line and a non-zero exit, never a traceback."""
    warnings.showwarning = _one_line_warning
    from saliency.kernels._jit import on_first_compile
    from saliency.kernels.memory import keep_freed_memory

    keep_freed_memory()  # a batch's arrays reuse the last batch's memory instead of fresh zeroed pages
    on_first_compile(_compiling_note)
    try:
        app(args=argv, prog_name="saliency")  # usage errors: typer prints them and exits with 2
    except SystemExit as exc:
        # typer turns Ctrl-C into a silent exit code 130 (raised from the KeyboardInterrupt)
        if exc.code == 130 and isinstance(getattr(exc.__context__, "__cause__", None), KeyboardInterrupt):
            typer.echo("interrupted", err=True)
        raise
    except UserError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except MemoryError as exc:  # the machine's limit, not a bug: say so and what to make smaller
        detail = f" ({' '.join(str(exc).split())})" if str(exc).strip() else ""
        typer.echo(f"error: out of memory{detail}; try a smaller image, --batch-size or method option", err=True)
        sys.exit(2)
    except Exception as exc:  # a bug, not a user error: still one line, with the exception type
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
