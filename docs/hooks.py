"""MkDocs hooks: the parts of the pages that are made from the repository when the site is built.

A page asks for a generated part with a marker line, which is replaced by what it names:

    <!-- generate: output saliency ARGS... -->
        the command's real output (run in this process, through the typer app), as a text block;
    <!-- generate: help -->
        the `--help` of `saliency` and of each of its commands, one section per command;
    <!-- generate: api MODULE NAME... -->
        an mkdocstrings directive for each named function or class of MODULE;
    <!-- generate: members MODULE from HOME -->
        the same for each public function or class of MODULE defined in the module HOME, in HOME's
        source order (the ops of `saliency`, say);
    <!-- generate: rest MODULE -->
        the same for each public function or class of MODULE that the page has not shown yet, so
        that a new name reaches its page without an edit;
    <!-- generate: include FILE -->
        the text of FILE, a path from the repository's root (BENCHMARKS.md, ...), its links into
        docs/ made links to the pages.

A module's public names are its `__all__`, else those not starting with `_`. Where a package has a
submodule of the same name as one of its functions (`saliency.attribution.smoothgrad`, the module
and the function), Griffe sees the module; the directive then names the function at its home
(`saliency.attribution.smoothgrad.smoothgrad`) under the public name as its heading.

The figures under `figures/` are drawn by docs/figures.py when the build starts. A marker that
does not parse, a command that fails or a missing file stops the build.
"""
import importlib
import importlib.util
import inspect
import pkgutil
import re
import shlex
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- generate: (.*?) -->$", re.M)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
HELP_WIDTH = 80        # columns of the rendered --help: a standard terminal's, which fits the page's text column


# ---------------------------------------------------------------- command output

def _run(args):
    """The output of `saliency ARGS` run through the typer app, which must exit with 0."""
    from typer.testing import CliRunner

    from saliency.cli.main import app

    result = CliRunner().invoke(app, args, prog_name="saliency", env={"COLUMNS": str(HELP_WIDTH)})
    if result.exit_code != 0:
        raise PluginError(f"saliency {shlex.join(args)} exited with {result.exit_code}:\n{result.output}"
                          + (f"\n{result.exception!r}" if result.exception else ""))
    # rich writes colours when it believes it is on a terminal (GITHUB_ACTIONS, FORCE_COLOR): not here
    lines = ANSI.sub("", result.output).splitlines()
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def _text_block(text):
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{fence}text\n{text}\n{fence}"


def _output(words, shown):
    if not words or words[0] != "saliency":
        raise PluginError(f"generate: output runs saliency commands only, got {shlex.join(words)!r}")
    return _text_block(_run(words[1:]))


def _help(words, shown):
    """`saliency --help`, then a section per command with its --help, in the order the app lists them."""
    import click
    import typer

    from saliency.cli.main import app

    group = typer.main.get_command(app)
    names = [name for name in group.list_commands(click.Context(group)) if not group.commands[name].hidden]
    parts = [_text_block(_run(["--help"]))]
    for name in names:
        parts += [f"## saliency {name}", _text_block(_run([name, "--help"]))]
    return "\n\n".join(parts)


# ---------------------------------------------------------------- API directives

def _public(module):
    """{name: object} of the public functions and classes of `module`, in `__all__`'s order."""
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    objects = {name: getattr(module, name) for name in names}
    return {name: obj for name, obj in objects.items() if inspect.isfunction(obj) or inspect.isclass(obj)}


def _directive(module, name, obj):
    """The mkdocstrings directive of `module.name`, at the object's home when a submodule hides it."""
    path = f"{module.__name__}.{name}"
    submodules = {m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))}
    if name not in submodules:
        return f"::: {path}\n    options:\n      heading_level: 3"
    home = f"{obj.__module__}.{obj.__qualname__}"
    return f"::: {home}\n    options:\n      heading_level: 3\n      heading: \"{path}\"\n      toc_label: \"{name}\""


def _show(module, chosen, shown):
    shown[module.__name__].update(chosen)
    public = _public(module)
    return "\n\n".join(_directive(module, name, public[name]) for name in chosen)


def _api(words, shown):
    if len(words) < 2:
        raise PluginError(f"generate: api takes MODULE NAME..., got {shlex.join(words)!r}")
    module = importlib.import_module(words[0])
    unknown = [name for name in words[1:] if name not in _public(module)]
    if unknown:
        raise PluginError(f"generate: api: {', '.join(unknown)} not a public function or class of {words[0]}")
    return _show(module, words[1:], shown)


def _members(words, shown):
    if len(words) != 3 or words[1] != "from":
        raise PluginError(f"generate: members takes MODULE from HOME, got {shlex.join(words)!r}")
    module, home = importlib.import_module(words[0]), words[2]
    found = sorted((inspect.getsourcelines(obj)[1], name) for name, obj in _public(module).items()
                   if obj.__module__ == home)
    if not found:
        raise PluginError(f"generate: members found no function or class of {home} in {words[0]}")
    return _show(module, [name for _, name in found], shown)


def _rest(words, shown):
    if len(words) != 1:
        raise PluginError(f"generate: rest takes MODULE, got {shlex.join(words)!r}")
    module = importlib.import_module(words[0])
    return _show(module, [name for name in _public(module) if name not in shown[words[0]]], shown)


def _include(words, shown):
    path = ROOT / " ".join(words)
    if not path.is_file():
        raise PluginError(f"generate: include: {path} is not a file")
    # a link from the repository's root into docs/ is, inside the site, a link to that page
    return path.read_text(encoding="utf-8").strip("\n").replace("](docs/", "](")


GENERATORS = {"output": _output, "help": _help, "api": _api, "members": _members, "rest": _rest,
              "include": _include}


def on_page_markdown(markdown, page, config, files):
    shown = {}     # module -> names this page shows, for `rest`

    def replace(match):
        words = shlex.split(match.group(1))
        if not words or words[0] not in GENERATORS:
            raise PluginError(f"unknown marker {match.group(0)!r}; the kinds are {', '.join(GENERATORS)}")
        if words[0] in ("api", "members", "rest") and len(words) > 1:
            shown.setdefault(words[1], set())
        return GENERATORS[words[0]](words[1:], shown)

    try:
        return MARKER.sub(replace, markdown)
    except PluginError as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from None


# ---------------------------------------------------------------- figures

def _figures_module():
    spec = importlib.util.spec_from_file_location("saliency_docs_figures", Path(__file__).with_name("figures.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def on_files(files, config):
    """Draw the figures the pages show (docs/figures.py) into the site as figures/NAME.png."""
    for name, png in _figures_module().draw_all(ROOT).items():
        files.append(File.generated(config, f"figures/{name}.png", content=png))
    return files
