"""The methods' options on the command line, generated from their records (`attribution.registry`).

Each flag a method declares (`--samples`, `--steps`, `--window`, ...) becomes one option of the
commands that compute maps, shown in a help panel per method; a flag several methods share
(`--baseline`) is one option. The command receives the texts given (None where not given) and
`parse` turns them into the chosen method's keyword arguments, once, with one-line errors.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

import typer

from saliency.attribution import registry

if TYPE_CHECKING:
    from saliency.attribution.registry import Option

F = TypeVar("F", bound=Callable[..., Any])


_KINDS: dict[Callable[[str], Any], str] = {int: "INTEGER", float: "NUMBER", str: "TEXT"}


def flags() -> dict[str, tuple[Option, list[str]]]:
    """{flag: (Option, [names of the methods that take it])}, in declaration order."""
    out: dict[str, tuple[Option, list[str]]] = {}
    for m in registry.METHODS.values():
        for o in m.options:
            out.setdefault(o.cli_flag, (o, []))[1].append(m.name)
    return out


def _param_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _help(methods: list[str], flag: str) -> str:
    """The help of a flag: each method's help text and default (one method: without its name)."""
    parts = []
    for name in methods:
        record = registry.METHODS[name]
        option = record.option(flag)
        default = record.defaults[option.name]
        text = option.help + (" (required)" if default is inspect.Parameter.empty else
                              "" if default is None else f" (default: {default})")
        parts.append(text if len(methods) == 1 else f"{name}: {text}")
    return "; ".join(parts) + "."


def add_method_options(command: F) -> F:
    """`command` with one keyword-only typer option per method flag added to its signature (default
    None: the method's own default), shown under a panel naming the methods that take it. The
    command takes them as **method_options."""
    signature = inspect.signature(command)
    params = [p for p in signature.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    taken = {p.name for p in params}
    for flag, (option, methods) in flags().items():
        name = _param_name(flag)
        if name in taken:
            raise TypeError(f"{command.__name__} has a parameter {name!r} of its own; the method flag {flag} "
                            f"would hide it")
        metavar = "|".join(option.choices).upper() if option.choices else _KINDS.get(option.kind, "VALUE")
        default = typer.Option(None, flag, help=_help(methods, flag), metavar=metavar,
                               rich_help_panel=f"Options of {' and '.join(methods)}", show_default=False)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=str))
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return command


def parse(method: str, given: Mapping[str, str | None]) -> dict[str, Any]:
    """The keyword arguments of `method` (a name) from `given` ({parameter name: text or None},
    what the command received): each flag given parsed by its option; a flag of another method
    only is an OptionError naming whose it is."""
    record = registry.get(method)
    out = {}
    for flag, (option, methods) in flags().items():
        text = given.get(_param_name(flag))
        if text is None:
            continue
        if record.name not in methods:
            raise registry.OptionError(f"{flag} is an option of {' and '.join(methods)}, not of {record.name}")
        own = record.option(flag)
        out[own.name] = own.parse(text)
    return out
