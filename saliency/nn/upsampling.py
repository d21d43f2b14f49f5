"""`Upsample`: enlarge (N, C, H, W) images by an integer factor, nearest or bilinear (align_corners=False)."""
from . import functional as F
from .module import Module


class Upsample(Module):
    """Upsample by `scale_factor` with mode 'nearest' or 'bilinear' (PyTorch's align_corners=False)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        super().__init__()
        if size is not None:
            raise ValueError("Upsample(size=...) is not supported; give an integer scale_factor")
        if scale_factor is None:
            raise ValueError("Upsample needs a scale_factor")
        if align_corners:
            raise ValueError("align_corners=True is not supported; the convention is align_corners=False")
        self.scale_factor, self.mode = scale_factor, mode

    def forward(self, input):
        return F.interpolate(input, scale_factor=self.scale_factor, mode=self.mode)

    def extra_repr(self):
        return f"scale_factor={self.scale_factor!r}, mode={self.mode!r}"
