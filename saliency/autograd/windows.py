"""Window rules: where in each input of a graph node a VJP can be non-zero, given a box of its output.

A `Box` is rows r0:r1 and columns c0:c1 (end-exclusive) of the last two dimensions of a tensor, over
every leading (batch, channel, seed) index; a tensor with fewer than two dimensions is a 1 x n (or
1 x 1) map. `input_boxes(node, box)` maps a box of a node's output to one box per input: the
bounding box of the input positions that the output cells in `box` read, clipped to the input map
(None where nothing is read, or the input takes no gradient). The rule of a node is exact (the
box is the support of the VJP when its weights are non-zero) for convolution, the fused
upsample+convolution, pooling, upsampling, padding, slicing, cat and the elementwise ops; ops that
mix positions (reshape to another trailing shape, matmul, training-mode batch norm, reductions
over rows or columns) and ops without a rule give the whole input map.

`receptive_window(output, input, box)` and `receptive_box(output, input, row, col)` walk a
recorded graph with these rules: the union over all paths, so a theoretical receptive field. Over
several nodes the result contains the bounding box of the true support and equals it unless a
dilated or strided window leaves holes that a later window straddling the border drops.

The geometry (`Box` and the per-axis and per-op-type functions `sliding`, `nearest`, `bilinear`,
`adaptive`, `conv_window`, ...) lives in `saliency.autograd.geometry` and is re-exported here.
"""
import heapq

from .function import AccumulateGrad
# the geometry's public names are re-exported here (users and tests import them from this module)
from .geometry import (Box, adaptive, adaptive_pool_window, bilinear, broadcast_window, conv_window,  # noqa: F401
                       nearest, per_axis as _per_axis, pool_window, shifted as _shifted, slice_axis as _slice_axis,
                       sliding, spatial, trailing_kept as _trailing_kept, upsample_conv_window, upsample_window)
from .ops import conv, elementwise, linalg, loss, norm, pool, reduce, resize, shape


def _union(a, b):
    return b if a is None else a.union(b)


# ---- rules: (node, box, input shapes) -> one box (or None) per input -----------------------------

def _whole(node, box, shapes):
    return tuple(None if s is None else Box.whole(s) for s in shapes)


def _elementwise(node, box, shapes):
    return tuple(None if s is None else broadcast_window(box, s) for s in shapes)


def _first(rule):
    """A rule for input 0 only; the other inputs (weights, biases) get their whole map."""
    def apply(node, box, shapes):
        return (rule(node, box, shapes[0]),) + _whole(node, box, shapes[1:])
    return apply


def _reduction(node, box, shapes):
    axes = (node.axis,) if isinstance(node, reduce.MaxDim) else node.axes
    return _elementwise(node, box, shapes) if _trailing_kept(axes, len(shapes[0])) else _whole(node, box, shapes)


def _softmax(node, box, shapes):
    return _elementwise(node, box, shapes) if _trailing_kept((node.axis,), len(shapes[0])) \
        else _whole(node, box, shapes)


def _regroup(node, box, shapes):
    """reshape/view/flatten/squeeze/unsqueeze: a C-order reshape keeps a position when the last two
    dimensions are the same before and after."""
    same = spatial(shapes[0]) == spatial(node.out_shape) and len(shapes[0]) >= 2 and len(node.out_shape) >= 2
    return _elementwise(node, box, shapes) if same else _whole(node, box, shapes)


def _swap(box):
    return Box(box.c0, box.r0, box.c1, box.r1)


def _reorder(node, box, shapes, order):
    """Transpose/permute: out dim j is in dim order[j]."""
    nd = len(order)
    if nd < 2 or tuple(order[-2:]) == (nd - 2, nd - 1):
        return _elementwise(node, box, shapes)
    if tuple(order[-2:]) == (nd - 1, nd - 2):
        return (_swap(box).clip(shapes[0]),)
    return _whole(node, box, shapes)


def _transpose(node, box, shapes):
    order = list(range(len(shapes[0])))
    if order:
        d0, d1 = node.dims
        order[d0], order[d1] = d1, d0
    return _reorder(node, box, shapes, order)


def _permute(node, box, shapes):
    inverse = node.inverse
    order = [0] * len(inverse)
    for i, j in enumerate(inverse):
        order[j] = i
    return _reorder(node, box, shapes, order)


def _cat(node, box, shapes):
    nd = len(node.out_shape)
    if node.axis < nd - 2:
        return _elementwise(node, box, shapes)
    out, start = [], 0
    for s in shapes:
        n = s[node.axis]
        if node.axis == nd - 2:
            rows = _shifted(box.r0, box.r1, start, n)
            out.append(None if rows is None else Box(rows[0], box.c0, rows[1], box.c1))
        else:
            cols = _shifted(box.c0, box.c1, start, n)
            out.append(None if cols is None else Box(box.r0, cols[0], box.r1, cols[1]))
        start += n
    return tuple(out)


def _stack(node, box, shapes):
    if node.axis <= len(node.out_shape) - 3:
        return _elementwise(node, box, shapes)
    return _whole(node, box, shapes)


