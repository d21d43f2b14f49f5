"""`njit` for this package's kernels: Numba's, with the on-disk cache in a per-user folder.

`@njit(cache=True)` alone lets Numba write its cache beside the source file, that is inside the
installed package (`site-packages/saliency/kernels/__pycache__`), where it outlives an uninstall
and fails on a read-only installation. Kernels decorated with this `njit` are cached in:

1. `NUMBA_CACHE_DIR`, if the user set it (Numba's own setting wins);
2. else `$SALIENCY_CACHE_DIR/numba`;
3. else the platform's per-user cache folder: `$XDG_CACHE_HOME/saliency-maps/numba` or
   `~/.cache/saliency-maps/numba` (Linux and other Unix), `~/Library/Caches/saliency-maps/numba`
   (macOS), `%LOCALAPPDATA%\\saliency-maps\\Cache\\numba` (Windows).

Generated kernels (`generated`: source written for one shape of a problem, such as a depthwise
convolution's taps) are written as modules to the `generated` folder inside it, and cached like
the others. If that folder cannot be created or written, the kernels are compiled in memory for this process
only (every process then compiles again) and one `KernelCacheWarning`, when the first kernel
compiles, says so. Numba keys its
cache files by the source file's path and contents, so installs and versions never collide.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, Callable, Iterator, Mapping


import numba
import numba.core.event

ENV_VAR = "SALIENCY_CACHE_DIR"


class KernelCacheWarning(RuntimeWarning):
    """The folder for compiled kernels cannot be written: they are compiled in memory instead."""


def default_root(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> Path:
    """The per-user cache folder of saliency-maps on this platform (not created here)."""
    home = Path(environ.get("HOME") or Path.home())
    if platform == "win32":
        base = environ.get("LOCALAPPDATA")
        return (Path(base) if base else home / "AppData" / "Local") / "saliency-maps" / "Cache"
    if platform == "darwin":
        return home / "Library" / "Caches" / "saliency-maps"
    xdg = environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else home / ".cache") / "saliency-maps"


def cache_folder(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> tuple[Path, str]:
    """(folder for compiled kernels, the setting it came from), before checking it is writable."""
    numba_dir = environ.get("NUMBA_CACHE_DIR", "")
    if numba_dir:
        return Path(numba_dir), "NUMBA_CACHE_DIR"
    own = environ.get(ENV_VAR, "")
    if own:
        return Path(own) / "numba", ENV_VAR
    return default_root(environ, platform) / "numba", "the per-user cache folder"


def _writable(folder: Path) -> str | None:
    """None if `folder` exists (created if needed) and takes a file, else the reason it does not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _compiles_ours(event: Any) -> bool:
    """Whether a Numba compile event is the compiling of a function of this package."""
    dispatcher = (event.data or {}).get("dispatcher")
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    return module.startswith(__name__.rpartition(".")[0])


class _WarnOnFirstCompile(numba.core.event.Listener):
    """Emits the warning when the first kernel of this package compiles (not at import), so that a
    command line has set up its warning display by then, and a process that compiles nothing is
    not warned at all."""

    def __init__(self, message: str | None) -> None:
        self.message = message

    def on_start(self, event: Any) -> None:
        if self.message and _compiles_ours(event):
            message, self.message = self.message, None
            warnings.warn(message, KernelCacheWarning, stacklevel=_caller_level())

    def on_end(self, event: Any) -> None:
        pass


class _OnFirstCompile(numba.core.event.Listener):
    """Calls its `pending` function once, when a kernel of this package next starts compiling (a
    kernel missing from the cache), with the folder the compiled kernels go to (None: in memory)."""

    pending: Callable[[Path | None], object] | None = None  # (a Listener's own `notify` is its event handler)

    def on_start(self, event: Any) -> None:
        if self.pending is not None and _compiles_ours(event):
            notify, self.pending = self.pending, None
            notify(CACHE_DIR)

    def on_end(self, event: Any) -> None:
        pass


_FIRST_COMPILE = _OnFirstCompile()
numba.core.event.register("numba:compile", _FIRST_COMPILE)


