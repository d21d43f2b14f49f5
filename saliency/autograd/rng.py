"""The generator that random tensors, in-place random fills (`normal_`, `uniform_`), weight
initialisation and dropout draw from when they are given none; `manual_seed` resets it."""
from __future__ import annotations

import numpy as np

_default = np.random.default_rng()


def manual_seed(seed: int | None) -> None:
    """Reset the generator that random tensors draw from when no generator is passed."""
    global _default
    _default = np.random.default_rng(seed)


def generator(given: np.random.Generator | None = None) -> np.random.Generator:
    """`given` if it is a generator, else the default one."""
    return given if given is not None else _default
