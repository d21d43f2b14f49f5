"""Whether operations record the graph: `no_grad`, `enable_grad`, `set_grad_enabled`."""
import functools

# Read by Function.apply on every op. A module attribute, changed only through
# the classes below.
enabled = True


def is_grad_enabled():
    return enabled


class _GradMode:
    """Switches recording to `mode` inside a `with` block (or a decorated function), then restores it."""

    def __init__(self, mode):
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
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _GradMode(mode):
                return fn(*args, **kwargs)

        return wrapper


class set_grad_enabled(_GradMode):
    """Turns recording on or off. As in PyTorch it works as `with set_grad_enabled(False):`, as a
    decorator, and as a plain call `set_grad_enabled(False)`, which switches the mode until changed."""

    def __init__(self, mode=True):
        global enabled
        super().__init__(mode)
        self.prev = enabled
        enabled = self.mode

    def __enter__(self):
        return self  # __init__ already switched the mode; __exit__ restores it

    def __call__(self, fn):
        global enabled
        enabled = self.prev  # used as a decorator: only the decorated function runs in the mode
        return super().__call__(fn)


class _FixedMode(_GradMode):
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
