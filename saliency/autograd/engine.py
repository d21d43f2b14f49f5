"""The backward pass: dependency counting, hooks, accumulation into leaves, freeing.

No recursion anywhere: the graph is walked with explicit stacks, so a chain of
any length backpropagates, in time linear in its number of nodes and edges.
"""
from __future__ import annotations

import contextvars
import heapq
import threading
from typing import TYPE_CHECKING, Any, Protocol, Sequence, Union, cast

import numpy as np

from .patch import Patch, from_seed
from .rules import rules_var
from .tensor import AccumulateGrad, Tensor

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .tensor import GradNode, Hook

    # A gradient on its way through the graph: a dense array, or a windowed one (a Patch).
    Grad = Union[NDArray[Any], Patch]
    Targets = dict[GradNode, list[tuple[Tensor, int]]]


class Tracer(Protocol):
    """What `tracer_var` holds: saliency.autograd.trace.Trace (not imported: it imports this module)."""

    def record(self, node: GradNode, g: Grad, grads: Sequence[Grad | None] | None, returned: bool = False) -> None: ...


# The Trace that `saliency.autograd.trace()` sets while it is active, or None; gets one record per
# node run. Context-local: a trace sees the backward passes of its own thread (or asyncio task) only.
tracer_var: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("saliency.tracer", default=None)

# Held while a gradient is added into a tensor's .grad: threads whose backward passes reach the
# same leaf (Hogwild-style training on one model) lose none of each other's additions.
_grad_lock = threading.Lock()

_FREED = ("trying to backward through the graph a second time: {name} needs values that the "
          "previous backward freed; pass retain_graph=True to every backward but the last "
          "(or to autograd.grad) to keep them")


def execute(roots: Sequence[tuple[GradNode, NDArray[Any]]], *, retain_graph: bool = False,
            targets: Targets | None = None, capture: bool = False, seed_ndim: int = 0) -> list[Grad | None] | None:
    """Backpropagate `roots`, a list of (node, gradient array) pairs.

    targets: None to accumulate into every reachable leaf; otherwise a dict
        {node: [(tensor, slot), ...]}; only nodes on a path to a target run, and
        the gradient arriving at each target is accumulated into `tensor.grad`
        or, with `capture=True`, returned in a list indexed by slot.
    seed_ndim: the number of leading seed dimensions every gradient carries.

    Nodes run in the order PyTorch runs them (the most recently recorded ready node first):
    each one is delivered its summed gradient (`_Pass.deliver`: hooks, retain_grad, targets,
    leaves), runs its VJP (`vjp`: windowed or dense), and adds the results into its children's
    sums; a child is ready when all its incoming edges have been passed.
    """
    run = _Pass(roots, targets, capture, seed_ndim)
    ready, buffers, deps, needed, trace = run.ready, run.buffers, run.deps, run.needed, run.trace
    rules = rules_var.get()  # a rule set (guided backprop, LRP, DeepLift) decides each node's step, else its VJP
    heappop, heappush = heapq.heappop, heapq.heappush
    while ready:
        node = heappop(ready)[1]
        grad = buffers.pop(node, None)
        grads = None
        if grad is not None:
            is_leaf = type(node) is AccumulateGrad
            if is_leaf or node.pre_hooks or node.retain_ref is not None or targets is not None:
                grad = run.deliver(node, grad, is_leaf)
            if not is_leaf and (needed is None or any(c in needed for c, _ in node.next_functions)):
                grads = vjp(node, grad, retain_graph) if rules is None else rules.vjp(node, grad, retain_graph, vjp)
            if trace is not None:
                trace.record(node, grad, grads, capture)
        for i, (child, _) in enumerate(node.next_functions):
            if child is None or (needed is not None and child not in needed):
                continue
            if grads is not None:
                grad_i = grads[i]
                if grad_i is not None:
                    if (grad_i.shape if seed_ndim == 0 else grad_i.shape[seed_ndim:]) != child.out_shape \
                            or grad_i.dtype != child.out_dtype:
                        grad_i = _checked(node, i, grad_i, child, seed_ndim)
                    prev = buffers.get(child)
                    buffers[child] = grad_i if prev is None else prev + grad_i
            left = deps[child] - 1
            deps[child] = left
            if left == 0:
                heappush(ready, (-child.seq, child))
    return run.results


