"""The README's list of what a ported PyTorch file can use is the package's actual surface.

To update the list after adding a layer, function or method: python tests/test_readme_surface.py
"""
import inspect
import pathlib
import re
import sys

import saliency as sl
import saliency.nn as nn
import saliency.nn.functional as F

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- supported:[^\n]*-->\n)(.*?)(\n<!-- /supported -->)", re.S)


def surface_lines():
    layers = sorted((n for n in nn.__all__ if inspect.isclass(getattr(nn, n))
                     and issubclass(getattr(nn, n), nn.Module) and n != "Module"), key=str.lower)
    functions = sorted((n for n in F.__all__ if not n.startswith("_")), key=str.lower)
    methods = sorted((n for n in dir(sl.Tensor) if not n.startswith("_") and n != "cuda"), key=str.lower)
    return ["* Layers (`nn.`): " + ", ".join(f"`{n}`" for n in layers) + ".",
            "* Functions (`F.`): " + ", ".join(f"`{n}`" for n in functions) + ".",
            "* Tensor methods and attributes (besides the operators): " + ", ".join(f"`{n}`" for n in methods) + "."]


def test_the_readme_lists_exactly_the_supported_surface():
    found = BLOCK.search(README.read_text(encoding="utf-8"))
    assert found, "README.md has no <!-- supported --> block"
    assert found.group(2).splitlines() == surface_lines(), \
        "README.md's supported list is out of date: run python tests/test_readme_surface.py"


def test_every_listed_name_exists():
    found = BLOCK.search(README.read_text(encoding="utf-8")).group(2)
    for line, owner in zip(found.splitlines(), (nn, F, sl.Tensor)):
        for name in re.findall(r"`([A-Za-z_0-9]+)`", line.split(":", 1)[1]):
            assert hasattr(owner, name), f"README lists {name}, which {owner.__name__} does not have"


if __name__ == "__main__":
    text = README.read_text(encoding="utf-8")
    README.write_text(BLOCK.sub(lambda m: m.group(1) + "\n".join(surface_lines()) + m.group(3), text),
                      encoding="utf-8")
    sys.exit(0)
