"""The two errors saliency.viz raises for anything a caller can trigger."""


class VizError(ValueError):
    """A map, image, option or output path that saliency.viz cannot use."""


class ImageError(VizError):
    """An image that cannot be read: a path that names no regular file (nothing, a folder, a FIFO, a
    device, a symbolic link loop), a format load_image does not read (EPS, PDF, ...), or a file that
    cannot be decoded (damaged, rows too long for Pillow, too large for the memory)."""
