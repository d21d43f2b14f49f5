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


class no_grad(set_grad_enabled):
    """Operations inside do not record the graph (outputs never require grad)."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Turns recording back on inside a `no_grad` block."""

    def __init__(self):
        super().__init__(True)
