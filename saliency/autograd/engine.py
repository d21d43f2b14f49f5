"""The backward pass: dependency counting, hooks, accumulation into leaves, freeing.

No recursion anywhere: the graph is walked with explicit stacks, so a chain of
any length backpropagates, in time linear in its number of nodes and edges.
"""
import contextvars
import heapq
import threading

import numpy as np

from .function import AccumulateGrad
from .patch import Patch, from_seed

# The Trace that `saliency.autograd.trace()` sets while it is active, or None; gets one record per
# node run. Context-local: a trace sees the backward passes of its own thread (or asyncio task) only.
tracer_var = contextvars.ContextVar("saliency.tracer", default=None)

# Held while a gradient is added into a tensor's .grad: threads whose backward passes reach the
# same leaf (Hogwild-style training on one model) lose none of each other's additions.
_grad_lock = threading.Lock()

_FREED = ("trying to backward through the graph a second time: {name} needs values that the "
          "previous backward freed; pass retain_graph=True to every backward but the last "
          "(or to autograd.grad) to keep them")


def execute(roots, *, retain_graph=False, targets=None, capture=False, nb=0):
    """Backpropagate `roots`, a list of (node, gradient array) pairs.

    targets: None to accumulate into every reachable leaf; otherwise a dict
        {node: [(tensor, slot), ...]}; only nodes on a path to a target run, and
        the gradient arriving at each target is accumulated into `tensor.grad`
        or, with `capture=True`, returned in a list indexed by slot.
    nb: the number of leading seed dimensions every gradient carries.
    """
    root_nodes = list(dict.fromkeys(node for node, _ in roots))
    deps = _count_dependencies(root_nodes)
    needed = None
    if targets is not None:
        needed, deps = _prune(root_nodes, deps, targets)
        root_nodes = [n for n in root_nodes if n in needed]
    results = [None] * (1 + max((s for refs in targets.values() for _, s in refs), default=-1)) \
        if capture else None

    buffers = {}
    for node, g in roots:
        if needed is None or node in needed:
            prev = buffers.get(node)
            buffers[node] = g if prev is None else prev + g
    trace = tracer_var.get()
    if trace is None:  # local seeds travel as windows (saliency.autograd.patch); a trace shows dense arrays
        for node in root_nodes:
            g = buffers.get(node)
            if g is not None and type(node) is not AccumulateGrad:
                buffers[node] = from_seed(g, nb) or g
    ready = [(-n.seq, n) for n in root_nodes if n not in deps]
    heapq.heapify(ready)
    heappop, heappush = heapq.heappop, heapq.heappush
    while ready:
        node = heappop(ready)[1]
        g = buffers.pop(node, None)
        grads = None
        if g is not None:
            if type(g) is Patch and (node.pre_hooks or (type(node) is AccumulateGrad and node.variable._hooks)):
                g = g.dense()  # hooks see what a dense backward would show them
            if node.pre_hooks:
                g = _run_hooks(node.pre_hooks, g, node)
            is_leaf = type(node) is AccumulateGrad
            if is_leaf and node.variable._hooks:
                g = _run_hooks(node.variable._hooks, g, node)
            if node.retain_ref is not None and not capture and (targets is None or node not in targets):
                kept = node.retain_ref()
                if kept is not None:
                    _accumulate(kept, g)
            if targets is not None and node in targets:
                for tensor, slot in targets[node]:
                    if capture:
                        results[slot] = g if results[slot] is None else results[slot] + g
                    else:
                        _accumulate(tensor, g)
            elif is_leaf:
                _accumulate(node.variable, g)
            if not is_leaf and (needed is None or any(c in needed for c, _ in node.next_functions)):
                if node.saved is None:
                    raise RuntimeError(_FREED.format(name=node.name()))
                grads = node.backward_window(g) if type(g) is Patch and node.backward_window is not None else None
                if grads is None:
                    grads = node.backward(g if type(g) is not Patch else g.dense())
                if not retain_graph and node.saved:
                    node.saved = None
            if trace is not None:
                trace.record(node, g, grads, capture)
        for i, (child, _) in enumerate(node.next_functions):
            if child is None or (needed is not None and child not in needed):
                continue
            if grads is not None:
                gi = grads[i]
                if gi is not None:
                    shape = child.out_shape
                    if (gi.shape if nb == 0 else gi.shape[nb:]) != shape:
                        raise RuntimeError(f"{node.name()} returned a gradient of shape {gi.shape} for input {i}, "
                                           f"expected {shape}" + (f" after {nb} seed dimension(s)" if nb else ""))
                    if gi.dtype != child.out_dtype:
                        gi = gi.astype(child.out_dtype)
                    prev = buffers.get(child)
                    buffers[child] = gi if prev is None else prev + gi
            left = deps[child] - 1
            deps[child] = left
            if left == 0:
                heappush(ready, (-child.seq, child))
    return results


def _count_dependencies(root_nodes):
    """For every node reachable from the roots, the number of edges that point at it."""
    deps = {}
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


def _prune(root_nodes, deps, targets):
    """The nodes from which a target can be reached, and the dependency counts among them."""
    remaining = dict(deps)
    stack = [n for n in root_nodes if n not in remaining]
    order = []
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
    needed = set()
    for node in reversed(order):
        if node in targets or any(c in needed for c, _ in node.next_functions):
            needed.add(node)
    pruned = {}
    for node in needed:
        for child, _ in node.next_functions:
            if child in needed:
                pruned[child] = pruned.get(child, 0) + 1
    return needed, pruned


def _run_hooks(hooks, g, node):
    """Tensor hooks see the gradient as a Tensor and may return a replacement."""
    Tensor = _tensor.Tensor
    for hook in list(hooks):
        out = hook(Tensor._make(g, False, None))
        if out is not None:
            new = out.data if isinstance(out, Tensor) else np.asarray(out)
            if new.shape != g.shape:
                raise RuntimeError(f"a hook on {node.name()} returned a gradient of shape {new.shape}, "
                                   f"expected {g.shape}; a hook must return None or a gradient of the same shape")
            g = new.astype(g.dtype, copy=False)
    return g


def _accumulate(tensor, g):
    """Add `g` into `tensor.grad`, in place when the tensor already owns a gradient."""
    fresh = type(g) is Patch
    if fresh:
        g = g.dense()  # a new array: kept without a copy if it becomes the gradient
    with _grad_lock:
        current = tensor._grad
        if current is None:
            g = g.astype(tensor.data.dtype, copy=False) if fresh else np.array(g, dtype=tensor.data.dtype)
            tensor._grad = _tensor.Tensor._make(g, False, None)
        elif current.data.flags.writeable and current.data.shape == np.shape(g):
            current.data += g
        else:
            current.data = current.data + g


from . import tensor as _tensor  # noqa: E402  (tensor.py imports this module)
