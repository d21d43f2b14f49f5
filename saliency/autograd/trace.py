"""Show the work of backward: the graph as a text tree, and a trace of every VJP the engine runs.

    with sl.autograd.trace(names={"x": x}) as t:
        y.backward(v)
    print(t)                       # one row per edge: node, gradient in, VJP sent to each input
    print(sl.autograd.render_graph(y, names={"y": y, "x": x}))
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np

from .engine import tracer_var
from .tensor import AccumulateGrad
from .grad_mode import leave
from .printing import format_array

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .tensor import GradNode, Tensor


class _Labels:
    """Human names for nodes: the user's names for tensors, else the node's PyTorch name."""

    def __init__(self, names: Mapping[str, Tensor] | None) -> None:
        self.by_id: dict[int, str] = {}
        self.nodes: list[GradNode] = []  # keeps the labelled nodes alive, so that their ids stay theirs
        for name, t in (names or {}).items():
            node = t.grad_fn if t.grad_fn is not None else (t._accumulator() if t.requires_grad else None)
            if node is not None:
                self.by_id[id(node)] = name
                self.nodes.append(node)

    def tensor(self, node: GradNode) -> str | None:
        return self.by_id.get(id(node))

    def __call__(self, node: GradNode) -> str:
        name = self.tensor(node)
        return f"{node.name()}({name})" if name else node.name()


class TraceStep:
    """One node run by the engine: the gradient that arrived and what it sent to each input."""

    def __init__(self, index: int, node: GradNode, grad_in: NDArray[Any],
                 sends: list[tuple[GradNode | None, NDArray[Any] | None]], leaf_grad: NDArray[Any] | None) -> None:
        self.index = index
        self.node = node
        self.name = node.name()
        self.grad_in = grad_in
        self.sends = sends          # list of (next node or None, gradient array or None)
        self.leaf_grad = leaf_grad  # for AccumulateGrad: the leaf's .grad after this step

    def __repr__(self) -> str:
        return f"<TraceStep {self.index} {self.name}>"


class Trace:
    """What one or more backward passes did, node by node, in the order the engine ran them."""

    def __init__(self, names: Mapping[str, Tensor] | None = None) -> None:
        self.steps: list[TraceStep] = []
        self._labels = _Labels(names)

    def record(self, node: GradNode, g: Any, grads: Sequence[Any] | None, returned: bool = False) -> None:
        """Called by the engine; `returned` is true when gradients are returned (autograd.grad)
        rather than accumulated, so that a leaf's .grad was not touched."""
        sends: list[tuple[GradNode | None, NDArray[Any] | None]] = []
        if grads is not None:
            for (child, _), gi in zip(node.next_functions, grads):
                sends.append((child, None if gi is None or child is None else np.array(gi)))
        leaf_grad = None
        if not returned and type(node) is AccumulateGrad and node.variable._grad is not None:
            leaf_grad = np.array(node.variable._grad._array)
        self.steps.append(TraceStep(len(self.steps) + 1, node, np.array(g), sends, leaf_grad))

    def __iter__(self) -> Iterator[TraceStep]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i: int) -> TraceStep:
        return self.steps[i]

    def rows(self) -> list[list[str]]:
        """The table as rows of strings: step, node, gradient in, sent to, VJP."""
        rows = []
        for s in self.steps:
            first = [str(s.index), self._labels(s.node), format_array(s.grad_in)]
            if type(s.node) is AccumulateGrad:
                name = self._labels.tensor(s.node) or "leaf"
                value = format_array(s.leaf_grad) if s.leaf_grad is not None else "(returned, .grad untouched)"
                rows.append(first + [f"{name}.grad", value])
                continue
            if not s.sends:
                rows.append(first + ["(nothing needed)", ""])
            for k, (child, gi) in enumerate(s.sends):
                target = f"[{k}] " + (self._labels(child) if child is not None else "None (needs no grad)")
                cells = first if k == 0 else ["", "", ""]
                rows.append(cells + [target, format_array(gi) if child is not None else "-"])
        return rows

    def __str__(self) -> str:
        header = ["step", "node", "gradient in (dL/d output)", "sends to input", "VJP sent"]
        rows = [header] + self.rows()
        widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    __repr__ = __str__


@contextlib.contextmanager
def trace(names: Mapping[str, Tensor] | None = None) -> Iterator[Trace]:
    """Record every node the engine runs inside the block, in this thread (or asyncio task) only;
    `names` maps labels to tensors."""
    t = Trace(names)
    token = tracer_var.set(t)
    try:
        yield t
    finally:
        leave(tracer_var, [token])


def render_graph(output: Tensor, names: Mapping[str, Tensor] | None = None) -> str:
    """The backward graph below `output` as an indented text tree.

    Each line is one edge of `next_functions`: the node it leads to (PyTorch's name), the
    tensor's name if given in `names`, and for leaves their shape and value. A node reached
    a second time is shown once and referred to by its number.
    """
    labels = _Labels(names)
    root = output.grad_fn if output.grad_fn is not None else (output._accumulator() if output.requires_grad else None)
    if root is None:
        return "(no graph: the tensor does not require grad)"
    numbers: dict[int, int] = {}
    lines: list[str] = []
    stack: list[tuple[GradNode | None, str, str, str | None, int]] = [(root, "", "", None, 0)]
    while stack:
        node, prefix, branch, edge, depth = stack.pop()
        head = prefix + branch + (f"{edge} " if edge is not None else "")
        if depth and not prefix and depth % _MAX_INDENT == 0:
            head = f"┄ depth {depth} ┄ " + head
        if node is None:
            lines.append(head + "None  (input needs no gradient)")
            continue
        if id(node) in numbers:
            lines.append(head + f"{labels(node)}  (shared, see #{numbers[id(node)]})")
            continue
        numbers[id(node)] = len(numbers) + 1
        lines.append(head + f"#{numbers[id(node)]} {labels(node)}  " + _describe(node))
        children = node.next_functions
        child_prefix = prefix + ("" if not branch else ("   " if branch.startswith("└") else "│  "))
        if (depth + 1) % _MAX_INDENT == 0:
            child_prefix = ""  # deep graphs restart the indentation instead of growing it without end
        for k in reversed(range(len(children))):
            child, _ = children[k]
            stack.append((child, child_prefix, "└─ " if k == len(children) - 1 else "├─ ", f"[{k}]", depth + 1))
    return "\n".join(lines)


_MAX_INDENT = 32  # levels of indentation before render_graph starts again at the left margin


def _describe(node: GradNode) -> str:
    if type(node) is AccumulateGrad:
        v = node.variable
        value = f" = {format_array(v._array)}" if v._array.size <= 12 else ""
        return f"leaf, shape {v.shape}{value}"
    shape = node.out_shape
    return f"output shape {shape}"
