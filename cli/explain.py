"""`saliency explain`: walk through the examples of the seed texts, showing what backward computes.

For each example: the code, the graph (`render_graph`), the trace of every VJP the engine ran,
the leaf gradients, and the check `x.grad == v^T J` against the explicit Jacobian.
"""
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike

import saliency as sl
from saliency.autograd.printing import format_array


@dataclass
class Example:
    number: int
    title: str
    source: str
    code: str
    leaves: dict[str, ArrayLike]                  # name -> initial value
    build: Callable[..., dict[str, Any]]          # (**leaf tensors) -> dict of named tensors
    stages: list[tuple[str, ArrayLike | None]]    # (output name, seed or None), run in order
    accumulate: bool = False                      # keep .grad between stages (else zero it, as the texts do)
    note: str = ""
    extra: Callable[[dict[str, Any]], list[str]] | None = None  # (named tensors) -> lines shown after the walk-through


def _double(x: sl.Tensor) -> dict[str, sl.Tensor]:
    z = 2 * x
    return {"z": z, "loss": z.sum(dim=1)}


def _add_mul(a: sl.Tensor, b: sl.Tensor, d: sl.Tensor) -> dict[str, sl.Tensor]:
    c = a + b
    return {"c": c, "e": c * d}


def _abc(a: sl.Tensor, b: sl.Tensor, c: sl.Tensor) -> dict[str, sl.Tensor]:
    return {"y": 3 * a + 2 * b * b + sl.log(c)}


def _doubling(x: sl.Tensor) -> dict[str, sl.Tensor | int]:
    y, k = x * 2, 1
    while float(np.linalg.norm(y.numpy())) < 1000:
        y, k = y * 2, k + 1
    return {"y": y, "k": k}


def _graph_facts(named: dict[str, Any]) -> list[str]:
    e, d = named["e"], named["d"]
    add, acc = (n for n, _ in e.grad_fn.next_functions)
    try:
        add.variable
        has_variable = "has a .variable"
    except AttributeError as exc:
        has_variable = f"AttributeError: {exc}"
    return [f"e.grad_fn                    = {e.grad_fn}",
            f"e.grad_fn.next_functions     = {e.grad_fn.next_functions}",
            f"next_functions[1][0].variable is d: {acc.variable is d}",
            f"next_functions[0][0].variable -> {has_variable}",
            f"AddBackward0.next_functions  = {add.next_functions}"]


EXAMPLES = [
    Example(1, "one-hot seeds pick one output's gradient", "seed text 002",
            "x = sl.tensor([[1., 2., 3., 4.]], requires_grad=True)\nz = 2 * x\nloss = z.sum(dim=1)",
            {"x": [[1.0, 2.0, 3.0, 4.0]]}, _double,
            [("z", [[1.0, 0, 0, 0]]), ("z", [[0, 1.0, 0, 0]]), ("z", [[1.0, 1, 1, 1]]), ("loss", None)],
            note="a one-element output (loss, shape (1,)) needs no explicit gradient: v = 1"),
    Example(2, "the seed picks a weighted sum of the Jacobian's rows", "seed text 001",
            "x = sl.tensor([[2., 1.]], requires_grad=True)\nM = sl.tensor([[1., 2.], [3., 4.]])\ny = x @ M",
            {"x": [[2.0, 1.0]]}, lambda x: {"y": x @ sl.tensor([[1.0, 2.0], [3.0, 4.0]])},
            [("y", [[1.0, 0.0]]), ("y", [[0.0, 1.0]]), ("y", [[1.0, 1.0]])]),
    Example(3, "three leaves and a vector seed", "seed text 002",
            "y = 3*a + 2*b*b + sl.log(c)", {"a": [1.0, 2.0, 3.0], "b": [3.0, 4.0, 5.0], "c": [6.0, 7.0, 8.0]}, _abc,
            [("y", [0.1, 1.0, 0.0001])], note="dy/da = 3, dy/db = 4b, dy/dc = 1/c, each scaled by the seed"),
    Example(4, "scalars: backward() means a seed of 1", "seed text 002",
            "y = 3*a + 2*b*b + sl.log(c)", {"a": 0.1, "b": 1.0, "c": 0.1}, _abc, [("y", None)]),
    Example(5, "gradients accumulate across backward calls", "seed text 002",
            "y.backward(retain_graph=True); y.backward()", {"a": 1.0, "b": 1.0, "c": 1.0}, _abc,
            [("y", None), ("y", None)], accumulate=True,
            note="nobody zeroed .grad between the two calls, so each leaf holds twice its gradient"),
    Example(6, "a loop of doublings is one long chain", "seed texts 001, 003",
            "y = x * 2\nwhile y.data.norm() < 1000: y = y * 2", {"x": np.random.default_rng(0).standard_normal(3)},
            _doubling, [("y", [0.1, 1.0, 0.0001])], note="y = x * 2**k, so x.grad = v * 2**k"),
    Example(7, "the gradient of a sum is all ones", "seed text 003", "x.sum().backward()",
            {"x": np.random.default_rng(1).standard_normal(3)}, lambda x: {"s": x.sum()}, [("s", None)]),
    Example(8, "grad_fn, next_functions and AccumulateGrad", "seed text 004",
            "c = a + b\ne = c * d", {"a": 2.0, "b": 3.0, "d": 4.0},
            _add_mul, [("e", None)], extra=_graph_facts,
            note="each node knows only its own local derivative; the engine chains them"),
]


