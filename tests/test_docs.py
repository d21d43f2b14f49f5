"""The documentation site: every public name has a docstring for its API page, and the site builds.

The site is made by `mkdocs build` from mkdocs.yml and docs/ (the docs extra installs MkDocs); its
API pages render the docstrings of the public modules below, so a public function, class, method or
property without one is a blank entry there. Every one of them has a docstring: the check names any
that lacks one (and checks itself on a module made to lack them).
"""
import dataclasses
import functools
import importlib
import inspect
import os
import pathlib
import subprocess
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PUBLIC_MODULES = ["saliency", "saliency.autograd", "saliency.nn", "saliency.nn.functional", "saliency.attribution",
                  "saliency.attribution.metrics", "saliency.attribution.seeds", "saliency.viz", "saliency.models"]


def _ours(obj):
    home = getattr(obj, "__module__", None) or ""
    return home == "saliency" or home.startswith("saliency.")


def _public_names(module):
    """A module's `__all__`, else its names that do not start with `_`."""
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [n for n in vars(module) if not n.startswith("_")]


def _has_text(doc):
    return bool(doc and doc.strip())


def _class_doc(cls):
    """The class's own docstring (not a base class's, nor the signature a dataclass writes in its place)."""
    doc = vars(cls).get("__doc__")
    if dataclasses.is_dataclass(cls) and doc and doc.startswith(cls.__name__ + "("):
        return None
    return doc


def _property_doc(cls, name):
    """The docstring of the property `name` of `cls`, or of the nearest one it overrides (as for a method)."""
    for klass in cls.__mro__:
        value = vars(klass).get(name)
        if isinstance(value, (property, functools.cached_property)) and _has_text(value.__doc__):
            return value.__doc__
    return None


def _public_methods(cls):
    """(home name, documented) of each public method and property of `cls`, its bases' included; an
    override without a docstring of its own has the one it overrides (as `help()` shows)."""
    for klass in cls.__mro__:
        if not _ours(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (property, functools.cached_property)):
                yield f"{klass.__module__}.{klass.__qualname__}.{name}", _has_text(_property_doc(cls, name))
                continue
            function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if inspect.isfunction(function):
                yield f"{function.__module__}.{function.__qualname__}", _has_text(inspect.getdoc(getattr(cls, name)))


def undocumented(module_names=PUBLIC_MODULES):
    """The public functions, classes and their public methods and properties in the modules
    `module_names` without a docstring, each named once at its home module
    (`saliency.autograd.creation.zeros`, not `saliency.zeros`)."""
    seen, missing = set(), set()
    for module_name in module_names:
        module = importlib.import_module(module_name)
        for name in _public_names(module):
            obj = getattr(module, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not _ours(obj):
                continue
            home = f"{obj.__module__}.{obj.__qualname__}"
            if home in seen:
                continue
            seen.add(home)
            if inspect.isclass(obj):
                if not _has_text(_class_doc(obj)):
                    missing.add(home)
                for method, documented in _public_methods(obj):
                    if method not in seen:
                        seen.add(method)
                        if not documented:
                            missing.add(method)
            elif not _has_text(obj.__doc__):
                missing.add(home)
    return missing


def test_every_public_name_has_a_docstring():
    missing = sorted(undocumented())
    assert not missing, f"public names without a docstring: {', '.join(missing)}"


# A public module the check must find lacking: each name in it without a docstring (a function, a class,
# methods, a property, a cached property), none with one or with one it inherits (Child's overrides).
PROBE = '''
"""A public module made to lack docstrings."""
import functools

__all__ = ["bare", "told", "Bare", "Told", "Child"]


def bare():
    pass


def told():
    """Documented."""


class Bare:
    def method(self):
        pass


class Told:
    """Documented."""

    def method(self):
        """Documented."""

    def plain(self):
        pass

    @property
    def size(self):
        """Documented."""

    @property
    def shape(self):
        return ()

    @functools.cached_property
    def total(self):
        return 0

    def _private(self):
        pass


class Child(Told):
    """Documented; its overrides without docstrings have the ones they override."""

    def method(self):
        pass

    @property
    def size(self):
        return 1
'''


def test_the_check_names_each_name_without_a_docstring(monkeypatch):
    module = types.ModuleType("saliency._docs_probe")
    exec(compile(PROBE, "<saliency._docs_probe>", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    home = "saliency._docs_probe."
    assert undocumented([module.__name__]) == {home + name for name in (
        "bare", "Bare", "Bare.method", "Told.plain", "Told.shape", "Told.total")}


@pytest.mark.slow
def test_the_site_builds_without_warnings(tmp_path):
    for package in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python", "material"):
        pytest.importorskip(package, reason="the docs extra is not installed")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    log = result.stdout + result.stderr
    problems = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert result.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(problems or log.splitlines()[-30:])
    assert (tmp_path / "site" / "index.html").is_file()