def _checked(node: GradNode, i: int, grad: Grad, child: GradNode, seed_ndim: int) -> Grad:
    """`grad`, the gradient `node` returned for input `i`, in the child's dtype; an error if its
    shape is not the child's output shape after the seed dimensions."""
    shape = child.out_shape
    if (grad.shape if seed_ndim == 0 else grad.shape[seed_ndim:]) != shape:
        raise RuntimeError(f"{node.name()} returned a gradient of shape {grad.shape} for input {i}, expected {shape}"
                           + (f" after {seed_ndim} seed dimension(s)" if seed_ndim else ""))
    return grad if grad.dtype == child.out_dtype else grad.astype(child.out_dtype)


class _Pass:
    """One backward pass: the nodes that run, the gradients summed so far, what to fill."""

    __slots__ = ("targets", "capture", "seed_ndim", "needed", "deps", "buffers", "ready", "results", "trace")

    def __init__(self, roots: Sequence[tuple[GradNode, NDArray[Any]]], targets: Targets | None, capture: bool,
                 seed_ndim: int) -> None:
        """Prepare the graph: count each node's incoming edges (among the nodes that lead to a
        target, when there are targets), sum the root gradients and queue the roots."""
        self.targets = targets
        self.capture = capture
        self.seed_ndim = seed_ndim
        root_nodes = list(dict.fromkeys(node for node, _ in roots))
        deps = _count_dependencies(root_nodes)
        needed: set[GradNode] | None = None
        if targets is not None:
            needed, deps = _prune(root_nodes, deps, targets)
            root_nodes = [n for n in root_nodes if n in needed]
        self.needed = needed
        self.deps = deps
        slots = (s for refs in (targets or {}).values() for _, s in refs)
        self.results: list[Grad | None] | None = [None] * (1 + max(slots, default=-1)) if capture else None
        buffers: dict[GradNode, Grad] = {}
        for node, grad in roots:
            if needed is None or node in needed:
                prev = buffers.get(node)
                buffers[node] = grad if prev is None else prev + grad
        self.trace = tracer_var.get()
        if self.trace is None:  # local seeds travel as windows (saliency.autograd.patch); a trace shows dense arrays
            for node in root_nodes:
                seed = buffers.get(node)
                if seed is not None and type(node) is not AccumulateGrad:
                    buffers[node] = from_seed(cast("NDArray[Any]", seed), seed_ndim) or seed  # roots are arrays
        self.buffers = buffers
        self.ready = [(-n.seq, n) for n in root_nodes if n not in deps]
        heapq.heapify(self.ready)

    def deliver(self, node: GradNode, grad: Grad, is_leaf: bool) -> Grad:
        """The gradient that reached `node`, after its hooks; stored where it is asked for
        (a retained .grad, a target, a leaf's .grad)."""
        leaf_hooks = is_leaf and node.variable._hooks
        if node.pre_hooks or leaf_hooks:
            # hooks see what a dense backward would show them
            array = grad.dense() if isinstance(grad, Patch) else grad
            if leaf_hooks:  # a leaf's tensor hooks, then its node's (as PyTorch)
                array = _run_hooks(node.variable._hooks, array, node)
            if node.pre_hooks:
                array = _run_hooks(node.pre_hooks, array, node)
            grad = array
        targets = self.targets
        is_target = targets is not None and node in targets
        if node.retain_ref is not None and not self.capture and not is_target:
            kept = node.retain_ref()
            if kept is not None:
                _accumulate(kept, grad)
        if is_target:
            assert targets is not None
            results: Any = self.results
            for tensor, slot in targets[node]:
                if self.capture:
                    results[slot] = grad if results[slot] is None else results[slot] + grad
                else:
                    _accumulate(tensor, grad)
        elif is_leaf:
            _accumulate(node.variable, grad)
        return grad


