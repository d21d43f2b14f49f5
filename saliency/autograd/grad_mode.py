"""Whether operations record the graph: `no_grad`, `enable_grad`, `set_grad_enabled`."""
import functools

# Read by Function.apply on every op. A module attribute, changed only through
# the context managers below.
enabled = True


def is_grad_enabled():
    return enabled


class set_grad_enabled:
    """Context manager (and decorator) that turns graph recording on or off."""

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self.prev = None

    def __enter__(self):
        global enabled
        self.prev = enabled
        enabled = self.mode
        return self

    def __exit__(self, *exc):
        global enabled
        enabled = self.prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)(self.mode) if type(self) is set_grad_enabled else type(self)():
                return fn(*args, **kwargs)

        return wrapper


class _FixedMode(set_grad_enabled):
    """A grad mode that is always the same; usable as `@no_grad()` and as a bare `@no_grad`."""

    _mode = True

    def __new__(cls, fn=None):
        if fn is None:
            return super().__new__(cls)
        if not callable(fn):
            raise TypeError(f"{cls.__name__}() takes no arguments, got {fn!r}; use it as `with {cls.__name__}():` "
                            f"or as a decorator")
        return cls()(fn)

    def __init__(self, fn=None):
        super().__init__(self._mode)


class no_grad(_FixedMode):
    """Operations inside do not record the graph (outputs never require grad)."""

    _mode = False


class enable_grad(_FixedMode):
    """Turns recording back on inside a `no_grad` block."""

    _mode = True
