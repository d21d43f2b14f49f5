"""Training recipes for the zoo, on saliency's own engine, and the held-out measurements.

`train(name, epochs=None, seed=0, out=None)` trains one model with `saliency.optim.Adam` (cosine
learning-rate decay), shows a progress bar, measures the result on held-out data and writes the
weights (``.npz``) and the card (``.json``). The same name, epochs and seed give the same weights:
every random draw comes from generators seeded from `seed`, and the kernels are deterministic.

Everything that differs between the models (their data, recipe, number of held-out images) is
their `zoo.Spec`; a name the zoo does not have is a `zoo.ZooError` everywhere here.

Held-out data never overlaps training data: shapes and scenes are drawn from generator seeds
that training never uses (``EVAL_SEED``); digits use scikit-learn's images of the fixed 20% test
split.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

import saliency as sl
from saliency._write import write_text

from . import data, zoo

if TYPE_CHECKING:
    import os

    from numpy.typing import NDArray

    from saliency import nn

EVAL_SEED = 2_000_000_007         # held-out shapes and scenes; training never draws this seed


class Progress:
    """A one-line progress bar on a stream: done/total, loss, images per second, time left."""

    def __init__(self, total: int, label: str, stream: IO[str] | None = None, width: int = 24) -> None:
        self.total, self.label, self.width = total, label, width
        self.stream = sys.stderr if stream is None else stream
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.start = time.perf_counter()
        self.done, self._last_tenth = 0, -1

    def update(self, n: int, **values: Any) -> None:
        self.done += n
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        filled = int(self.width * self.done / self.total)
        extra = "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())
        line = (f"{self.label} |{'#' * filled}{' ' * (self.width - filled)}| {self.done}/{self.total}  "
                f"{extra}  {rate:.0f} img/s  ETA {_clock(left)}")
        tenth = 10 * self.done // self.total
        if self.tty:
            self.stream.write("\r" + line)
        elif tenth != self._last_tenth:       # a log file gets a line every 10%
            self.stream.write(line + "\n")
        self._last_tenth = tenth
        self.stream.flush()

    def close(self) -> float:
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()
        return time.perf_counter() - self.start


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


# ---------------------------------------------------------------- data and loss

def _epoch_seed(rng: np.random.Generator) -> int:
    """A generator seed for one epoch's training data, drawn from `rng` (every model draws one): any
    seed but EVAL_SEED."""
    seed = EVAL_SEED
    while seed == EVAL_SEED:
        seed = int(rng.integers(0, 2**31 - 2**20))
    return seed


def _loss(model: nn.Module, task: str, x: sl.Tensor, target: NDArray[Any]) -> sl.Tensor:
    if task == "classification":
        return sl.cross_entropy(model(x), sl.tensor(target))
    return (model.log_depth(x) - sl.tensor(np.log(target))).abs().mean()   # L1 on log-depth ~ AbsRel


# ---------------------------------------------------------------- training

def train(name: str, epochs: int | None = None, seed: int = 0, out: str | os.PathLike[str] | None = None,
          stream: IO[str] | None = None, per_epoch: int | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """Train the zoo model `name` from scratch; returns (model in eval mode, card dict).

    Writes ``<out>.npz`` and ``<out>.json`` when `out` is given (a path without suffix or with
    ``.npz``). `per_epoch` overrides the recipe's images per epoch (tests use a few).
    """
    spec = zoo.spec(name)
    epochs = spec.recipe.epochs if epochs is None else epochs
    per_epoch = spec.recipe.per_epoch if per_epoch is None else per_epoch
    if epochs < 1 or per_epoch < 1:
        raise ValueError(f"epochs and images per epoch must be at least 1, got {epochs} and {per_epoch}")
    recipe = replace(spec.recipe, epochs=epochs, per_epoch=per_epoch)
    rng = np.random.default_rng(seed)
    sl.manual_seed(seed)
    model = zoo.build(name).train()
    opt = sl.optim.Adam(model.parameters(), lr=recipe.lr)
    n_train, epoch_data = spec.data.training(per_epoch)
    steps_per_epoch = -(-n_train // recipe.batch)
    total_steps, step = epochs * steps_per_epoch, 0
    started = time.perf_counter()
    for epoch in range(epochs):
        images, targets = epoch_data(_epoch_seed(rng), rng)
        order = rng.permutation(len(images))
        bar = Progress(len(images), f"{name} epoch {epoch + 1}/{epochs}", stream)
        running = None
        for i in range(0, len(order), recipe.batch):
            idx = order[i:i + recipe.batch]
            for group in opt.param_groups:
                group["lr"] = recipe.lr * (0.02 + 0.98 * 0.5 * (1 + np.cos(np.pi * step / total_steps)))
            loss = _loss(model, spec.task, sl.tensor(images[idx]), targets[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            running = loss.item() if running is None else 0.9 * running + 0.1 * loss.item()
            bar.update(len(idx), loss=running)
        bar.close()
    seconds = time.perf_counter() - started
    model.eval()
    metrics = evaluate(model, name)
    card = {"name": name, "task": spec.task, "input_shape": list(spec.input_shape),
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "metrics": metrics, "train_seconds": round(seconds, 1),
            "train_command": f"saliency train {name} --epochs {epochs} --random-seed {seed}",
            "recipe": {"epochs": epochs, "images_per_epoch": per_epoch, "batch": recipe.batch, "lr": recipe.lr,
                       "optimizer": "saliency.optim.Adam, cosine decay to 2% of lr"}}
    model.metrics = metrics
    if out is not None:
        save(model, card, out)
    return model, card


def save(model: nn.Module, card: dict[str, Any], out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    out = out.with_suffix("") if out.suffix == ".npz" else out
    out.parent.mkdir(parents=True, exist_ok=True)
    sl.nn.save(model.state_dict(), out.with_suffix(".npz"), compressed=True)
    write_text(out.with_suffix(".json"), json.dumps(card, indent=2) + "\n")
    return out.with_suffix(".npz")


# ---------------------------------------------------------------- measurement

def held_out(name: str, n: int | None = None, seed: int = EVAL_SEED) -> tuple[Any, Any]:
    """Held-out (images, targets) for `name`: n (by default the spec's eval_count) images drawn with
    `seed`, or the first n of a fixed test split."""
    spec = zoo.spec(name)
    # a Generated spec always has an eval_count; only a Split takes n None (all of its test split)
    return spec.data.held_out(spec.eval_count if n is None else n, seed)  # type: ignore[arg-type]


def predict(model: zoo.Model, images: NDArray[Any], batch: int = 64) -> NDArray[Any]:
    """The model's outputs on `images`, in batches, without building a graph."""
    outs: list[NDArray[Any]] = []
    with sl.no_grad():
        for i in range(0, len(images), batch):
            outs.append(model(sl.tensor(images[i:i + batch])).numpy())
    return np.concatenate(outs)


def depth_metrics(pred: NDArray[Any], truth: NDArray[Any], baseline: NDArray[Any]) -> dict[str, float]:
    """AbsRel, delta<1.25 and RMSE of `pred`, and AbsRel of the row-mean `baseline`, against `truth`."""
    ratio = np.maximum(pred / truth, truth / pred)
    return {"abs_rel": float(np.mean(np.abs(pred - truth) / truth)),
            "delta1": float(np.mean(ratio < 1.25)),
            "rmse": float(np.sqrt(np.mean((pred - truth) ** 2))),
            "baseline_abs_rel": float(np.mean(np.abs(baseline - truth) / truth))}


def row_mean_baseline(n: int = 1000, seed: int = 1) -> NDArray[np.float32]:
    """The trivial depth predictor: the mean training depth of each image row, (1, 1, H, 1)."""
    _, depths, _ = data.scenes(n, seed=seed)
    return depths.mean(axis=(0, 3), keepdims=True)


def evaluate(model: zoo.Model, name: str, n: int | None = None, seed: int = EVAL_SEED) -> dict[str, Any]:
    """The model's quality on held-out data: {"accuracy"} or {"abs_rel", "delta1", "rmse", "baseline_abs_rel"}."""
    spec = zoo.spec(name)
    images, targets = held_out(name, n, seed)
    pred = predict(model, images, batch=spec.eval_batch)
    if spec.task == "classification":
        return {"accuracy": float(np.mean(pred.argmax(axis=1) == targets)), "n": int(len(targets))}
    baseline = np.broadcast_to(row_mean_baseline(), targets.shape)
    return {**depth_metrics(pred, targets, baseline), "n": int(len(targets))}
