"""What the tool knows about each attribution method, declared once, in the method's own file.

A method function is registered with the `method` decorator, which records a `Method`: the
function; its options (`Option`: the keyword, its type, help text and command-line flag; the
default is the function's own); the shape of its map (the input's, or one channel); whether two
calls may run on one model at once; and what it needs from the model (Grad-CAM's layer). The
command line's choices, flags and help, the batch pipeline's decisions and a store's record are
all derived from these records (`METHODS`, `get`). A record has no defaults for what a method
must say about itself: leaving one out is a TypeError where the method is declared.

    @method(options=(Option("steps", int, "gradients along the path"),), map_channels="input")
    def integrated_gradients(model, x, seed=None, *, steps=64, batch=None, progress=None): ...

Keywords the function takes that are not options (`batch`, `progress`, `rng`, ...) are tuning
and plumbing, passed by the caller; `Method.check` refuses any keyword the function does not
take.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, TypeVar, cast

from ._core import InputError

F = TypeVar("F", bound=Callable[..., Any])

METHODS: dict[str, "Method"] = {}  # name -> Method, in the order the methods were declared


class OptionError(InputError):
    """An option a method does not have, or a value it cannot take: one line naming both."""


@dataclass(frozen=True)
class Option:
    """One option of a method: `name` (the function's keyword), `kind` (int, float or str; or a
    callable turning the command-line text into a value), `help`, `flag` (default --NAME with
    dashes), `choices` (the values allowed, for a str), `minimum` (for numbers) and `text` (a
    callable giving a value's command-line text, for values that are not numbers or strings:
    what a store records, and `parse` reads back). The default is the function's own default for
    the keyword."""

    name: str
    kind: Callable[[str], Any]
    help: str
    flag: str | None = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    text: Optional[Callable[[Any], Optional[str]]] = None

    @property
    def cli_flag(self) -> str:
        """The option's command-line flag: `flag`, else --NAME with dashes for underscores."""
        return self.flag or "--" + self.name.replace("_", "-")

    def parse(self, text: str) -> Any:
        """The value of the option's command-line text, or OptionError."""
        try:
            value = self.kind(text) if self.kind is not bool else text.lower() in ("1", "true", "yes")
        except (TypeError, ValueError) as exc:
            kind = getattr(self.kind, "__name__", "value")
            raise OptionError(f"{self.cli_flag} takes {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {text!r}"
                              f"{f' ({exc})' if str(exc) and kind not in ('int', 'float') else ''}") from None
        return self.check(value)

    def check(self, value: Any) -> Any:
        """`value` if the option can take it, else OptionError."""
        if self.choices is not None and value not in self.choices:
            raise OptionError(f"{self.cli_flag} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        if self.minimum is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not (math.isfinite(value) and value >= self.minimum):
                raise OptionError(f"{self.cli_flag} must be a finite number >= {self.minimum}, got {value!r}")
        return value


@dataclass(frozen=True)
class Method:
    """Everything the tool knows about one attribution method (see the module's docstring)."""

    name: str
    function: Callable[..., Any]
    options: tuple[Option, ...]
    map_channels: str | int     # "input": the map has the input's channels; an int: that many

    @property
    def summary(self) -> str:
        """The first line of the function's docstring."""
        return (inspect.getdoc(self.function) or self.name).splitlines()[0]

    @property
    def defaults(self) -> dict[str, Any]:
        """{option name: the function's default} (inspect.Parameter.empty for a required option)."""
        params = inspect.signature(self.function).parameters
        return {o.name: params[o.name].default for o in self.options}

    def option(self, name: str) -> Option:
        """The Option called `name` (its keyword or its flag), or OptionError listing the method's."""
        for o in self.options:
            if name in (o.name, o.cli_flag):
                return o
        have = ", ".join(o.cli_flag for o in self.options) or "none"
        raise OptionError(f"{self.name} has no option {name!r}; its options: {have}")

    def takes(self, keyword: str) -> bool:
        """Whether the function takes the keyword argument `keyword` (an option or plumbing such as
        `progress`)."""
        params = inspect.signature(self.function).parameters
        return keyword in params and params[keyword].kind == inspect.Parameter.KEYWORD_ONLY

    def map_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one image's map for an input image of shape (C, H, W)."""
        channels = input_shape[0] if self.map_channels == "input" else cast(int, self.map_channels)
        return (channels,) + tuple(input_shape[1:])

    def check(self, options: dict[str, Any]) -> dict[str, Any]:
        """`options` ({keyword: value}) checked: each a keyword the function takes, each option's
        value one it can take; returns them."""
        params = inspect.signature(self.function).parameters
        for name, value in options.items():
            if name not in params or params[name].kind != inspect.Parameter.KEYWORD_ONLY:
                self.option(name)  # raises, listing the options
            if any(o.name == name for o in self.options):
                self.option(name).check(value)
        for o in self.options:
            if o.name not in options and params[o.name].default is inspect.Parameter.empty:
                raise OptionError(f"{self.name} needs {o.cli_flag}: {o.help}")
        return dict(options)

    def record(self, options: dict[str, Any]) -> dict[str, Any]:
        """The options as JSON values for a store's record: numbers, strings and bools as they are,
        a value with a command-line text (`Option.text`: a blurred baseline) as that text, anything
        else (a layer module, a baseline array) by its repr, which `restore` cannot read back."""
        out: dict[str, Any] = {}
        for k, v in options.items():
            own = next((o for o in self.options if o.name == k), None)
            text = own.text(v) if own is not None and own.text is not None else None
            out[k] = v if v is None or isinstance(v, (bool, int, float, str)) else text if text is not None else repr(v)
        return out

    def restore(self, recorded: Optional[dict[str, Any]]) -> dict[str, Any]:
        """The options a store recorded (`record`), as the function takes them; an OptionError
        for one recorded by its repr (pass it yourself)."""
        out: dict[str, Any] = {}
        for k, v in (recorded or {}).items():
            own = self.option(k)
            try:
                out[k] = own.parse(v) if isinstance(v, str) and own.kind is not str else own.check(v)
            except OptionError:
                raise OptionError(f"the store records {own.cli_flag} as {v!r}, which cannot be read back; pass the "
                                  f"{k} the maps were made with") from None
        return out

    def __call__(self, model: Any, x: Any, seed: Any = None, **options: Any) -> Any:
        return self.function(model, x, seed, **self.check(options))


def method(*, options: Sequence[Option], map_channels: str | int, name: Optional[str] = None) -> Callable[[F], F]:
    """Register the decorated method function as a `Method` (see the module's docstring); returns
    the function unchanged."""
    def register(fn: F) -> F:
        record = Method(name or fn.__name__, fn, tuple(options), map_channels)
        params = inspect.signature(fn).parameters
        for o in record.options:
            if o.name not in params or params[o.name].kind != inspect.Parameter.KEYWORD_ONLY:
                raise TypeError(f"{record.name} declares the option {o.name!r}, which is not a keyword-only argument "
                                f"of {fn.__name__}")
        if record.name in METHODS:
            raise TypeError(f"a method named {record.name!r} is declared twice")
        METHODS[record.name] = record
        fn.method = record  # type: ignore[attr-defined]
        return fn

    return register


def get(method: str | Method | Callable[..., Any]) -> Method:
    """The Method of a name or of a registered function; InputError naming the methods otherwise."""
    if isinstance(method, Method):
        return method
    if callable(method) and isinstance(getattr(method, "method", None), Method):
        return method.method  # type: ignore[attr-defined]  # checked just above
    if not isinstance(method, str) or method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    return METHODS[method]


def method_of(method: str | Method | Callable[..., Any]) -> Method:
    """`get(method)`, or for a method function of your own (not registered) a Method that says
    no more than can be assumed of it: no options declared (its keyword-only arguments are passed
    as given) and a map of the input's shape."""
    if callable(method) and not isinstance(method, Method) and not isinstance(getattr(method, "method", None), Method):
        return Method(getattr(method, "__name__", "method"), method, (), "input")
    return get(method)
