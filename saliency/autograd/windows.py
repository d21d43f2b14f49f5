"""Window rules: where in each input of a graph node a VJP can be non-zero, given a box of its output.

A `Box` is rows r0:r1 and columns c0:c1 (end-exclusive) of the last two dimensions of a tensor, over
every leading (batch, channel, seed) index; a tensor with fewer than two dimensions is a 1 x n (or
1 x 1) map. `input_boxes(node, box)` maps a box of a node's output to one box per input: the
bounding box of the input positions that the output cells in `box` read, clipped to the input map
(None where nothing is read, or the input takes no gradient). Each op class declares its rule next
to its VJP, as `window_rule` (a method, or a shared rule of `saliency.autograd.geometry` such as
`elementwise_window`). The rule is exact (the box is the support of the VJP when its weights are
non-zero) for convolution, the fused upsample+convolution, pooling, upsampling, padding, slicing,
cat and the elementwise ops; ops that mix positions (reshape to another trailing shape, matmul,
training-mode batch norm, reductions over rows or columns) declare `whole_window`, the whole
input map, which is also what a Function without a `window_rule` (a user's op) gets.

`receptive_window(output, input, box)` and `receptive_box(output, input, row, col)` walk a
recorded graph with these rules: the union over all paths, so a theoretical receptive field. Over
several nodes the result contains the bounding box of the true support and equals it unless a
dilated or strided window leaves holes that a later window straddling the border drops.

The geometry (`Box` and the per-axis and per-op-type functions `sliding`, `nearest`, `bilinear`,
`adaptive`, `conv_window`, ...) lives in `saliency.autograd.geometry` and is re-exported here.
"""
from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from .tensor import AccumulateGrad
# the geometry's public names are re-exported here (users and tests import them from this module)
from .geometry import (Box, adaptive, adaptive_pool_window, bilinear, broadcast_window, conv_window,  # noqa: F401
                       nearest, pool_window, sliding, spatial, upsample_conv_window, upsample_window, whole_window)

if TYPE_CHECKING:
    from .tensor import GradNode, Tensor


def _union(a: Box | None, b: Box | None) -> Box | None:
    return b if a is None else a.union(b)


def input_boxes(node: GradNode, box: Box) -> tuple[Box | None, ...]:
    """One Box (or None) per input of `node` (its next_functions), for a box of its output: the op's
    `window_rule(box, input shapes)`; a node without one (a user's Function) gets whole maps."""
    shapes = [None if fn is None else fn.out_shape for fn, _ in node.next_functions]
    clipped = box.clip(node.out_shape)
    if clipped is None:
        return (None,) * len(shapes)
    rule = getattr(type(node), "window_rule", None) or whole_window
    boxes = rule(node, clipped, shapes)
    return tuple(None if s is None or b is None else b.clip(s) for s, b in zip(shapes, boxes))


def receptive_window(output: Tensor, input: Tensor, box: Box) -> Box | None:
    """The Box of `input` (a leaf requiring grad, or a tensor of the graph) that a cotangent zero
    outside `box` of `output` can reach: the union over all paths. None when every path is empty."""
    root: GradNode = output.grad_fn
    if root is None:
        raise ValueError("output has no grad_fn; compute it from input with grad mode on, and make input "
                         "require grad")
    start = box.clip(output.shape)
    if output is input:
        return start
    target: GradNode = input.grad_fn
    boxes: dict[GradNode, Box | None] = {root: start}
    heap = [(-root.seq, root)]
    reached, found = False, None
    while heap:
        node = heapq.heappop(heap)[1]
        here = boxes.pop(node)
        if node is target:
            return here
        ins = input_boxes(node, here) if here is not None else (None,) * len(node.next_functions)
        for (child, _), b in zip(node.next_functions, ins):
            if child is None:
                continue
            if isinstance(child, AccumulateGrad):
                if target is None and child.variable is input:
                    reached, found = True, _union(found, b)
            elif target is None or child.seq >= target.seq:
                if child not in boxes:
                    heapq.heappush(heap, (-child.seq, child))
                    boxes[child] = b
                else:
                    boxes[child] = _union(boxes[child], b)
    if not reached:
        raise ValueError(f"input of shape {tuple(input.shape)} is not reached from output through the recorded "
                         f"graph; it must require grad (or be computed in it) and output must depend on it")
    return found


def receptive_box(output: Tensor, input: Tensor, row: int, col: int) -> Box | None:
    """The theoretical receptive field of output pixel (row, col) (all channels) in `input`: a Box."""
    h, w = spatial(output.shape)
    if not (0 <= row < h and 0 <= col < w):
        raise ValueError(f"pixel ({row}, {col}) is outside the {h}x{w} output map (rows 0..{h - 1}, "
                         f"cols 0..{w - 1})")
    return receptive_window(output, input, Box(int(row), int(col), int(row) + 1, int(col) + 1))
