"""The heatmap PNGs of a batch run: each map's file name, and the picture written there."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .._write import atomic_path

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence


def output_names(files: Iterable[str | os.PathLike[str]], method: str,
                 count: Optional[int] = None) -> dict[Path, Any]:
    """{file: PNG name} (or {file: [K names]} for K seeds): STEM_METHOD.png, or STEM.EXT_METHOD.png
    for files whose stems are shared (x.png and x.jpg), STEM_METHOD_k.png for seed k. No two images
    write the same name, even on a file system that ignores case: a name still taken (x.png beside
    x.jpg and x.png.png) gets _2, _3, ... before _METHOD."""
    stems = Counter(Path(p).stem.lower() for p in files)
    names: dict[Path, Any] = {}  # a name, or K names
    used: set[str] = set()
    for given in files:
        p = Path(given)
        base = p.stem if stems[p.stem.lower()] == 1 else p.name
        name, k = f"{base}_{method}.png", 1
        while name.lower() in used:
            k += 1
            name = f"{base}_{k}_{method}.png"
        used.add(name.lower())
        names[p] = name if count is None else [name[:-4] + f"_{i}.png" for i in range(count)]
    return names


def write_pngs(folder: str | os.PathLike[str], names: Sequence[str | Sequence[str]], x: np.ndarray, maps: np.ndarray,
               errors: list[str], style: Any) -> None:
    """Heatmap PNGs of one batch into `folder` (one per map; none for a failed image), coloured as
    `viz.heatmap` in `style` (a `viz.Style`; over the image with style.overlay). A PNG that cannot
    be written is that image's error (its map is kept); the others go on."""
    from PIL import Image

    from .. import viz

    for i, name in enumerate(names):
        if errors[i]:
            continue
        per_seed = [maps[i]] if isinstance(name, str) else list(maps[i])
        for target, m in zip([name] if isinstance(name, str) else name, per_seed):
            reduce = "sum" if style.reduce == "rgb" and m.shape[0] != 3 else style.reduce
            look = {"sign": style.sign, "reduce": reduce, "clip_percentile": style.clip_percentile, "cmap": style.cmap}
            rgb = viz.overlay(x[i], m, alpha=style.alpha, **look) if style.overlay else viz.heatmap(m, **look)
            if rgb.ndim == 4:  # reduce="rgb": the three channels' pictures side by side
                rgb = np.concatenate(list(rgb), axis=1)
            try:
                with atomic_path(Path(folder) / target) as part:
                    Image.fromarray(rgb).save(part, format="PNG", compress_level=1)
            except OSError as exc:
                errors[i] = f"cannot write {Path(folder) / target}: {exc.strerror or exc}"