def on_first_compile(notify: Callable[[Path | None], object]) -> None:
    """Have notify(folder) called once, when this process next compiles a kernel (the first run
    after an install or an upgrade compiles the kernels it uses: tens of seconds; later runs load
    them from `folder`, or None when they are compiled in memory only), instead of any function
    set before. A command line says so, rather than sit silent."""
    _FIRST_COMPILE.pending = notify


def _caller_level() -> int:
    """The stacklevel of the innermost frame outside Numba, the standard library and this package:
    the code that called a kernel."""
    inside = (os.path.dirname(numba.__file__), os.path.dirname(contextlib.__file__),
              os.path.dirname(os.path.dirname(__file__)))
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        level, frame = level + 1, frame.f_back
    return level


def _choose() -> Path | None:
    folder, source = cache_folder()
    reason = _writable(folder)
    if reason is None:
        return folder
    numba.core.event.register("numba:compile", _WarnOnFirstCompile(
        f"cannot write compiled kernels to {folder} (from {source}): {reason}; compiling them in memory for this "
        f"process only (set {ENV_VAR} to a writable folder to keep them)"))
    return None


# The folder compiled kernels are cached in, or None when they are compiled in memory.
CACHE_DIR = _choose()


@contextlib.contextmanager
def _numba_cache_dir(folder: Path) -> Iterator[None]:
    """Numba reads its CACHE_DIR setting when a cached function is decorated; set it only meanwhile,
    so that the user's own Numba functions keep their settings."""
    config: Any = numba.config  # its settings are set at run time, from the environment
    previous = config.CACHE_DIR
    config.CACHE_DIR = str(folder)
    try:
        yield
    finally:
        config.CACHE_DIR = previous


# What `parallel=True` turns on: the explicit `prange` loops only. The kernels' wrappers have no
# array expressions to fuse or reductions to find, and Numba's other parallel passes make each
# compile about a third slower.
PARALLEL: dict[str, bool] = {"prange": True, "comprehension": False, "numpy": False, "reduction": False,
                             "setitem": False, "fusion": False, "inplace_binop": False, "stencil": False}


def njit(*, cache: bool = False, **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """`numba.njit(**options)`, `parallel=True` meaning PARALLEL and NumPy's error model unless
    another is named (a float division by zero gives inf or NaN instead of raising: Python's model
    tests every divisor, a branch that keeps LLVM from vectorizing the loop); with cache=True the
    compiled code is cached in CACHE_DIR (never in the package), or kept in memory when no cache
    folder can be written."""
    options.setdefault("error_model", "numpy")
    if options.get("parallel") is True:  # an object, not a dict: Numba empties a dict it is given
        options["parallel"] = numba.core.cpu_options.ParallelOptions(dict(PARALLEL))

    def decorate(fn: Callable[..., Any]) -> Any:
        if not cache or CACHE_DIR is None:
            return numba.njit(**options)(fn)
        with _numba_cache_dir(CACHE_DIR):
            return numba.njit(cache=True, **options)(fn)

    return decorate


_GENERATED_DIR: Path | None = None


def generated(name: str, source: str) -> ModuleType:
    """The module of generated kernel source `source`, under the name `name` (a valid identifier,
    unique per source): written to CACHE_DIR/generated/name.py, rewritten only when its text
    differs (Numba keys its cache by the file's time stamp, so an unchanged file keeps its compiled
    kernels), and imported. Without a cache folder, into a folder of this process's own."""
    global _GENERATED_DIR
    module_name = f"{__name__.rpartition('.')[0]}._generated.{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    if _GENERATED_DIR is None:
        if CACHE_DIR is None:
            _GENERATED_DIR = Path(tempfile.mkdtemp(prefix="saliency-kernels-"))
            atexit.register(shutil.rmtree, _GENERATED_DIR, True)
        else:
            _GENERATED_DIR = CACHE_DIR / "generated"
            _GENERATED_DIR.mkdir(parents=True, exist_ok=True)
    path = _GENERATED_DIR / f"{name}.py"
    try:
        current = path.read_text()
    except OSError:
        current = None
    if current != source:
        temporary = path.with_name(f"{name}.{os.getpid()}.tmp")
        temporary.write_text(source)
        os.replace(temporary, path)  # whole, for a process importing it at the same time
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None  # a .py path always has a spec and a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
