"""`saliency models` (the zoo and its measured quality) and `saliency train NAME`."""
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from saliency.models import train as training
from saliency.models import zoo
from saliency.models.architectures import n_parameters


def _metrics_text(task: str, metrics: Mapping[str, Any]) -> str:
    if not metrics:
        return "not measured"
    if task == "classification":
        return f"accuracy {100 * metrics['accuracy']:.1f}% (n={metrics['n']})"
    return (f"AbsRel {metrics['abs_rel']:.3f}, delta<1.25 {100 * metrics['delta1']:.1f}%, "
            f"row-mean baseline AbsRel {metrics['baseline_abs_rel']:.3f} (n={metrics['n']})")


def models_table(measure: bool = False) -> str:
    """The tables `saliency models` prints: the zoo (with `measure`, metrics re-measured on fresh
    held-out data), then the torchvision architectures."""
    rows = [("name", "task", "input", "parameters", "held-out quality", "measured by")]
    for name, spec in zoo.SPECS.items():
        shipped = name in zoo.available()
        card = zoo.card(name)
        metrics = card.get("metrics", {})
        how = card.get("train_command", "") + " (at the end of training)" if card else ""
        if measure and shipped:
            metrics = training.evaluate(zoo.load(name), name)
            how = "saliency models --measure (just now)"
        params = card.get("parameters") or n_parameters(zoo.build(name))
        quality = _metrics_text(spec.task, metrics) if shipped else "no weights shipped"
        rows.append((name, spec.task, "x".join(map(str, spec.input_shape)), f"{params:,}", quality, how))
    return "\n".join(_table(rows) + [""] + vision_table())


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Lines of a table: the rows' cells in columns, a rule under the first."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def vision_table() -> list[str]:
    """The lines listing the torchvision architectures: name, task, which of torchvision's weight
    files are in PyTorch's hub cache, and those files (DEFAULT first)."""
    from saliency.models.vision import ARCHITECTURES
    from saliency.models.vision import weights as published

    folder = published.hub_checkpoints()
    rows = [("architecture", "task", "in the hub cache", "torchvision's weight files (DEFAULT first)")]
    for name in sorted(ARCHITECTURES):
        files = [w.file for w in published.preferred(name)]
        found = published.in_hub(name)
        rows.append((name, ARCHITECTURES[name].task, ", ".join(found) or "-", ", ".join(files) or "-"))
    return [f"torchvision architectures (saliency map IMAGE --model NAME [--weights FILE]; without --weights, "
            f"the first file found in PyTorch's hub cache {folder}; nothing is downloaded):", ""] + _table(rows)


def weights_out(name: str, out: str | os.PathLike[str] | None) -> Path:
    """The weights file `saliency train` writes: `out` (a name ending in .npz), else NAME.npz here.
    Checked before training: a folder, another suffix, or a folder that cannot be created or written
    to is a MapError; missing folders are created."""
    from saliency._write import part_name

    from .mapping import MapError

    path = Path(out) if out is not None else Path(f"{name}.npz")
    if path.is_dir():
        raise MapError(f"--out {out} is a folder; give a file name ending in .npz, e.g. {path / f'{name}.npz'}")
    if path.suffix != ".npz":
        raise MapError(f"--out must be a file name ending in .npz (the weights; a .json card goes beside it), "
                       f"got {out}")
    probe = part_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise MapError(f"cannot write --out {out}: {exc.strerror or exc}; nothing was trained") from None
    return path


def train(name: str, epochs: int | None, random_seed: int, out: str | os.PathLike[str] | None) -> list[str]:
    """Train `name`, every random draw from `random_seed`, and write its weights and card; returns the lines
    to print."""
    zoo.spec(name)                           # an unknown name fails before any work
    out = weights_out(name, out)             # so does an --out that cannot be written
    model, card = training.train(name, epochs=epochs, seed=random_seed)
    path = training.save(model, card, out)
    return [f"trained {name} in {card['train_seconds']:.0f} s: {_metrics_text(card['task'], card['metrics'])}",
            f"weights: {path}", f"card:    {path.with_suffix('.json')}"]
