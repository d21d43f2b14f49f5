"""The kernels' `njit`: the first kernel a process compiles is announced once."""
import numba
import numpy as np
import pytest

from saliency.kernels import _jit


def _probe(module):
    """A fresh (uncompiled) function of `module`, compiled by the kernels' njit without a cache."""
    def probe(x):
        return x + 1.0
    probe.__module__ = module
    return _jit.njit()(probe)


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="with NUMBA_DISABLE_JIT nothing compiles")
def test_the_first_compile_of_a_kernel_is_announced_once_with_the_cache_folder():
    calls = []
    _jit.on_first_compile(calls.append)
    _probe("user_code")(np.float64(1.0))  # not the package's: not announced
    assert calls == []
    _probe("saliency.kernels.probe")(np.float64(1.0))
    _probe("saliency.kernels.probe")(np.float64(2.0))
    assert calls == [_jit.CACHE_DIR]


class _Terminal:
    def isatty(self):
        return True


def test_the_command_line_says_it_compiles_and_where_on_a_terminal_only(capsys):
    from saliency.cli.main import _compiling_note

    _compiling_note("/some/folder", _Terminal())
    _compiling_note(None, _Terminal())  # the cache warning says it instead
    _compiling_note("/some/folder")  # captured: not a terminal
    err = capsys.readouterr().err.splitlines()
    assert err == ["compiling the kernels this run needs, once (cached in /some/folder); up to a minute on 2 cores"]


def test_generated_source_is_written_once_and_imported_as_a_module(monkeypatch, tmp_path):
    """A generated module is written to the cache folder's `generated` folder, imported, and its
    file left untouched when the same source is asked for again (Numba's cache keys on its time
    stamp)."""
    monkeypatch.setattr(_jit, "_GENERATED_DIR", tmp_path)
    source = "from saliency.kernels._jit import njit\n\n\n@njit()\ndef twice(x):\n    return 2 * x\n"
    module = _jit.generated("test_probe_twice", source)
    try:
        assert module.twice(np.float64(3.0)) == 6.0
        path = tmp_path / "test_probe_twice.py"
        stamp = path.stat().st_mtime_ns
        assert _jit.generated("test_probe_twice", source) is module
        del __import__("sys").modules[module.__name__]
        again = _jit.generated("test_probe_twice", source)
        assert again.twice(np.float64(1.5)) == 3.0 and path.stat().st_mtime_ns == stamp
    finally:
        __import__("sys").modules.pop(module.__name__, None)
