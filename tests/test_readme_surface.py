"""The documentation's lists of what a ported PyTorch file can use and of the ONNX operators read
(docs/your-network.md), and of the metrics of `saliency evaluate` (docs/datasets.md), are the
package's actual surface.

To update the lists after adding a layer, function, method, ONNX converter or metric:
python tests/test_readme_surface.py
"""
import inspect
import pathlib
import re
import sys

import saliency as sl
import saliency.nn as nn
import saliency.nn.functional as F

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
NETWORK_PAGE = DOCS / "your-network.md"      # the supported surface and the ONNX operators
DATASETS_PAGE = DOCS / "datasets.md"         # the metrics
BLOCK = re.compile(r"(<!-- supported:[^\n]*-->\n)(.*?)(\n<!-- /supported -->)", re.S)
ONNX_BLOCK = re.compile(r"(<!-- onnx-operators:[^\n]*-->\n)(.*?)(<!-- /onnx-operators -->)", re.S)
METRICS_BLOCK = re.compile(r"(<!-- metrics:[^\n]*-->\n)(.*?)(<!-- /metrics -->)", re.S)


def surface_lines():
    layers = sorted((n for n in nn.__all__ if inspect.isclass(getattr(nn, n))
                     and issubclass(getattr(nn, n), nn.Module) and n != "Module"), key=str.lower)
    functions = sorted((n for n in F.__all__ if not n.startswith("_")), key=str.lower)
    methods = sorted((n for n in dir(sl.Tensor) if not n.startswith("_") and n != "cuda"), key=str.lower)
    return ["* Layers (`nn.`): " + ", ".join(f"`{n}`" for n in layers) + ".",
            "* Functions (`F.`): " + ", ".join(f"`{n}`" for n in functions) + ".",
            "* Tensor methods and attributes (besides the operators): " + ", ".join(f"`{n}`" for n in methods) + "."]


def onnx_lines():
    from saliency.nn.onnx import operators

    return [", ".join(f"`{op}` {'/'.join(map(str, versions))}" for op, versions in operators().items()) + "."]


def metric_lines():
    """Each metric of `saliency evaluate --metrics`: its name, options with their defaults, and its two lines."""
    from saliency.attribution.metrics import METRICS

    lines = []
    for name, m in METRICS.items():
        options = ", ".join(f"{k}={m.options_text(k, v)}" for k, v in m.defaults().items())
        head = f"* `{name}`" + (f" ({options})" if options else "") + ": "
        lines.append(head + m.about.replace("\n", "\n  "))
    return "\n".join(lines).splitlines()


def test_the_readme_says_what_each_metric_says():
    found = METRICS_BLOCK.search(DATASETS_PAGE.read_text(encoding="utf-8"))
    assert found, "docs/datasets.md has no <!-- metrics --> block"
    assert found.group(2).splitlines() == metric_lines(), \
        "docs/datasets.md's list of metrics is out of date: run python tests/test_readme_surface.py"


def test_the_readme_lists_exactly_the_onnx_operators_read():
    found = ONNX_BLOCK.search(NETWORK_PAGE.read_text(encoding="utf-8"))
    assert found, "docs/your-network.md has no <!-- onnx-operators --> block"
    assert found.group(2).splitlines() == onnx_lines(), \
        "docs/your-network.md's ONNX operator list is out of date: run python tests/test_readme_surface.py"


def test_the_readme_lists_exactly_the_supported_surface():
    found = BLOCK.search(NETWORK_PAGE.read_text(encoding="utf-8"))
    assert found, "docs/your-network.md has no <!-- supported --> block"
    assert found.group(2).splitlines() == surface_lines(), \
        "docs/your-network.md's supported list is out of date: run python tests/test_readme_surface.py"


def test_every_listed_name_exists():
    found = BLOCK.search(NETWORK_PAGE.read_text(encoding="utf-8")).group(2)
    for line, owner in zip(found.splitlines(), (nn, F, sl.Tensor)):
        for name in re.findall(r"`([A-Za-z_0-9]+)`", line.split(":", 1)[1]):
            assert hasattr(owner, name), f"docs/your-network.md lists {name}, which {owner.__name__} does not have"


if __name__ == "__main__":
    text = NETWORK_PAGE.read_text(encoding="utf-8")
    text = BLOCK.sub(lambda m: m.group(1) + "\n".join(surface_lines()) + m.group(3), text)
    text = ONNX_BLOCK.sub(lambda m: m.group(1) + "\n".join(onnx_lines()) + "\n" + m.group(3), text)
    NETWORK_PAGE.write_text(text, encoding="utf-8")
    text = DATASETS_PAGE.read_text(encoding="utf-8")
    text = METRICS_BLOCK.sub(lambda m: m.group(1) + "\n".join(metric_lines()) + "\n" + m.group(3), text)
    DATASETS_PAGE.write_text(text, encoding="utf-8")
    sys.exit(0)