def _pad(node, box, shapes):
    if len(shapes[0]) < 2:
        return _whole(node, box, shapes)
    rs, cs = node.window[-2:]
    rows = _shifted(box.r0, box.r1, rs.start, rs.stop - rs.start)
    cols = _shifted(box.c0, box.c1, cs.start, cs.stop - cs.start)
    return (None if rows is None or cols is None else Box(rows[0], cols[0], rows[1], cols[1]),)


def _getitem(node, box, shapes):
    """Basic indexing (ints, slices, None, ...): slices of the last two dimensions shift the box."""
    (in_shape,) = shapes
    nd = len(in_shape)
    if node.post is not None or nd < 2:
        return _whole(node, box, shapes)
    key = list(node.pre)
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    dots = [i for i, k in enumerate(key) if k is Ellipsis]
    if dots:
        key[dots[0]:dots[0] + 1] = [slice(None)] * (nd - used)
    key += [slice(None)] * (nd - sum(1 for k in key if k is not None))
    kept, d = [], 0  # (input dimension, slice) of each output dimension; (None, None) for a new one
    for k in key:
        if k is None:
            kept.append((None, None))
            continue
        if isinstance(k, slice):
            kept.append((d, k))
        d += 1
    if len(kept) < 2 or (kept[-2][0], kept[-1][0]) != (nd - 2, nd - 1):
        return _whole(node, box, shapes)
    (_, rs), (_, cs) = kept[-2:]
    return (_per_axis(box, lambda a, b: _slice_axis(a, b, rs, in_shape[-2]),
                      lambda a, b: _slice_axis(a, b, cs, in_shape[-1])),)


def _batch_norm(node, box, shapes):
    return (_whole if node.training else _first(lambda n, b, s: b.clip(s)))(node, box, shapes)


_RULES = {
    conv.Convolution: _first(lambda n, b, s: conv_window(b, s, n.w_shape[2:], *n.config[:3])),
    conv.UpsampleConvolution: _first(lambda n, b, s: upsample_conv_window(b, s, n.scale)),
    pool.MaxPool2d: _first(lambda n, b, s: pool_window(b, s, *n.config)),
    pool.AvgPool2d: _first(lambda n, b, s: pool_window(b, s, *n.config)),
    pool.AdaptiveAvgPool2d: _first(lambda n, b, s: adaptive_pool_window(b, s, n.out_shape)),
    resize.Upsample: _first(lambda n, b, s: upsample_window(b, s, n.scale, n.mode)),
    norm.BatchNorm: _batch_norm,
    elementwise._Binary: _elementwise,
    elementwise.Where: _elementwise,
    shape.Expand: _elementwise,
    reduce._Reduction: _reduction,
    reduce.MaxDim: _reduction,
    loss.Softmax: _softmax,
    loss.LogSoftmax: _softmax,
    shape.Reshape: _regroup,
    shape.Squeeze: _regroup,
    shape.Unsqueeze: _regroup,
    shape.Transpose: _transpose,
    shape.Permute: _permute,
    shape.Cat: _cat,
    shape.Stack: _stack,
    shape.Pad: _pad,
    shape.GetItem: _getitem,
    linalg.Matmul: _whole,
}
for _op in (elementwise.Neg, elementwise.Exp, elementwise.Log, elementwise.Sqrt, elementwise.Abs,
            elementwise.Relu, elementwise.Sigmoid, elementwise.Tanh, elementwise.Clamp, elementwise.Cast,
            elementwise.Clone):
    _RULES[_op] = _elementwise


def input_boxes(node, box):
    """One Box (or None) per input of `node` (its next_functions), for a box of its output."""
    shapes = [None if fn is None else fn.out_shape for fn, _ in node.next_functions]
    box = box.clip(node.out_shape)
    if box is None:
        return (None,) * len(shapes)
    rule = next((_RULES[k] for k in type(node).__mro__ if k in _RULES), _whole)
    boxes = rule(node, box, shapes)
    return tuple(None if s is None or b is None else b.clip(s) for s, b in zip(shapes, boxes))


def receptive_window(output, input, box):
    """The Box of `input` (a leaf requiring grad, or a tensor of the graph) that a cotangent zero
    outside `box` of `output` can reach: the union over all paths. None when every path is empty."""
    root = output.grad_fn
    if root is None:
        raise ValueError("output has no grad_fn; compute it from input with grad mode on, and make input "
                         "require grad")
    start = box.clip(output.shape)
    if output is input:
        return start
    target = input.grad_fn
    boxes, heap = {root: start}, [(-root.seq, root)]
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


def receptive_box(output, input, row, col):
    """The theoretical receptive field of output pixel (row, col) (all channels) in `input`: a Box."""
    h, w = spatial(output.shape)
    if not (0 <= row < h and 0 <= col < w):
        raise ValueError(f"pixel ({row}, {col}) is outside the {h}x{w} output map (rows 0..{h - 1}, "
                         f"cols 0..{w - 1})")
    return receptive_window(output, input, Box(int(row), int(col), int(row) + 1, int(col) + 1))
