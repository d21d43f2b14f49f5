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


def fusable(upsample, conv):
    """Whether Upsample(nearest, integer scale) followed by `conv` can run as one sub-pixel
    convolution: a plain 3x3 Conv2d (stride 1, padding 1, no dilation or groups) and no hooks
    on either module (a hook must see the module's own input and output)."""
    from .conv import Conv2d

    return (type(upsample) is Upsample and type(conv) is Conv2d and upsample.mode == "nearest"
            and int(upsample.scale_factor) == upsample.scale_factor and upsample.scale_factor >= 2
            and conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (1, 1)
            and conv.dilation == (1, 1) and conv.groups == 1
            and not upsample._has_hooks() and not conv._has_hooks())
