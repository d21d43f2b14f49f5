"""Batch normalisation over NCHW: batch statistics in training, running statistics in eval."""
import numpy as np

from ... import kernels
from ..node import Function
from ..geometry import first_input, whole_window


class BatchNorm(Function):
    """z = weight * (x - mean) / sqrt(var + eps) + bias per channel; the node is NativeBatchNormBackward0.

    In training the batch's statistics are used (and depend on x), and the running statistics,
    if given, are updated in place as PyTorch does (the variance unbiased); in eval the running
    statistics are constants.
    """

    __slots__ = ("training", "eps")

    def forward(self, x, weight=None, bias=None, *, running_mean=None, running_var=None, training=False,
                momentum=0.1, eps=1e-5):
        if x.ndim != 4:
            raise ValueError(f"batch_norm expects input of shape (N, C, H, W), got {x.shape}")
        if training:
            mean, var = kernels.batch_norm_stats(x)
            count = x.size // x.shape[1]
            if count < 2:
                raise ValueError(f"batch_norm in training needs more than one value per channel, got input of "
                                 f"shape {x.shape}; call .eval() on the model to use the running statistics")
            if running_mean is not None:
                running_mean *= 1 - momentum
                running_mean += momentum * mean
            if running_var is not None:
                running_var *= 1 - momentum
                running_var += momentum * var * count / (count - 1)
        else:
            if running_mean is None or running_var is None:
                raise ValueError("batch_norm in eval mode needs running_mean and running_var")
            mean, var = np.asarray(running_mean, np.float64), np.asarray(running_var, np.float64)
        self.training, self.eps = training, eps
        self.save_for_backward(x, mean, var, weight)
        return kernels.batch_norm_forward(x, mean, var, weight, bias, eps)

    def backward(self, g):
        x, mean, var, weight = self.saved
        needs = self.needs_input_grad
        if not self.training and not any(needs[1:]):  # frozen eval mode: a per-channel scale, one pass
            return (g * self._scale(g.dtype)[:, None, None],) + (None,) * (len(needs) - 1)
        grad = kernels.batch_norm_grad_train if self.training else kernels.batch_norm_grad_eval
        dx, dw, db = grad(g, x, mean, var, weight, self.eps)
        needs = self.needs_input_grad
        return (dx if needs[0] else None, dw if needs[1] else None, db if needs[2] else None)

    def backward_window(self, p):
        """Eval mode with frozen weight and bias: a per-channel scale, cell by cell."""
        needs = self.needs_input_grad
        if self.training or any(needs[1:]):
            return None
        return (p.like(p.data * self._scale(p.dtype)[:, None, None]),) + (None,) * (len(needs) - 1)

    def window_rule(self, box, shapes):
        """Eval mode: cell by cell for x (weight and bias: whole); training: batch statistics mix all cells."""
        return whole_window(self, box, shapes) if self.training else first_input(box.clip, shapes)

    def _scale(self, dtype):
        """weight / sqrt(running_var + eps) per channel: eval mode's dx / dy."""
        _, _, var, weight = self.saved
        gamma = np.ones(len(var)) if weight is None else np.asarray(weight, np.float64)
        return (gamma / np.sqrt(var + self.eps)).astype(dtype)

    def name(self):
        return "NativeBatchNormBackward0"
