"""`OnnxModel`: an ONNX graph as a Module of this engine, a submodule per node.

At load, every node gets its converter's Module (a Conv node a `Conv2d`, a Gemm node a `Linear`,
an Add node an `Op`, ...) under a name made from the node's (`features_0_Conv`), so a layer can be
named for Grad-CAM, hooked, randomised or given a rule. Nodes whose inputs are all constants (a
weight transposed by the exporter, a Constant node, shape arithmetic on constants) are computed
once at load and become constants: the layers after them get them as their weights.

The rest is shape arithmetic that depends on the input's size (Shape -> Gather -> Concat ->
Reshape, pad amounts of SAME padding): it is folded for each input shape the model sees, the
first time it sees it, and kept (`plans`); a forward pass then runs only the nodes that depend on
the image's values. A node is folded when its inputs are all constants or it reads only their
shapes (its module's `shape_only`: Shape, Size); one that reads the image's values runs every
time, even when it returns an array (a comparison's mask).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...autograd.grad_mode import no_grad
from ...autograd.tensor import Tensor
from .. import init
from ..module import Module
from ..parameter import Parameter
from .reader import OnnxError
from .registry import find

if TYPE_CHECKING:
    from ...autograd.tensor import TensorLike
    from .reader import Graph, Node

# one node's step: (submodule name, module, input names, output names, positions of the inputs it takes)
_Step = tuple[str, Module, list[str], list[str], tuple[int, ...]]

MAX_SIDE = 1 << 15  # the largest input height or width a model's declared shape may have
PLANS = 8  # input shapes whose folded shape arithmetic a model keeps


class OnnxModel(Module):
    """The model of an ONNX `graph` (`reader.Graph`). `input_shape` (C, H, W): the input size when
    the file leaves it free (default: the file's); `layout` "NCHW" or "NHWC" (default: guessed from
    the file's input shape, NHWC when its last dimension is 1, 3 or 4 and its second is not). The
    model takes (N, C, H, W) images in either case; an NHWC graph gets them transposed."""

    def __init__(self, graph: Graph, input_shape: Sequence[int] | None = None, layout: str | None = None,
                 source: str = "") -> None:
        super().__init__()
        if len(graph.inputs) != 1:
            names = ", ".join(n for n, _, _ in graph.inputs) or "none"
            raise OnnxError(f"{source or 'the model'} takes {len(graph.inputs)} inputs ({names}); maps are made for "
                            f"a model of one input, the image")
        self.input_name, dims, _ = graph.inputs[0]
        self.output_names = list(graph.outputs)
        self.opset = max(v for d, v in graph.opsets.items() if d in ("", "ai.onnx"))
        self.layout = layout or _layout(dims)
        self.input_shape = _input_shape(dims, self.layout, input_shape, source)
        self._steps: list[_Step] = []  # (name, module, input names, output names, positions passed)
        self._constants: dict[str, Any] = {}  # values known at load that the steps read
        # {input shape: (steps to run, constants of that shape)}
        self.plans: dict[tuple[int, ...], tuple[list[_Step], dict[str, Any]]] = {}
        self._build(graph)

    def _build(self, graph: Graph) -> None:
        with init.skipped():  # a layer's weights are the file's: no random ones drawn first
            self._build_steps(graph)

    def _build_steps(self, graph: Graph) -> None:
        known = dict(graph.constants)
        names: set[str] = set()
        made = {self.input_name}
        for i, node in enumerate(graph.nodes):
            build = find(node, graph.opsets)
            unknown = [n for n in node.inputs if n and n not in known and n not in made]
            if unknown:
                raise OnnxError(f"{node.where()} ({node.op_type}) reads {unknown[0]!r}, which no earlier node makes "
                                f"(the graph is damaged, or not in the order ONNX requires)")
            if all(not n or n in known for n in node.inputs):  # no input depends on the image: a constant
                module = build(node, known)
                takes = getattr(module, "onnx_inputs", None) or range(len(node.inputs))
                with no_grad():
                    outputs = _call(module, [known.get(node.inputs[k]) if node.inputs[k] else None for k in takes])
                for name, value in zip(node.outputs, outputs):
                    if name:
                        known[name] = _array(value, node)
                continue
            module = build(node, known)
            made.update(o for o in node.outputs if o)
            name = _module_name(node, i, names)
            self.add_module(name, module)
            takes = getattr(module, "onnx_inputs", None)
            self._steps.append((name, module, node.inputs, node.outputs,
                                tuple(range(len(node.inputs))) if takes is None else tuple(takes)))
        missing = [o for o in self.output_names if o not in known and not any(o in s[3] for s in self._steps)]
        if missing:
            raise OnnxError(f"no node of the graph makes its output {missing[0]!r}")
        read = {n for _, _, ins, _, takes in self._steps for k, n in enumerate(ins) if k in takes and n}
        self._constants = {n: v for n, v in known.items() if n in read}
        if self.output_names[0] in known:
            raise OnnxError(f"the model's output {self.output_names[0]!r} does not depend on its input")

    def forward(self, x: TensorLike) -> Tensor:
        if not isinstance(x, Tensor):
            x = Tensor(np.asarray(x))
        if x.ndim != 4 and self.layout in ("NCHW", "NHWC"):
            raise OnnxError(f"the model takes images (N, C, H, W), got an input of shape {tuple(x.shape)}")
        if self.layout == "NHWC":
            x = x.permute(0, 2, 3, 1)
        key = tuple(x.shape)
        plan = self.plans.get(key)
        if plan is None:
            return self._run_and_plan(x, key)
        steps, constants = plan
        env = dict(constants)
        env[self.input_name] = x
        return self._run(steps, env)

    def _run(self, steps: list[_Step], env: dict[str, Any]) -> Tensor:
        for step in steps:
            _step(step, env)
        out = env[self.output_names[0]]
        if not isinstance(out, Tensor):
            raise OnnxError(f"the model's output {self.output_names[0]!r} does not depend on its input's values")
        return out

    def _run_and_plan(self, x: Tensor, key: tuple[int, ...]) -> Tensor:
        """Run every step on `x`, keeping as this shape's plan the steps whose outputs depend on the
        image's values and the values of the others (constants for this input shape)."""
        env = dict(self._constants)
        env[self.input_name] = x
        steps: list[_Step] = []
        for step in self._steps:
            args, outputs = _step(step, env)
            if any(isinstance(v, Tensor) for v in outputs) or (_reads_image(args) and not _shape_only(step[1])):
                steps.append(step)  # depends on the image's values: runs every time
        read = {ins[k] for _, _, ins, _, takes in steps for k in takes if ins[k]}
        constants = {n: v for n, v in env.items() if n in read and not isinstance(v, Tensor)}
        if len(self.plans) >= PLANS:
            self.plans.pop(next(iter(self.plans)))
        self.plans[key] = (steps, constants)
        out = env[self.output_names[0]]
        if not isinstance(out, Tensor):
            raise OnnxError(f"the model's output {self.output_names[0]!r} does not depend on its input's values")
        return out

    def extra_repr(self) -> str:
        c = self.input_shape
        return f"opset {self.opset}, input {self.layout}" + (f" {c}" if c else "")


def _reads_image(args: Sequence[Any]) -> bool:
    """Whether a step's inputs include a value of the image's (a Tensor that is not a frozen constant)."""
    return any(isinstance(a, Tensor) and not isinstance(a, Parameter) for a in args)


def _shape_only(module: Module) -> bool:
    """Whether a module reads only its inputs' shapes (Shape, Size): its outputs are constants for
    an input shape even when its input is the image's."""
    return getattr(module, "shape_only", False)


def _step(step: _Step, env: dict[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
    """Run one step on the values of `env` ({name: value}), adding its outputs to it; (its inputs, its outputs)."""
    _, module, ins, outs, takes = step
    args = [env[ins[k]] if ins[k] else None for k in takes]
    outputs = _call(module, args)
    for name, value in zip(outs, outputs):
        if name:
            env[name] = value
    return args, outputs


def _call(module: Module, args: Sequence[Any]) -> tuple[Any, ...]:
    """The outputs of `module(*args)` as a tuple."""
    out = module(*args)
    return out if isinstance(out, tuple) else (out,)


def _array(value: Any, node: Node) -> np.ndarray:
    """A folded value as an ndarray."""
    if isinstance(value, Tensor):
        return np.asarray(value._array)
    return np.asarray(value)


def _module_name(node: Node, index: int, taken: set[str]) -> str:
    """A submodule name for the node: its name with every run of other characters than letters,
    digits and _ made one _ (`/features/features.0/Conv` -> `features_features_0_Conv`), else its
    operator and index; unique."""
    base = re.sub(r"[^0-9A-Za-z_]+", "_", node.name).strip("_") or f"{node.op_type}_{index}"
    if base[0].isdigit():
        base = f"node_{base}"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _layout(dims: Sequence[int | None] | None) -> str:
    """"NHWC" for a 4-D input whose last dimension looks like channels and whose second does not."""
    if dims is None or len(dims) != 4:
        return "NCHW" if dims is None or len(dims) == 4 else "other"
    small = (1, 3, 4)
    return "NHWC" if dims[3] in small and dims[1] not in small else "NCHW"


def _input_shape(dims: Sequence[int | None] | None, layout: str, given: Sequence[int] | None,
                 source: str) -> tuple[int, int, int] | None:
    """(C, H, W) of one image: `given`, or the file's when it fixes all three; checked."""
    if dims is not None and len(dims) == 4:
        c, h, w = (dims[3], dims[1], dims[2]) if layout == "NHWC" else dims[1:]
    else:
        c = h = w = None
    if given is not None:
        given = tuple(int(v) for v in given)
        if len(given) != 3:
            raise OnnxError(f"input_shape must be (C, H, W), got {given}")
        for want, got, what in ((c, given[0], "channels"), (h, given[1], "height"), (w, given[2], "width")):
            if want is not None and want != got:
                raise OnnxError(f"{source or 'the model'} declares an input {what} of {want}; input_shape gives {got}")
        c, h, w = given
    if c is None or h is None or w is None:
        return None
    if min(c, h, w) < 1 or max(h, w) > MAX_SIDE:
        raise OnnxError(f"{source or 'the model'} declares an input of {c}x{h}x{w}; at most {MAX_SIDE} pixels a side")
    return (int(c), int(h), int(w))