def _fresh_leaves(ex: Example) -> dict[str, sl.Tensor]:
    return {k: sl.tensor(np.asarray(v, dtype=np.float32), requires_grad=True) for k, v in ex.leaves.items()}


def walk(ex: Example) -> list[str]:
    """The walk-through of one example, as lines of text."""
    out = [f"Example {ex.number}: {ex.title}  ({ex.source})", "=" * 72]
    out += ["  " + line for line in ex.code.splitlines()]
    leaves = _fresh_leaves(ex)
    named = ex.build(**leaves)
    tensors = {k: v for k, v in {**leaves, **named}.items() if isinstance(v, sl.Tensor)}
    for name, value in leaves.items():
        out.append(f"  {name} = {format_array(value.numpy())}")
    shown_graphs = set()
    expected = {k: np.zeros(v.shape, dtype=np.float64) for k, v in leaves.items()}
    for i, (target, seed) in enumerate(ex.stages):
        y = named[target]
        if target not in shown_graphs:
            shown_graphs.add(target)
            out += ["", f"{target} = {format_array(y.numpy())}", "", f"graph of {target}:"]
            out += ["  " + line for line in sl.autograd.render_graph(y, names=tensors).splitlines()]
        v = np.ones(y.shape, dtype=np.float32) if seed is None else np.asarray(seed, dtype=np.float32)
        call = f"{target}.backward()" if seed is None else f"{target}.backward({format_array(v)})"
        more = i + 1 < len(ex.stages)
        out += ["", f">>> {call}" + ("   # retain_graph=True: another backward follows" if more else "")]
        if not ex.accumulate:
            for leaf in leaves.values():
                leaf.grad = None
        with sl.autograd.trace(names=tensors) as t:
            y.backward(None if seed is None else sl.tensor(v), retain_graph=more)
        out += ["  " + line for line in str(t).splitlines()]
        out += ["", f"  check x.grad == v^T J   (v = {format_array(v)}, J = d{target}/dx from the explicit Jacobian)"]
        rows = [("leaf", ".grad", "v^T J" + (" (accumulated)" if ex.accumulate else ""), "",
                 "J (row k = d output_k / d leaf)")]
        for name, leaf in leaves.items():
            def output(x: sl.Tensor, name: str = name) -> sl.Tensor:
                return ex.build(**{**leaves, name: x})[target]

            J = sl.autograd.jacobian(output, leaf).numpy()
            vjp = np.tensordot(v.astype(np.float64), J.astype(np.float64), axes=y.ndim)
            expected[name] = vjp + (expected[name] if ex.accumulate else 0)
            got = leaf.grad.numpy() if leaf.grad is not None else np.zeros(leaf.shape)
            ok = np.allclose(got, expected[name], rtol=1e-5, atol=1e-6)
            rows.append((name, format_array(got), format_array(expected[name]), "match" if ok else "MISMATCH",
                         format_array(J.reshape(y.numpy().size, leaf.numpy().size)) if J.size <= 16
                         else f"shape {J.shape}"))
        widths = [max(len(r[c]) for r in rows) for c in range(5)]
        out += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    if ex.note:
        out += ["", f"  note: {ex.note}"]
    if ex.extra is not None:
        out += [""] + ["  " + line for line in ex.extra({**leaves, **named})]
    return out


def example_numbers() -> list[int]:
    return [ex.number for ex in EXAMPLES]


def explain(number: int | None = None) -> str:
    """All examples (or one) as one text."""
    chosen = [ex for ex in EXAMPLES if number is None or ex.number == number]
    if not chosen:
        raise ValueError(f"no example {number}; choose one of {', '.join(map(str, example_numbers()))}")
    blocks = ["\n".join(walk(ex)) for ex in chosen]
    return "\n\n".join(blocks)