def vjp(node: GradNode, grad: Grad, retain_graph: bool) -> Sequence[Grad | None] | None:
    """The node's VJP of `grad`: one gradient (or None) per input. A windowed gradient (a Patch)
    goes through the node's cropped VJP when it has one, else through the dense VJP; the node's
    saved values are freed afterwards unless `retain_graph`."""
    if node.saved is None:
        raise RuntimeError(_FREED.format(name=node.name()))
    grads = None
    if type(grad) is Patch:
        if node.backward_window is not None:
            grads = node.backward_window(grad)
        if grads is None:
            grads = node.backward(grad.dense())
    else:
        grads = node.backward(grad)
    if not retain_graph and node.saved:
        node.saved = None
    return grads


def _count_dependencies(root_nodes: list[GradNode]) -> dict[GradNode, int]:
    """For every node reachable from the roots, the number of edges that point at it."""
    deps: dict[GradNode, int] = {}
    seen = set(root_nodes)
    stack = list(root_nodes)
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is None:
                continue
            deps[child] = deps.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return deps


def _prune(root_nodes: list[GradNode], deps: dict[GradNode, int],
           targets: Targets) -> tuple[set[GradNode], dict[GradNode, int]]:
    """The nodes from which a target can be reached, and the dependency counts among them."""
    remaining = dict(deps)
    stack = [n for n in root_nodes if n not in remaining]
    order: list[GradNode] = []
    while stack:
        node = stack.pop()
        order.append(node)
        for child, _ in node.next_functions:
            if child is None:
                continue
            left = remaining[child] - 1
            remaining[child] = left
            if left == 0:
                stack.append(child)
    needed: set[GradNode] = set()
    for node in reversed(order):
        if node in targets or any(c in needed for c, _ in node.next_functions):
            needed.add(node)
    pruned: dict[GradNode, int] = {}
    for node in needed:
        for child, _ in node.next_functions:
            if child in needed:
                pruned[child] = pruned.get(child, 0) + 1
    return needed, pruned


def _run_hooks(hooks: list[Hook], g: NDArray[Any], node: GradNode) -> NDArray[Any]:
    """Tensor hooks see the gradient as a Tensor and may return a replacement."""
    for hook in list(hooks):
        out = hook(Tensor._make(g, False, None))
        if out is not None:
            new = out._array if isinstance(out, Tensor) else np.asarray(out)
            if new.shape != g.shape:
                raise RuntimeError(f"a hook on {node.name()} returned a gradient of shape {new.shape}, "
                                   f"expected {g.shape}; a hook must return None or a gradient of the same shape")
            g = new.astype(g.dtype, copy=False)
    return g


def _accumulate(tensor: Tensor, g: Grad) -> None:
    """Add `g` into `tensor.grad`, in place when the tensor already owns a gradient."""
    fresh = isinstance(g, Patch)
    array = g.dense() if isinstance(g, Patch) else g  # a Patch's is new: kept without a copy as the gradient
    with _grad_lock:
        current = tensor._grad
        if current is None:
            leaf = tensor._array
            if array.shape == leaf.shape and not (fresh and array.dtype == leaf.dtype
                                                  and array.strides == leaf.strides):
                array, given = np.empty_like(leaf), array  # in the leaf's memory format, as PyTorch's .grad
                array[...] = given
            elif array.shape != leaf.shape:
                array = array.astype(leaf.dtype, copy=False) if fresh else np.array(array, dtype=leaf.dtype)
            tensor._grad = Tensor._make(array, False, None)
        elif current._array.flags.writeable and current._array.shape == np.shape(array):
            current._array += array
        else:
            current._array = current._array + array
