"""The documentation's list of torchvision architectures (docs/your-network.md) is the registry's
(`saliency.models.vision.ARCHITECTURES`).

To update the list after registering an architecture: python tests/test_readme_architectures.py
"""
import pathlib
import re
import sys

from saliency.models.vision import ARCHITECTURES

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "your-network.md"
BLOCK = re.compile(r"(<!-- architectures:[^\n]*-->\n)(.*?)(<!-- /architectures -->)", re.S)
TASKS = {"classification": "Classification (ImageNet-1k)",
         "segmentation": "Segmentation (Pascal VOC, the `out` logits)"}


def architecture_lines():
    lines = []
    for task, title in TASKS.items():
        names = sorted(n for n, a in ARCHITECTURES.items() if a.task == task)
        lines.append(f"* {title}, {len(names)}: " + ", ".join(f"`{n}`" for n in names) + ".")
    return lines


def test_the_readme_lists_exactly_the_registered_architectures():
    found = BLOCK.search(PAGE.read_text(encoding="utf-8"))
    assert found, "docs/your-network.md has no <!-- architectures --> block"
    assert found.group(2).splitlines() == architecture_lines(), \
        "docs/your-network.md's list of architectures is out of date: run python tests/test_readme_architectures.py"


def test_every_architecture_has_a_task_the_list_shows():
    assert {a.task for a in ARCHITECTURES.values()} <= set(TASKS)


if __name__ == "__main__":
    text = PAGE.read_text(encoding="utf-8")
    PAGE.write_text(BLOCK.sub(lambda m: m.group(1) + "".join(line + "\n" for line in architecture_lines())
                                + m.group(3), text), encoding="utf-8")
    sys.exit(0)
