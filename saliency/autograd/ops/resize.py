"""Upsampling NCHW images by an integer factor: nearest, and bilinear with align_corners=False."""
from ... import kernels
from ..node import Function
from ..geometry import upsample_window

_MODES = {
    "nearest": (kernels.upsample_nearest2d_forward, kernels.upsample_nearest2d_grad_input, "UpsampleNearest2D"),
    "bilinear": (kernels.upsample_bilinear2d_forward, kernels.upsample_bilinear2d_grad_input, "UpsampleBilinear2D"),
}


class Upsample(Function):
    """z = x upsampled by `scale_factor` ('nearest' or 'bilinear', PyTorch's align_corners=False)."""

    __slots__ = ("x_shape", "scale", "mode")

    def forward(self, x, *, scale_factor, mode="nearest"):
        if mode not in _MODES:
            raise ValueError(f"upsampling mode must be one of {', '.join(_MODES)}, got {mode!r}")
        if x.ndim != 4:
            raise ValueError(f"upsample expects input of shape (N, C, H, W), got {x.shape}")
        self.x_shape, self.scale, self.mode = x.shape, scale_factor, mode
        return _MODES[mode][0](x, scale_factor)

    def backward(self, g):
        return (_MODES[self.mode][1](g, self.x_shape, self.scale),)

    def backward_window(self, p):
        """Each output window reads the input rows and columns its interpolation taps; the adjoint
        sends each cell back to them with the forward's weights."""
        _, _, H, W = self.x_shape
        if self.mode == "nearest":
            dx, origins = kernels.window.nearest_grad(p.data, p.origins, self.scale)
            return (p.like(dx, origins, (H, W)),)
        rows = kernels.resample_table(H, self.scale, self.mode, p.dtype)
        cols = kernels.resample_table(W, self.scale, self.mode, p.dtype)
        dx, origins = kernels.window.resample_grad(p.data, p.origins, p.map_size, rows, cols)
        return (p.like(dx, origins, (H, W)),)

    def window_rule(self, box, shapes):
        return (upsample_window(box, shapes[0], self.scale, self.mode),)

    def name(self):
        return _MODES[self.mode][2] + "Backward0"
