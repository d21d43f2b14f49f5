"""The two errors saliency.viz raises for anything a caller can trigger."""


class VizError(ValueError):
    """A map, image, option or output path that saliency.viz cannot use."""


class ImageError(VizError):
    """An image file that is missing or cannot be decoded."""
