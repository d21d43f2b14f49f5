"""Whether operations record the graph: `no_grad`, `enable_grad`, `set_grad_enabled`.

The mode is context-local (a `contextvars.ContextVar`), so it belongs to the thread (or asyncio
task) that set it: `no_grad()` in one thread does not stop another from recording. A new thread
starts with grad mode on, whatever the thread that started it was doing, as in PyTorch.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any, Callable, Iterable, Iterator, Literal, TypeVar

_T = TypeVar("_T")
_Fn = TypeVar("_Fn", bound=Callable[..., Any])

# Read by Function.apply on every op (enabled_var.get()); set only through the classes below.
enabled_var: contextvars.ContextVar[bool] = contextvars.ContextVar("saliency.grad_enabled", default=True)


# Ids of leaf tensors that record no graph in this context (read by Function.apply and
# Tensor.requires_grad); set only through `frozen`.
frozen_var: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar("saliency.frozen", default=frozenset())


@contextlib.contextmanager
def frozen(tensors: Iterable[object]) -> Iterator[None]:  # Tensors (only their ids are read)
    """Inside the block, in this thread or task only, the leaf `tensors` behave as if they did not
    require grad: operations on them record no edge to them and their .grad is left alone. Other
    threads see them unchanged (a model can be trained in one thread while maps of it are computed
    in another)."""
    keep = list(tensors)  # alive for the block, so that their ids stay theirs
    token = frozen_var.set(frozen_var.get() | {id(t) for t in keep})
    try:
        yield
    finally:
        try:
            frozen_var.reset(token)
        except ValueError:  # left in another context than the one it was entered in
            frozen_var.set(token.old_value)
        del keep


def is_grad_enabled() -> bool:
    """Whether operations record the graph here (in this thread or task)."""
    return enabled_var.get()


def leave(var: contextvars.ContextVar[_T], tokens: list[contextvars.Token[_T]]) -> None:
    """Undo the latest `var.set` made in this context among `tokens` (the tokens of one object's
    entries, oldest first), and drop its token.

    One object may be entered in several threads or tasks at once (a module-level `no_grad()` or
    `relu_rule("guided")`): each exit finds the token of its own context. When a block is left in
    another context than the one it was entered in (a generator that held it open, resumed in
    another thread), no token can reset that context: the value the latest entry replaced is set
    there instead, as a thread-local switch would do.
    """
    entries = list(tokens)
    for token in reversed(entries):
        try:
            var.reset(token)
        except ValueError:  # set in another context
            continue
        tokens.remove(token)
        return
    token = entries[-1]
    tokens.remove(token)
    old = token.old_value
    var.set(contextvars.Context().run(var.get) if old is contextvars.Token.MISSING else old)  # the default


class _GradMode:
    """Switches recording to `mode` inside a `with` block (or a decorated function), then restores it.

    One instance may be entered again while it is active (nested `with` of the same object, or the
    same object in several threads): each entry keeps its own token, and each exit restores what
    its own entry replaced."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._tokens: list[contextvars.Token[bool]] = []

    def __enter__(self) -> _GradMode:
        self._tokens.append(enabled_var.set(self.mode))
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        leave(enabled_var, self._tokens)
        return False

    def __call__(self, fn: _Fn) -> _Fn:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _GradMode(mode):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class set_grad_enabled(_GradMode):
    """Turns recording on or off. As in PyTorch it works as `with set_grad_enabled(False):`, as a
    decorator, and as a plain call `set_grad_enabled(False)`, which switches the mode (of this
    thread or task) until changed."""

    def __init__(self, mode: bool = True) -> None:
        super().__init__(mode)
        # the plain call's switch; a `with` block undoes it
        self._pending: contextvars.Token[bool] | None = enabled_var.set(self.mode)

    def __enter__(self) -> _GradMode:
        if self._pending is None:  # entered again: switch again
            return super().__enter__()
        self._tokens.append(self._pending)
        self._pending = None
        return self

    def __call__(self, fn: _Fn) -> _Fn:
        if self._pending is not None:  # used as a decorator: only the decorated function runs in the mode
            leave(enabled_var, [self._pending])
            self._pending = None
        return super().__call__(fn)


class _FixedMode(_GradMode):
    """A grad mode that is always the same; usable as `@no_grad()` and as a bare `@no_grad`."""

    _mode = True

    def __new__(cls, fn: Callable[..., Any] | None = None) -> Any:  # an instance, or `fn` wrapped in one
        if fn is None:
            return super().__new__(cls)
        if not callable(fn):
            raise TypeError(f"{cls.__name__}() takes no arguments, got {fn!r}; use it as `with {cls.__name__}():` "
                            f"or as a decorator")
        return cls()(fn)

    def __init__(self, fn: Callable[..., Any] | None = None) -> None:
        super().__init__(self._mode)


class no_grad(_FixedMode):
    """Operations inside do not record the graph (outputs never require grad)."""

    _mode = False


class enable_grad(_FixedMode):
    """Turns recording back on inside a `no_grad` block."""

    _mode = True
