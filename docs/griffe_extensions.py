"""Griffe extensions for the API pages (mkdocs.yml loads them into mkdocstrings' Python handler).

`InstalledSubpackages`: the repository keeps `models/` (and `cli/`) beside `saliency/`, and
setuptools installs them under it (pyproject.toml's `package-dir`). Griffe reads packages from
folders and would not find `saliency.models`, so this loads the folder as that submodule.

`PlainDocstrings`: the docstrings are plain prose, not Google, NumPy or Sphinx sections, and are
rendered as Markdown. Two things in them Markdown would misread are rewritten: a chained subscript
(`fig.panel_axes[r][c]`) becomes code instead of a reference link, and the `name: text` entries of
an `Args:` block become a list instead of one run-on paragraph.

`InheritedDocstrings`: a method or property that overrides a documented one without a docstring
of its own shows the one it overrides, as `help()` does (each layer's `forward`: Module.forward's).
"""
import re
from pathlib import Path

import griffe

SUBPACKAGES = {"models": "models"}   # submodule of saliency -> folder beside saliency/ (the API pages need no cli)


class InstalledSubpackages(griffe.Extension):
    """Attach each folder of SUBPACKAGES to the loaded `saliency` package as its submodule."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        if pkg.name != "saliency" or pkg.filepath is None:
            return
        root = Path(pkg.filepath).parent.parent
        for name, folder in SUBPACKAGES.items():
            init = root / folder / "__init__.py"
            if name in pkg.members or not init.is_file():
                continue
            # the loader's own module loading, so that relative imports resolve under saliency.<name>
            module = loader._load_module(name, init, parent=pkg)
            pkg.set_member(name, module)
            loader.expand_exports(module)


# `fig.panel_axes[r][c]` written without backticks: Markdown would read `[r][c]` as a reference link
_INDEXING = re.compile(r"(?<![\w`\]])((?:[A-Za-z_][\w.]*)?(?:\[[^\[\]`\n]*\]){2,})")
_CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?(?<!`)\1(?!`)")
_SECTION = re.compile(r"^(Args|Arguments|Returns|Raises|Yields|Attributes):\s*$")
_NAMES = re.compile(r"^([A-Za-z_*][\w*]*(?:, [A-Za-z_*][\w*]*)*): (.*)$")


def code_for_indexing(text: str) -> str:
    """`text` with each chained subscript outside code spans (`a[i][j]`, `[row][column]`) made a code span."""
    parts, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        parts += [_INDEXING.sub(r"`\1`", text[last:span.start()]), span.group()]
        last = span.end()
    return "".join(parts) + _INDEXING.sub(r"`\1`", text[last:])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def lists_for_sections(text: str) -> str:
    """`text` with each `Args:` (`Returns:`, `Raises:`, ...) block of indented `name: text` entries as a
    Markdown list, one item per entry (Markdown would run the entries together into one paragraph)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        header = _SECTION.match(lines[i].strip())
        if not header or i + 1 == len(lines) or _indent(lines[i + 1]) <= _indent(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        step, entries, i = _indent(lines[i + 1]), [], i + 1
        while i < len(lines) and lines[i].strip() and _indent(lines[i]) >= step:
            if _indent(lines[i]) == step:
                entries.append(lines[i].strip())
            else:
                entries[-1] += " " + lines[i].strip()
            i += 1
        out += [header.group(0), ""]
        for entry in entries:
            named = _NAMES.match(entry)
            out.append(f"- `{named.group(1)}`: {named.group(2)}" if named else f"- {entry}")
        out.append("")
    return "\n".join(out)


class PlainDocstrings(griffe.Extension):
    """Rewrite every docstring with `code_for_indexing` and `lists_for_sections`."""

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = lists_for_sections(code_for_indexing(obj.docstring.value))

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        self.on_object(obj=pkg)


class InheritedDocstrings(griffe.Extension):
    """Give each undocumented method or property of a class the docstring of the nearest base class
    member of that name that has one (once the whole package is loaded, so that bases resolve)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        for cls in _classes(pkg):
            try:
                bases = cls.mro()
            except (griffe.AliasResolutionError, griffe.CyclicAliasError, ValueError):
                continue  # a base outside the package (e.g. a dataclass's object): nothing to inherit
            for name, member in cls.members.items():
                if member.is_alias or member.docstring is not None or not (member.is_function or member.is_attribute):
                    continue
                for base in bases:
                    inherited = base.members.get(name)
                    if inherited is not None and not inherited.is_alias and inherited.docstring is not None:
                        member.docstring = griffe.Docstring(inherited.docstring.value, parent=member)
                        break


def _classes(obj: griffe.Object):
    """Every class defined in `obj` (a module or class) and in its submodules and nested classes."""
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_class:
            yield member
        if member.is_module or member.is_class:
            yield from _classes(member)
