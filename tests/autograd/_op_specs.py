"""One table of op specs shared by the op tests (gradcheck, torch, node names).

Each `OpSpec` holds a readable id, the op as a function of our tensors, the same op as a
function of torch tensors, one shape per differentiable input, and the domain each input is
drawn from. Domains keep inputs where the op is smooth (log/sqrt/fractional pow on positive
numbers; relu/abs away from 0; clamp away from its bounds; max/norm(inf) without ties), so
that central differences are exact to O(eps^2); tie behaviour has its own tests.
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np

import saliency as sl

try:  # torch is a test extra: only the torch comparisons call the torch_fn side
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = F = None

INF = float("inf")


# ---- input domains: (rng, shape) -> float64 array ---------------------------------------------
def real(rng, shape):
    return rng.standard_normal(shape)


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng, shape):
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 2.0, shape)


def distinct(rng, shape):
    """No two values (nor two absolute values) within 0.25 of each other, none near 0: no ties."""
    n = int(np.prod(shape, dtype=int))
    return (rng.choice([-1.0, 1.0], n) * (0.5 + 0.25 * rng.permutation(n))).reshape(shape)


def away_from(*points, margin=0.1):
    """Normal samples at least `margin` from each of `points` (clamp bounds, kinks)."""
    def sample(rng, shape):
        x = rng.standard_normal(shape)
        for _ in range(100):
            bad = np.zeros(np.shape(x), dtype=bool)
            for p in points:
                bad |= np.abs(x - p) < margin
            if not bad.any():
                return x
            x = np.where(bad, rng.standard_normal(np.shape(x)), x)
        raise AssertionError("could not sample away from the given points")  # never with these margins
    return sample


@dataclass(frozen=True)
class OpSpec:
    id: str
    fn: Callable          # our tensors -> our Tensor
    torch_fn: Callable    # torch tensors -> torch tensor
    shapes: tuple         # one shape per differentiable input
    domain: object = real  # one domain for all inputs, or a tuple of one per input
    fd_eps: float = 1e-6  # finite-difference step (larger only for the float32 round trip)

    def arrays(self, rng, dtype=np.float64):
        domains = self.domain if isinstance(self.domain, tuple) else (self.domain,) * len(self.shapes)
        return [np.asarray(d(rng, s), dtype=dtype) for d, s in zip(domains, self.shapes)]

    def __repr__(self):
        return self.id


def spec(id, fn, shapes, torch_fn=None, **kw):
    """A spec; leave torch_fn out when `fn` only uses operators and methods both libraries share."""
    return OpSpec(id, fn, torch_fn or fn, tuple(shapes), **kw)


def _t(a):
    return torch.as_tensor(a)


# constants that carry no gradient
COND = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, True]])
MASK = np.array([[True, False, False, True], [False, True, True, False], [False, False, False, True]])
TARGET = np.array([1, 0, 3])                              # classes for (3, 4) logits
RUNNING_MEAN = np.array([0.3, -0.2])
RUNNING_VAR = np.array([1.5, 0.7])
TARGET_4D = np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]])  # classes for (2, 3, 2, 2) logits
F1D = np.array([0.5, -1.5, 2.0])                         # a constant operand
ATTEND = np.array([[True, False, True, True], [False, False, False, False], [False, True, True, False]])  # (L, S)


SPECS = [
    # ---- elementwise: arithmetic and broadcasting ------------------------------------------------
    spec("add", lambda x, y: x + y, [(3, 4), (3, 4)]),
    spec("add_outer_broadcast", lambda x, y: x + y, [(3, 1), (1, 4)]),
    spec("add_row_broadcast", lambda x, y: x + y, [(2, 3), (3,)]),
    spec("add_scalar", lambda x: x + 1.5, [(2, 3)]),
    spec("add_scalar_left", lambda x: 1.5 + x, [(2, 3)]),
    spec("add_0d_tensor", lambda x, y: x + y, [(), (2, 3)]),
    spec("add_0d_0d", lambda x, y: x + y, [(), ()]),
    spec("add_array_constant", lambda x: x + F1D, [(2, 3)], lambda x: x + _t(F1D)),
    spec("add_fn", lambda x, y: sl.add(x, y), [(2, 3), (2, 3)], lambda x, y: torch.add(x, y)),
    spec("sub", lambda x, y: x - y, [(3, 4), (3, 4)]),
    spec("sub_broadcast", lambda x, y: x - y, [(3, 1), (1, 4)]),
    spec("sub_scalar", lambda x: x - 0.5, [(2, 3)]),
    spec("rsub_scalar", lambda x: 2.0 - x, [(2, 3)]),
    spec("sub_0d", lambda x, y: x - y, [(2, 3), ()]),
    spec("mul", lambda x, y: x * y, [(3, 4), (3, 4)]),
    spec("mul_outer_broadcast", lambda x, y: x * y, [(3, 1), (1, 4)]),
    spec("mul_row_broadcast", lambda x, y: x * y, [(2, 3), (3,)]),
    spec("mul_scalar", lambda x: x * 2.5, [(2, 3)]),
    spec("mul_scalar_left", lambda x: 2.5 * x, [(2, 3)]),
    spec("mul_0d", lambda x, y: x * y, [(), (2, 3)]),
    spec("mul_rank_broadcast", lambda x, y: x * y, [(2, 1, 3), (4, 1)]),
    spec("div", lambda x, y: x / y, [(3, 4), (3, 4)], domain=(real, away_from_zero)),
    spec("div_broadcast", lambda x, y: x / y, [(3, 1), (1, 4)], domain=(real, away_from_zero)),
    spec("div_scalar", lambda x: x / 4.0, [(2, 3)]),
    spec("rdiv_scalar", lambda x: 3.0 / x, [(2, 3)], domain=away_from_zero),
    spec("div_0d", lambda x, y: x / y, [(2, 3), ()], domain=(real, away_from_zero)),
    spec("neg", lambda x: -x, [(2, 3)]),
    spec("neg_fn", lambda x: sl.neg(x), [(2, 3)], lambda x: torch.neg(x)),
    spec("pow_number", lambda x: x ** 3, [(2, 3)]),
    spec("pow_fractional", lambda x: x ** 1.5, [(2, 3)], domain=positive),
    spec("pow_negative", lambda x: x ** -2.0, [(2, 3)], domain=away_from_zero),
    spec("pow_zero", lambda x: x ** 0, [(2, 3)]),
    spec("pow_tensor", lambda x, y: x ** y, [(3, 4), (3, 4)], domain=(positive, real)),
    spec("pow_tensor_broadcast", lambda x, y: x ** y, [(3, 1), (4,)], domain=(positive, real)),
    spec("pow_number_base", lambda x: 2.0 ** x, [(2, 3)]),
    spec("pow_fn", lambda x: sl.pow(x, 2.0), [(2, 3)], lambda x: torch.pow(x, 2.0)),
    # ---- elementwise: unary functions ------------------------------------------------------------
    spec("exp", lambda x: sl.exp(x), [(2, 3)], lambda x: torch.exp(x)),
    spec("exp_method_0d", lambda x: x.exp(), [()]),
    spec("log", lambda x: sl.log(x), [(2, 3)], lambda x: torch.log(x), domain=positive),
    spec("sqrt", lambda x: sl.sqrt(x), [(2, 3)], lambda x: torch.sqrt(x), domain=positive),
    spec("abs", lambda x: sl.abs(x), [(2, 3)], lambda x: torch.abs(x), domain=away_from_zero),
    spec("abs_operator", lambda x: abs(x), [(2, 3)], domain=away_from_zero),
    spec("relu", lambda x: sl.relu(x), [(3, 4)], lambda x: torch.relu(x), domain=away_from_zero),
    spec("sigmoid", lambda x: sl.sigmoid(x), [(3, 4)], lambda x: torch.sigmoid(x)),
    spec("sigmoid_large", lambda x: (x * 30.0).sigmoid(), [(3, 4)]),
    spec("tanh", lambda x: sl.tanh(x), [(3, 4)], lambda x: torch.tanh(x)),
    spec("clamp_min", lambda x: x.clamp(min=-0.3), [(3, 4)], domain=away_from(-0.3)),
    spec("clamp_max", lambda x: x.clamp(max=0.4), [(3, 4)], domain=away_from(0.4)),
    spec("clamp_both", lambda x: sl.clamp(x, -0.5, 0.5), [(3, 4)], lambda x: torch.clamp(x, -0.5, 0.5),
         domain=away_from(-0.5, 0.5)),
    spec("maximum", lambda x, y: sl.maximum(x, y), [(3, 4), (3, 4)], lambda x, y: torch.maximum(x, y),
         domain=distinct),
    spec("maximum_broadcast", lambda x, y: x.maximum(y), [(3, 1), (1, 4)], domain=distinct),
    spec("minimum", lambda x, y: sl.minimum(x, y), [(3, 4), (3, 4)], lambda x, y: torch.minimum(x, y),
         domain=distinct),
    spec("minimum_broadcast", lambda x, y: x.minimum(y), [(2, 3), (3,)], domain=distinct),
    spec("where", lambda x, y: sl.where(COND, x, y), [(3, 4), (3, 4)], lambda x, y: torch.where(_t(COND), x, y)),
    spec("where_broadcast", lambda x, y: sl.where(COND, x, y), [(3, 1), (4,)],
         lambda x, y: torch.where(_t(COND), x, y)),
    spec("where_scalar", lambda x: sl.where(COND, x, 0.0), [(3, 4)], lambda x: torch.where(_t(COND), x, 0.0)),
    # ---- activations (ops/activation.py): inputs kept away from the kinks; the kinks themselves, and
    # non-finite inputs, are compared with PyTorch in tests/autograd/test_activations.py --------------
    spec("relu6", lambda x: sl.nn.functional.relu6(x), [(3, 4)], lambda x: F.relu6(x),
         domain=lambda rng, s: 4 * away_from(0, 1.5, margin=0.03)(rng, s)),
    spec("hardtanh", lambda x: sl.nn.functional.hardtanh(x), [(3, 4)], lambda x: F.hardtanh(x), domain=away_from(-1, 1)),
    spec("hardtanh_bounds", lambda x: sl.nn.functional.hardtanh(x, -0.5, 0.8), [(3, 4)],
         lambda x: F.hardtanh(x, -0.5, 0.8), domain=away_from(-0.5, 0.8)),
    spec("leaky_relu", lambda x: sl.nn.functional.leaky_relu(x), [(3, 4)], lambda x: F.leaky_relu(x),
         domain=away_from_zero),
    spec("leaky_relu_slope", lambda x: sl.nn.functional.leaky_relu(x, 0.2), [(3, 4)], lambda x: F.leaky_relu(x, 0.2),
         domain=away_from_zero),
    spec("elu", lambda x: sl.nn.functional.elu(x), [(3, 4)], lambda x: F.elu(x), domain=away_from_zero),
    spec("elu_alpha", lambda x: sl.nn.functional.elu(x, alpha=0.5), [(3, 4)], lambda x: F.elu(x, alpha=0.5),
         domain=away_from_zero),
    spec("silu", lambda x: sl.nn.functional.silu(x), [(3, 4)], lambda x: F.silu(x),
         domain=lambda rng, s: 4 * real(rng, s)),
    spec("hardswish", lambda x: sl.nn.functional.hardswish(x), [(3, 4)], lambda x: F.hardswish(x),
         domain=lambda rng, s: 3 * away_from(-1, 1, margin=0.03)(rng, s)),
    spec("hardsigmoid", lambda x: sl.nn.functional.hardsigmoid(x), [(3, 4)], lambda x: F.hardsigmoid(x),
         domain=lambda rng, s: 3 * away_from(-1, 1, margin=0.03)(rng, s)),
    spec("gelu", lambda x: sl.nn.functional.gelu(x), [(3, 4)], lambda x: F.gelu(x),
         domain=lambda rng, s: 3 * real(rng, s)),
    spec("gelu_tanh", lambda x: sl.nn.functional.gelu(x, approximate="tanh"), [(3, 4)],
         lambda x: F.gelu(x, approximate="tanh"), domain=lambda rng, s: 3 * real(rng, s)),
    spec("erf", lambda x: sl.erf(x), [(3, 4)], lambda x: torch.erf(x), domain=lambda rng, s: 2 * real(rng, s)),
    spec("softplus", lambda x: sl.nn.functional.softplus(x), [(3, 4)], lambda x: F.softplus(x),
         domain=lambda rng, s: 4 * real(rng, s)),
    spec("softplus_beta_threshold", lambda x: sl.nn.functional.softplus(x, 2.0, 1.0), [(3, 4)],
         lambda x: F.softplus(x, 2.0, 1.0), domain=away_from(0.5)),
    spec("softplus_past_threshold", lambda x: sl.nn.functional.softplus(x * 30.0), [(3, 4)],
         lambda x: F.softplus(x * 30.0), domain=away_from(2 / 3, margin=0.05)),
    spec("mish", lambda x: sl.nn.functional.mish(x), [(3, 4)], lambda x: F.mish(x),
         domain=lambda rng, s: 4 * real(rng, s)),
    spec("prelu_channels", lambda x, w: sl.nn.functional.prelu(x, w), [(2, 3, 4, 5), (3,)],
         lambda x, w: F.prelu(x, w), domain=(away_from_zero, real)),
    spec("prelu_one_weight", lambda x, w: sl.prelu(x, w), [(3, 4), (1,)], lambda x, w: torch.prelu(x, w),
         domain=(away_from_zero, real)),
    spec("prelu_method_channels_2d", lambda x, w: x.prelu(w), [(3, 4), (4,)], domain=(away_from_zero, real)),
    spec("prelu_1d", lambda x, w: sl.prelu(x, w), [(5,), (1,)], lambda x, w: torch.prelu(x, w),
         domain=(away_from_zero, real)),
    spec("prelu_3d_channels", lambda x, w: sl.prelu(x, w), [(2, 3, 4), (3,)], lambda x, w: torch.prelu(x, w),
         domain=(away_from_zero, real)),
    # ---- reductions --------------------------------------------------------------------------------
    spec("sum", lambda x: x.sum(), [(3, 4)]),
    spec("sum_dim", lambda x: x.sum(1), [(3, 4)]),
    spec("sum_dims", lambda x: x.sum((0, 2)), [(2, 3, 4)]),
    spec("sum_keepdim", lambda x: x.sum(dim=1, keepdim=True), [(2, 3, 4)]),
    spec("sum_negative_dim", lambda x: x.sum(-1), [(2, 3, 4)]),
    spec("sum_dims_keepdim_negative", lambda x: x.sum((-1, 0), keepdim=True), [(2, 3, 4)]),
    spec("sum_0d", lambda x: x.sum(), [()]),
    spec("sum_fn", lambda x: sl.sum(x, 0), [(3, 4)], lambda x: torch.sum(x, 0)),
    spec("mean", lambda x: x.mean(), [(3, 4)]),
    spec("mean_dim", lambda x: x.mean(0), [(3, 4)]),
    spec("mean_dims_keepdim", lambda x: sl.mean(x, (0, -1), keepdim=True), [(2, 3, 4)],
         lambda x: torch.mean(x, (0, -1), keepdim=True)),
    spec("amax", lambda x: sl.amax(x), [(3, 4)], lambda x: torch.amax(x), domain=distinct),
    spec("amax_dim", lambda x: x.amax(1), [(3, 4)], domain=distinct),
    spec("amax_dims_keepdim", lambda x: x.amax((0, 2), keepdim=True), [(2, 3, 4)], domain=distinct),
    spec("amin", lambda x: sl.amin(x, -1), [(3, 4)], lambda x: torch.amin(x, -1), domain=distinct),
    spec("max_all", lambda x: x.max(), [(3, 4)], domain=distinct),
    spec("max_dim", lambda x: x.max(1).values, [(3, 4)], domain=distinct),
    spec("max_dim_keepdim", lambda x: x.max(dim=0, keepdim=True)[0], [(3, 4)], domain=distinct),
    spec("max_fn_negative_dim", lambda x: sl.max(x, -1).values, [(2, 3, 4)], lambda x: torch.max(x, -1).values,
         domain=distinct),
    spec("min_all", lambda x: x.min(), [(3, 4)], domain=distinct),
    spec("min_dim", lambda x: x.min(1).values, [(3, 4)], domain=distinct),
    spec("norm", lambda x: x.norm(), [(3, 4)]),
    spec("norm_fn", lambda x: sl.norm(x), [(3, 4)], lambda x: torch.norm(x)),
    spec("norm_p1", lambda x: x.norm(p=1), [(3, 4)], domain=away_from_zero),
    spec("norm_inf", lambda x: x.norm(p=INF), [(3, 4)], domain=distinct),
    spec("norm_p3", lambda x: x.norm(p=3), [(3, 4)], domain=away_from_zero),
    spec("norm_dim", lambda x: x.norm(dim=1), [(3, 4)]),
    spec("norm_p3_dim_keepdim", lambda x: x.norm(p=3, dim=0, keepdim=True), [(3, 4)], domain=away_from_zero),
    spec("norm_inf_dim", lambda x: x.norm(p=INF, dim=-1), [(3, 4)], domain=distinct),
    spec("logsumexp", lambda x: x.logsumexp(1), [(3, 4)]),
    spec("logsumexp_dims_keepdim", lambda x: sl.logsumexp(x, (0, 2), keepdim=True), [(2, 3, 4)],
         lambda x: torch.logsumexp(x, (0, 2), keepdim=True)),
    spec("logsumexp_large", lambda x: (x * 100.0).logsumexp(0), [(3, 4)]),
    # ---- shapes --------------------------------------------------------------------------------------
    spec("reshape", lambda x: x.reshape(4, 3), [(3, 4)]),
    spec("reshape_infer", lambda x: x.reshape(-1, 2), [(2, 3, 4)]),
    spec("reshape_fn", lambda x: sl.reshape(x, (6, 4)), [(2, 3, 4)], lambda x: torch.reshape(x, (6, 4))),
    spec("reshape_0d", lambda x: x.reshape(1, 1), [()]),
    spec("view", lambda x: x.view(2, 6), [(3, 4)]),
    spec("transpose", lambda x: x.transpose(0, 1), [(3, 4)]),
    spec("transpose_negative", lambda x: x.transpose(-1, 0), [(2, 3, 4)]),
    spec("t", lambda x: x.t(), [(3, 4)]),
    spec("permute", lambda x: x.permute(2, 0, 1), [(2, 3, 4)]),
    spec("permute_fn", lambda x: sl.permute(x, (1, -1, 0)), [(2, 3, 4)], lambda x: torch.permute(x, (1, -1, 0))),
    spec("flatten", lambda x: x.flatten(), [(2, 3, 4)]),
    spec("flatten_range", lambda x: x.flatten(1, 2), [(2, 3, 4, 1)]),
    spec("squeeze", lambda x: x.squeeze(), [(1, 3, 1, 4)]),
    spec("squeeze_dim", lambda x: x.squeeze(2), [(1, 3, 1, 4)]),
    spec("squeeze_dims", lambda x: x.squeeze((0, 2)), [(1, 3, 1, 4)]),
    spec("unsqueeze", lambda x: x.unsqueeze(1), [(3, 4)]),
    spec("unsqueeze_negative", lambda x: sl.unsqueeze(x, -1), [(3, 4)], lambda x: torch.unsqueeze(x, -1)),
    spec("expand", lambda x: x.expand(2, 3, 4), [(3, 1)]),
    spec("expand_keep", lambda x: x.expand(-1, 4), [(3, 1)]),
    spec("broadcast_to", lambda x: sl.broadcast_to(x, (2, 3, 4)), [(4,)], lambda x: torch.broadcast_to(x, (2, 3, 4))),
    spec("getitem_int", lambda x: x[1], [(3, 4)]),
    spec("getitem_negative_int", lambda x: x[-1], [(3, 4)]),
    spec("getitem_slice", lambda x: x[1:3], [(4, 3)]),
    spec("getitem_step_slice", lambda x: x[::2], [(5, 3)]),
    spec("getitem_column", lambda x: x[:, 1], [(3, 4)]),
    spec("getitem_int_slice", lambda x: x[0, 1:3], [(3, 4)]),
    spec("getitem_ellipsis", lambda x: x[..., 1], [(2, 3, 4)]),
    spec("getitem_ellipsis_only", lambda x: x[...], [(3, 4)]),
    spec("getitem_none", lambda x: x[None], [(3, 4)]),
    spec("getitem_slice_none", lambda x: x[1:, None], [(3, 4)]),
    spec("getitem_int_array", lambda x: x[[0, 2]], [(3, 4)]),
    spec("getitem_repeated_indices", lambda x: x[[0, 2, 0, 0]], [(3, 4)]),
    spec("getitem_negative_indices", lambda x: x[:, [-1, 1, -1]], [(3, 4)]),
    spec("getitem_bool_mask", lambda x: x[MASK], [(3, 4)], lambda x: x[_t(MASK)]),
    spec("getitem_bool_rows", lambda x: x[np.array([True, False, True])], [(3, 4)],
         lambda x: x[_t(np.array([True, False, True]))]),
    spec("getitem_array_slice_int", lambda x: x[[0, 2], :, 1], [(3, 4, 2)]),
    spec("getitem_arrays_paired", lambda x: x[[0, 2, 1], [1, 1, 3]], [(3, 4)]),
    spec("getitem_int_slice_array", lambda x: x[1, :, [0, 1, 0]], [(2, 3, 2)]),
    spec("getitem_int_array_adjacent", lambda x: x[1, [0, 2]], [(2, 3, 2)]),
    spec("getitem_arrays_around_int", lambda x: x[[0, 1], 0, [1, 2]], [(2, 3, 4)]),
    spec("getitem_arrays_around_ellipsis", lambda x: x[[0, 1], ..., [1, 2]], [(2, 3, 4)]),
    spec("getitem_none_arrays_slice", lambda x: x[None, [0, 1], :, [0, 1]], [(2, 3, 4)]),
    spec("getitem_0d_index", lambda x: x[:, np.array(2)], [(3, 4)], lambda x: x[:, _t(np.array(2))]),
    spec("getitem_full_slices", lambda x: x[:, :], [(3, 4)]),
    spec("cat", lambda a, b, c: sl.cat([a, b, c], dim=1), [(2, 1), (2, 3), (2, 2)],
         lambda a, b, c: torch.cat([a, b, c], dim=1)),
    spec("cat_dim0", lambda a, b: sl.cat([a, b]), [(2, 3), (1, 3)], lambda a, b: torch.cat([a, b])),
    spec("cat_negative_dim", lambda a, b: sl.cat((a, b), -1), [(2, 1, 2), (2, 1, 3)], lambda a, b: torch.cat((a, b), -1)),
    spec("stack", lambda a, b: sl.stack([a, b]), [(2, 3), (2, 3)], lambda a, b: torch.stack([a, b])),
    spec("stack_last", lambda a, b, c: sl.stack([a, b, c], dim=-1), [(2, 3), (2, 3), (2, 3)],
         lambda a, b, c: torch.stack([a, b, c], dim=-1)),
    spec("pad", lambda x: sl.pad(x, (1, 2)), [(2, 3)], lambda x: F.pad(x, (1, 2))),
    spec("pad_2d_value", lambda x: sl.pad(x, (1, 0, 2, 1), value=0.5), [(2, 2, 3)],
         lambda x: F.pad(x, (1, 0, 2, 1), value=0.5)),
    # F.pad's modes: negative sizes crop; reflect/replicate/circular pad the last 1-3 dimensions
    *[spec(f"pad_{mode}_{'_'.join(map(str, p)).replace('-', 'm')}_{len(shape)}d",
           (lambda p, mode: lambda x: sl.nn.functional.pad(x, p, mode=mode))(p, mode), [shape],
           (lambda p, mode: lambda x: F.pad(x, p, mode=mode))(p, mode))
      for mode, p, shape in [
          ("constant", (-1, 2), (2, 5)), ("constant", (1, -2, -1, 0), (1, 2, 4, 5)),
          ("constant", (2, 1, 0, 1, -1, 1), (1, 3, 3, 4)),
          ("reflect", (2, 3), (2, 5)), ("reflect", (1, 2), (1, 2, 4)), ("reflect", (1, 2, 3, 0), (1, 2, 4, 5)),
          ("reflect", (-1, 2, 2, -3), (2, 5, 4)), ("reflect", (1, 1, 2, 1, 1, 2), (1, 2, 3, 4, 3)),
          ("replicate", (3, 1), (2, 4)), ("replicate", (2, 0, 1, 3), (1, 2, 3, 4)),
          ("replicate", (-1, 4, 2, -2), (2, 4, 5)), ("replicate", (1, 2, 0, 1, 2, 1), (2, 3, 3, 2)),
          ("circular", (2, 1), (2, 4)), ("circular", (1, 2, 3, 1), (1, 2, 4, 5)),
          ("circular", (-1, 2, 1, 0), (2, 4, 5)), ("circular", (1, 0, 1, 1, 1, 2), (1, 2, 3, 3, 4)),
      ]],
    spec("roll_dims", lambda x: x.roll((1, -2), (1, -1)), [(2, 3, 4)]),
    spec("roll_flattened", lambda x: x.roll(5), [(3, 4)]),
    spec("roll_fn_past_the_size", lambda x: sl.roll(x, 7, 1), [(2, 3)], lambda x: torch.roll(x, 7, 1)),
    spec("roll_a_dimension_twice", lambda x: x.roll((1, 2), (0, 0)), [(4, 3)]),
    spec("roll_channels_last_map", lambda x: x.roll((-1, -1), (1, 2)), [(1, 4, 5, 3)]),
    # ---- matrix products -------------------------------------------------------------------------------
    spec("matmul", lambda a, b: a @ b, [(3, 4), (4, 2)]),
    spec("matmul_vector_matrix", lambda a, b: a @ b, [(4,), (4, 2)]),
    spec("matmul_matrix_vector", lambda a, b: a @ b, [(3, 4), (4,)]),
    spec("matmul_dot", lambda a, b: a @ b, [(4,), (4,)]),
    spec("matmul_batched", lambda a, b: a @ b, [(2, 3, 4), (2, 4, 2)]),
    spec("matmul_batched_broadcast", lambda a, b: a @ b, [(2, 1, 3, 4), (5, 4, 2)]),
    spec("matmul_batched_matrix", lambda a, b: sl.matmul(a, b), [(2, 3, 4), (4, 2)], lambda a, b: torch.matmul(a, b)),
    spec("matmul_batched_vector", lambda a, b: a @ b, [(2, 3, 4), (4,)]),
    spec("matmul_vector_batched", lambda a, b: a @ b, [(4,), (2, 4, 3)]),
    spec("mm", lambda a, b: sl.mm(a, b), [(3, 4), (4, 2)], lambda a, b: torch.mm(a, b)),
    spec("mm_method", lambda a, b: a.mm(b), [(2, 3), (3, 3)]),
    # ---- attention: one op (ops/attention.py); its softmax needs no domain --------------------------------
    spec("sdpa", lambda q, k, v: sl.nn.functional.scaled_dot_product_attention(q, k, v), [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
    spec("sdpa_3d_value_width", lambda q, k, v: sl.nn.functional.scaled_dot_product_attention(q, k, v), [(2, 3, 4), (2, 5, 4), (2, 5, 6)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
    spec("sdpa_causal_scale", lambda q, k, v: sl.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
         [(1, 2, 4, 3), (1, 2, 6, 3), (1, 2, 6, 3)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)),
    spec("sdpa_float_mask_grad", lambda q, k, v, m: sl.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m),
         [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 2), (3, 5)],
         lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    spec("sdpa_bool_mask_a_row_left_out", lambda q, k, v: sl.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=ATTEND),
         [(2, 3, 4), (2, 4, 4), (2, 4, 4)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=_t(ATTEND))),
    spec("sdpa_broadcast_batch", lambda q, k, v: sl.nn.functional.scaled_dot_product_attention(q, k, v), [(2, 1, 3, 4), (3, 5, 4), (1, 3, 5, 4)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
    spec("sdpa_gqa", lambda q, k, v: sl.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True), [(1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
    spec("normalize", lambda x: sl.nn.functional.normalize(x), [(2, 3, 4)], lambda x: F.normalize(x)),
    spec("normalize_p1_last", lambda x: sl.nn.functional.normalize(x, p=1, dim=-1), [(3, 4)],
         lambda x: F.normalize(x, p=1, dim=-1), domain=away_from_zero),
    # ---- softmax heads and losses ------------------------------------------------------------------------
    spec("softmax", lambda x: sl.softmax(x, 1), [(3, 4)], lambda x: torch.softmax(x, 1)),
    spec("softmax_dim0", lambda x: x.softmax(0), [(3, 4)]),
    spec("softmax_large", lambda x: (x * 50.0).softmax(-1), [(2, 3, 4)]),
    spec("log_softmax", lambda x: sl.log_softmax(x, 1), [(3, 4)], lambda x: torch.log_softmax(x, 1)),
    spec("log_softmax_negative_dim", lambda x: x.log_softmax(-1), [(2, 3, 4)]),
    spec("cross_entropy", lambda x: sl.cross_entropy(x, TARGET), [(3, 4)], lambda x: F.cross_entropy(x, _t(TARGET))),
    spec("cross_entropy_sum", lambda x: sl.cross_entropy(x, TARGET, reduction="sum"), [(3, 4)],
         lambda x: F.cross_entropy(x, _t(TARGET), reduction="sum")),
    spec("cross_entropy_none", lambda x: sl.cross_entropy(x, TARGET, reduction="none"), [(3, 4)],
         lambda x: F.cross_entropy(x, _t(TARGET), reduction="none")),
    spec("cross_entropy_4d", lambda x: sl.cross_entropy(x, TARGET_4D), [(2, 3, 2, 2)],
         lambda x: F.cross_entropy(x, _t(TARGET_4D))),
    spec("cross_entropy_4d_none", lambda x: sl.cross_entropy(x, TARGET_4D, reduction="none"), [(2, 3, 2, 2)],
         lambda x: F.cross_entropy(x, _t(TARGET_4D), reduction="none")),
    spec("cross_entropy_1d", lambda x: sl.cross_entropy(x, 2), [(4,)], lambda x: F.cross_entropy(x, _t(2))),
    spec("cross_entropy_3d", lambda x: sl.cross_entropy(x, TARGET_4D[:, 0]), [(2, 3, 2)],
         lambda x: F.cross_entropy(x, _t(TARGET_4D[:, 0]))),
    spec("nll_loss", lambda x: sl.nll_loss(x, TARGET), [(3, 4)], lambda x: F.nll_loss(x, _t(TARGET))),
    spec("nll_loss_none", lambda x: sl.nll_loss(x, TARGET, reduction="none"), [(3, 4)],
         lambda x: F.nll_loss(x, _t(TARGET), reduction="none")),
    spec("nll_loss_3d", lambda x: sl.nll_loss(x, TARGET_4D[:, 0]), [(2, 3, 2)],
         lambda x: F.nll_loss(x, _t(TARGET_4D[:, 0]))),
    spec("nll_loss_sum", lambda x: sl.nll_loss(x, TARGET, reduction="sum"), [(3, 4)],
         lambda x: F.nll_loss(x, _t(TARGET), reduction="sum")),
    spec("nll_loss_4d", lambda x: sl.nll_loss(x, TARGET_4D), [(2, 3, 2, 2)], lambda x: F.nll_loss(x, _t(TARGET_4D))),
    spec("mse_loss", lambda x, y: sl.mse_loss(x, y), [(3, 4), (3, 4)], lambda x, y: F.mse_loss(x, y)),
    spec("mse_loss_sum", lambda x, y: sl.mse_loss(x, y, reduction="sum"), [(3, 4), (3, 4)],
         lambda x, y: F.mse_loss(x, y, reduction="sum")),
    spec("mse_loss_none", lambda x, y: sl.mse_loss(x, y, reduction="none"), [(3, 4), (3, 4)],
         lambda x, y: F.mse_loss(x, y, reduction="none")),
    spec("mse_loss_constant_target", lambda x: sl.mse_loss(x, np.ones((2, 3), dtype=x.dtype)), [(2, 3)],
         lambda x: F.mse_loss(x, torch.ones((2, 3), dtype=x.dtype))),
    # ---- convolution, pooling, resizing, batch norm (NCHW) -------------------------------------------------
    spec("conv2d", lambda x, w, b: sl.conv2d(x, w, b, padding=1), [(2, 3, 7, 6), (4, 3, 3, 3), (4,)],
         lambda x, w, b: F.conv2d(x, w, b, padding=1)),
    spec("conv2d_stride2_nobias", lambda x, w: sl.conv2d(x, w, stride=2, padding=1), [(1, 2, 7, 7), (3, 2, 3, 3)],
         lambda x, w: F.conv2d(x, w, stride=2, padding=1)),
    spec("conv2d_dilation_rect", lambda x, w: sl.conv2d(x, w, padding=(2, 1), dilation=(2, 1)),
         [(1, 2, 6, 5), (3, 2, 3, 2)], lambda x, w: F.conv2d(x, w, padding=(2, 1), dilation=(2, 1))),
    spec("conv2d_groups", lambda x, w, b: sl.conv2d(x, w, b, groups=2), [(2, 4, 5, 5), (6, 2, 3, 3), (6,)],
         lambda x, w, b: F.conv2d(x, w, b, groups=2)),
    spec("conv2d_depthwise", lambda x, w: sl.conv2d(x, w, padding=1, groups=3), [(1, 3, 5, 4), (3, 1, 3, 3)],
         lambda x, w: F.conv2d(x, w, padding=1, groups=3)),
    spec("conv2d_1x1", lambda x, w: sl.conv2d(x, w), [(2, 5, 3, 3), (4, 5, 1, 1)], lambda x, w: F.conv2d(x, w)),
    spec("upsample_conv2d", lambda x, w, b: sl.nn.functional.upsample_conv2d(x, w, b, 2), [(2, 3, 4, 3), (4, 3, 3, 3), (4,)],
         lambda x, w, b: F.conv2d(F.interpolate(x, scale_factor=2, mode="nearest"), w, b, padding=1)),
    spec("upsample_conv2d_x3", lambda x, w: sl.nn.functional.upsample_conv2d(x, w, None, 3), [(1, 2, 3, 3), (3, 2, 3, 3)],
         lambda x, w: F.conv2d(F.interpolate(x, scale_factor=3, mode="nearest"), w, padding=1)),
    spec("conv_transpose2d", lambda x, w, b: sl.conv_transpose2d(x, w, b), [(2, 3, 4, 5), (3, 2, 3, 3), (2,)],
         lambda x, w, b: F.conv_transpose2d(x, w, b)),
    spec("conv_transpose2d_s2_op1", lambda x, w, b: sl.conv_transpose2d(x, w, b, stride=2, output_padding=1),
         [(1, 2, 3, 4), (2, 3, 3, 3), (3,)], lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, output_padding=1)),
    spec("conv_transpose2d_padding_nobias", lambda x, w: sl.conv_transpose2d(x, w, padding=(1, 2)),
         [(2, 2, 4, 5), (2, 3, 3, 3)], lambda x, w: F.conv_transpose2d(x, w, padding=(1, 2))),
    spec("conv_transpose2d_dilation2", lambda x, w, b: sl.conv_transpose2d(x, w, b, padding=1, dilation=2),
         [(1, 2, 4, 3), (2, 2, 3, 3), (2,)], lambda x, w, b: F.conv_transpose2d(x, w, b, padding=1, dilation=2)),
    spec("conv_transpose2d_groups2", lambda x, w, b: sl.conv_transpose2d(x, w, b, stride=(1, 2), groups=2),
         [(2, 4, 3, 3), (4, 3, 2, 3), (6,)], lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(1, 2), groups=2)),
    spec("conv_transpose2d_k4_s2_p1", lambda x, w, b: sl.conv_transpose2d(x, w, b, stride=2, padding=1),
         [(1, 3, 3, 4), (3, 2, 4, 4), (2,)], lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1)),
    spec("conv_transpose2d_op_below_dilation",  # output_padding 2 >= stride 1, < dilation 3
         lambda x, w: sl.conv_transpose2d(x, w, output_padding=2, dilation=3), [(1, 2, 3, 3), (2, 2, 2, 2)],
         lambda x, w: F.conv_transpose2d(x, w, output_padding=2, dilation=3)),
    spec("max_pool2d", lambda x: sl.max_pool2d(x, 2), [(2, 3, 6, 5)], lambda x: F.max_pool2d(x, 2), domain=distinct),
    spec("max_pool2d_stride_pad", lambda x: sl.max_pool2d(x, 3, stride=2, padding=1), [(1, 2, 7, 6)],
         lambda x: F.max_pool2d(x, 3, stride=2, padding=1), domain=distinct),
    spec("avg_pool2d", lambda x: sl.nn.functional.avg_pool2d(x, 2), [(2, 3, 6, 5)], lambda x: F.avg_pool2d(x, 2)),
    spec("avg_pool2d_stride_pad", lambda x: sl.nn.functional.avg_pool2d(x, 3, stride=2, padding=1), [(1, 2, 7, 6)],
         lambda x: F.avg_pool2d(x, 3, stride=2, padding=1)),
    spec("adaptive_avg_pool2d_1", lambda x: sl.nn.functional.adaptive_avg_pool2d(x, 1), [(2, 3, 5, 4)],
         lambda x: F.adaptive_avg_pool2d(x, 1)),
    spec("adaptive_avg_pool2d_3x2", lambda x: sl.nn.functional.adaptive_avg_pool2d(x, (3, 2)), [(1, 2, 7, 5)],
         lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
    # pooling with every argument PyTorch has (ceil_mode, dilation, count_include_pad, divisor_override)
    spec("max_pool2d_ceil_pad", lambda x: sl.max_pool2d(x, 3, 2, 1, ceil_mode=True), [(1, 2, 8, 7)],
         lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), domain=distinct),
    spec("max_pool2d_dilation", lambda x: sl.max_pool2d(x, (3, 2), (2, 1), 1, dilation=(2, 3)), [(2, 2, 9, 8)],
         lambda x: F.max_pool2d(x, (3, 2), (2, 1), 1, dilation=(2, 3)), domain=distinct),
    spec("max_pool2d_dilation_ceil", lambda x: sl.max_pool2d(x, 2, 2, 1, dilation=2, ceil_mode=True), [(1, 2, 8, 6)],
         lambda x: F.max_pool2d(x, 2, 2, 1, dilation=2, ceil_mode=True), domain=distinct),
    spec("avg_pool2d_ceil_include_pad", lambda x: sl.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
         [(1, 2, 8, 7)], lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)),
    spec("avg_pool2d_exclude_pad", lambda x: sl.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
         [(2, 2, 7, 6)], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    spec("avg_pool2d_ceil_exclude_pad", lambda x: sl.nn.functional.avg_pool2d(x, (2, 3), 2, (1, 0), True, False),
         [(1, 2, 6, 8)], lambda x: F.avg_pool2d(x, (2, 3), 2, (1, 0), True, False)),
    spec("avg_pool2d_divisor_override", lambda x: sl.nn.functional.avg_pool2d(x, 3, 2, 1, True, divisor_override=5),
         [(1, 2, 7, 7)], lambda x: F.avg_pool2d(x, 3, 2, 1, True, divisor_override=5)),
    spec("adaptive_avg_pool2d_none", lambda x: sl.nn.functional.adaptive_avg_pool2d(x, (None, 3)), [(1, 2, 5, 7)],
         lambda x: F.adaptive_avg_pool2d(x, (None, 3))),
    spec("adaptive_avg_pool2d_upscale", lambda x: sl.nn.functional.adaptive_avg_pool2d(x, (5, 4)), [(1, 2, 3, 3)],
         lambda x: F.adaptive_avg_pool2d(x, (5, 4))),
    spec("adaptive_max_pool2d_3x2", lambda x: sl.nn.functional.adaptive_max_pool2d(x, (3, 2)), [(2, 2, 7, 5)],
         lambda x: F.adaptive_max_pool2d(x, (3, 2)), domain=distinct),
    spec("adaptive_max_pool2d_1", lambda x: sl.nn.functional.adaptive_max_pool2d(x, 1), [(2, 3, 4, 5)],
         lambda x: F.adaptive_max_pool2d(x, 1), domain=distinct),
    spec("adaptive_max_pool2d_none", lambda x: sl.nn.functional.adaptive_max_pool2d(x, (4, None)), [(1, 2, 9, 3)],
         lambda x: F.adaptive_max_pool2d(x, (4, None)), domain=distinct),
    spec("upsample_nearest", lambda x: sl.nn.functional.interpolate(x, scale_factor=2), [(1, 2, 3, 4)],
         lambda x: F.interpolate(x, scale_factor=2, mode="nearest")),
    spec("upsample_bilinear", lambda x: sl.nn.functional.interpolate(x, scale_factor=3, mode="bilinear"),
         [(2, 2, 3, 4)], lambda x: F.interpolate(x, scale_factor=3, mode="bilinear", align_corners=False)),
    # interpolate to any size (PyTorch's index conventions), up and down, non-square, both align_corners
    *[spec(f"interpolate_{mode}{'' if ac is None else '_ac' if ac else '_noac'}_{tag}",
           (lambda kw, mode, ac: lambda x: sl.nn.functional.interpolate(x, mode=mode, align_corners=ac, **kw))(kw, mode, ac),
           [shape], (lambda kw, mode, ac: lambda x: F.interpolate(x, mode=mode, align_corners=ac, **kw))(kw, mode, ac))
      for mode, ac in [("nearest", None), ("bilinear", False), ("bilinear", True)]
      for tag, shape, kw in [
          ("x1.5", (1, 2, 4, 5), dict(scale_factor=1.5)),
          ("x2.5_x0.5", (1, 2, 3, 6), dict(scale_factor=(2.5, 0.5))),
          ("x0.6", (2, 1, 7, 5), dict(scale_factor=0.6)),
          ("x1.5_recompute", (1, 2, 5, 3), dict(scale_factor=1.5, recompute_scale_factor=True)),
          ("x2", (1, 2, 3, 4), dict(scale_factor=2)),
          ("size_up", (1, 2, 3, 4), dict(size=(7, 5))),
          ("size_down", (1, 2, 8, 7), dict(size=(3, 4))),
          ("size_int", (2, 1, 5, 3), dict(size=4)),
          ("size_1", (1, 2, 4, 3), dict(size=(1, 2))),
          ("size_same", (1, 1, 3, 4), dict(size=(3, 4))),
      ]],
    spec("pixel_shuffle", lambda x: sl.nn.functional.pixel_shuffle(x, 2), [(2, 8, 3, 2)],
         lambda x: F.pixel_shuffle(x, 2)),
    spec("pixel_shuffle_3d_x3", lambda x: sl.pixel_shuffle(x, 3), [(9, 2, 3)], lambda x: torch.pixel_shuffle(x, 3)),
    spec("pixel_unshuffle", lambda x: sl.nn.functional.pixel_unshuffle(x, 2), [(1, 2, 4, 6)],
         lambda x: F.pixel_unshuffle(x, 2)),
    spec("pixel_unshuffle_5d", lambda x: sl.pixel_unshuffle(x, 3), [(2, 1, 1, 3, 6)],
         lambda x: torch.pixel_unshuffle(x, 3)),
    spec("batch_norm_train", lambda x, w, b: sl.batch_norm(x, None, None, w, b, training=True),
         [(3, 2, 3, 3), (2,), (2,)], lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
    spec("batch_norm_eval", lambda x, w, b: sl.batch_norm(x, RUNNING_MEAN, RUNNING_VAR, w, b),
         [(2, 2, 3, 3), (2,), (2,)],
         lambda x, w, b: F.batch_norm(x, _t(RUNNING_MEAN).to(x.dtype), _t(RUNNING_VAR).to(x.dtype), w, b)),
    # normalisation with per-sample statistics; batch norm on (N, C) and (N, C, L)
    spec("group_norm", lambda x, w, b: sl.group_norm(x, 2, w, b), [(2, 4, 3, 3), (4,), (4,)],
         lambda x, w, b: F.group_norm(x, 2, w, b)),
    spec("group_norm_no_affine_3d", lambda x: sl.nn.functional.group_norm(x, 3), [(2, 6, 5)],
         lambda x: F.group_norm(x, 3)),
    spec("group_norm_one_group", lambda x, w: sl.group_norm(x, 1, w), [(3, 2, 2, 3), (2,)],
         lambda x, w: F.group_norm(x, 1, w)),
    spec("layer_norm_last", lambda x, w, b: sl.layer_norm(x, 4, w, b), [(2, 3, 4), (4,), (4,)],
         lambda x, w, b: F.layer_norm(x, (4,), w, b)),
    spec("layer_norm_map", lambda x, w, b: sl.nn.functional.layer_norm(x, (3, 2, 2), w, b),
         [(2, 3, 2, 2), (3, 2, 2), (3, 2, 2)], lambda x, w, b: F.layer_norm(x, (3, 2, 2), w, b)),
    spec("layer_norm_no_affine", lambda x: sl.layer_norm(x, [3, 4], eps=1e-3), [(2, 3, 4)],
         lambda x: F.layer_norm(x, [3, 4], eps=1e-3)),
    spec("instance_norm", lambda x, w, b: sl.instance_norm(x, weight=w, bias=b), [(2, 3, 3, 4), (3,), (3,)],
         lambda x, w, b: F.instance_norm(x, weight=w, bias=b)),
    spec("instance_norm_running", lambda x: sl.instance_norm(x, RUNNING_MEAN, RUNNING_VAR, use_input_stats=False),
         [(2, 2, 3, 3)], lambda x: F.instance_norm(x, _t(RUNNING_MEAN).to(x.dtype), _t(RUNNING_VAR).to(x.dtype),
                                                   use_input_stats=False)),
    spec("batch_norm_2d_train", lambda x, w, b: sl.batch_norm(x, None, None, w, b, training=True),
         [(4, 2), (2,), (2,)], lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
    spec("batch_norm_3d_train", lambda x, w, b: sl.batch_norm(x, None, None, w, b, training=True),
         [(3, 2, 4), (2,), (2,)], lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
    spec("batch_norm_3d_eval", lambda x, w, b: sl.batch_norm(x, RUNNING_MEAN, RUNNING_VAR, w, b),
         [(3, 2, 4), (2,), (2,)],
         lambda x, w, b: F.batch_norm(x, _t(RUNNING_MEAN).to(x.dtype), _t(RUNNING_VAR).to(x.dtype), w, b)),
    spec("batch_norm_2d_eval_frozen", lambda x: sl.batch_norm(x, RUNNING_MEAN, RUNNING_VAR), [(3, 2)],
         lambda x: F.batch_norm(x, _t(RUNNING_MEAN).to(x.dtype), _t(RUNNING_VAR).to(x.dtype))),
    # ---- casts and copies ----------------------------------------------------------------------------------
    # float32 rounds away ~1e-8 of the input, so its finite differences need a larger step
    spec("float", lambda x: x.float(), [(2, 3)], fd_eps=1e-3),
    spec("double", lambda x: x.double(), [(2, 3)]),
    spec("float_double_round_trip", lambda x: x.float().double() * 2.0, [(2, 3)], fd_eps=1e-3),
    spec("clone", lambda x: sl.clone(x), [(2, 3)], lambda x: torch.clone(x)),
    spec("clone_method", lambda x: x.clone(), [()]),
    # new_* make constants of x's dtype (no gradient flows into them)
    spec("new_tensors_as_constants", lambda x: x * x.new_full((2, 3), 2.0) + x.new_ones(2, 3) - x.new_zeros((1, 3))
         + x.new_tensor([1, 2, 3]), [(2, 3)]),
]

assert len({s.id for s in SPECS}) == len(SPECS), "spec ids must be unique"
SPEC_IDS = [s.id for s in SPECS]
