"""Installing, running and uninstalling: compiled kernels are cached per user, never in the package.

These tests run real processes: the kernel cache is decided when `saliency.kernels` is imported.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from saliency.kernels._jit import ENV_VAR, cache_folder, default_root

pytestmark = pytest.mark.slow  # fresh virtual environments and subprocesses

ROOT = Path(__file__).resolve().parents[1]
STAR = ROOT / "samples" / "images" / "star.png"
# compiles and runs one small kernel, then says where the kernel cache is
COMPILE_ONE = ("import numpy as np; from saliency.kernels import _jit; from saliency.kernels.activation import _relu; "
               "x = np.linspace(-1, 1, 8); out = np.empty(8); mask = np.empty(8, np.bool_); _relu(x, out, mask, 0, 8); "
               "assert (out == np.maximum(x, 0)).all(); print(_jit.CACHE_DIR)")
CACHE_FILES = ("*.nbi", "*.nbc")


def _env(**changes):
    """This environment without the Numba and cache settings a CI step may have set, plus `changes`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT", "NUMBA_BOUNDSCHECK", ENV_VAR, "XDG_CACHE_HOME")}
    env.update({k: str(v) for k, v in changes.items()})
    return env


def _run(args, cwd, env, user=(), timeout=600):
    out = subprocess.run([*user, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{args} exited {out.returncode}:\n{out.stderr}"
    return out


def _cache_files(folder):
    return sorted(p for pattern in CACHE_FILES for p in Path(folder).rglob(pattern))


def _package_cache_files(since):
    """Numba cache files written inside the imported package since `since` (a time stamp)."""
    import saliency

    return [p for p in _cache_files(Path(saliency.__file__).parent) if p.stat().st_mtime >= since]


def test_cache_folder_follows_numba_then_saliency_then_the_platform(tmp_path):
    home = {"HOME": "/home/u"}
    assert cache_folder({**home, "NUMBA_CACHE_DIR": "/n", ENV_VAR: "/s"}) == (Path("/n"), "NUMBA_CACHE_DIR")
    assert cache_folder({**home, ENV_VAR: "/s"})[0] == Path("/s/numba")
    assert cache_folder({**home, "XDG_CACHE_HOME": "/x"}, "linux")[0] == Path("/x/saliency-maps/numba")
    assert cache_folder({**home, "XDG_CACHE_HOME": "relative"}, "linux")[0] == Path("/home/u/.cache/saliency-maps/numba")
    assert cache_folder(home, "linux")[0] == Path("/home/u/.cache/saliency-maps/numba")
    assert default_root(home, "darwin") == Path("/home/u/Library/Caches/saliency-maps")
    assert default_root({**home, "LOCALAPPDATA": "C:/L"}, "win32") == Path("C:/L/saliency-maps/Cache")


@pytest.mark.parametrize("setting", ["saliency", "numba", "xdg"])
def test_kernels_are_cached_where_the_settings_say_and_not_in_the_package(tmp_path, setting):
    started = tmp_path.stat().st_mtime
    own, numba_dir, xdg = tmp_path / "own", tmp_path / "numba", tmp_path / "xdg"
    env = {"saliency": _env(**{ENV_VAR: own}),
           "numba": _env(**{ENV_VAR: own, "NUMBA_CACHE_DIR": numba_dir}),      # Numba's own setting wins
           "xdg": _env(XDG_CACHE_HOME=xdg)}[setting]
    expected = {"saliency": own / "numba", "numba": numba_dir, "xdg": xdg / "saliency-maps" / "numba"}[setting]
    out = _run([sys.executable, "-c", COMPILE_ONE], tmp_path, env)
    assert Path(out.stdout.strip()) == expected
    assert _cache_files(expected), "no cache files were written"
    assert [p for p in (own, numba_dir, xdg) if p.exists() and not str(expected).startswith(str(p))] == []
    assert _package_cache_files(started) == []
    assert "warning" not in out.stderr.lower()


@pytest.mark.parametrize("variable", [ENV_VAR, "NUMBA_CACHE_DIR"])
def test_an_unwritable_cache_folder_compiles_in_memory_with_one_warning(tmp_path, variable):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    started = tmp_path.stat().st_mtime
    env = _env(**{variable: blocker / "cache"}, XDG_CACHE_HOME=tmp_path / "xdg")
    out = _run([sys.executable, "-c", COMPILE_ONE], tmp_path, env)
    assert out.stdout.strip() == "None"
    warnings = [line for line in out.stderr.splitlines() if "KernelCacheWarning" in line]
    assert len(warnings) == 1 and "compiling them in memory" in warnings[0] and str(blocker) in warnings[0]
    assert _package_cache_files(started) == [] and not (tmp_path / "xdg").exists()


def test_the_command_line_reports_an_unwritable_cache_in_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = _run([sys.executable, "-m", "saliency.cli.main", "map", str(STAR), "--out", str(tmp_path / "m.png")],
               tmp_path, _env(**{ENV_VAR: blocker}))
    assert "prediction: star" in out.stdout
    assert out.stderr.splitlines() == [f"warning: cannot write compiled kernels to {blocker / 'numba'} (from "
                                       f"{ENV_VAR}): Not a directory; compiling them in memory for this process only "
                                       f"(set {ENV_VAR} to a writable folder to keep them)"]


def test_a_process_that_compiles_nothing_is_not_warned(tmp_path):
    out = _run([sys.executable, "-c", "import saliency, saliency.kernels"], tmp_path, _env(**{ENV_VAR: "/dev/null"}))
    assert out.stderr == ""


def _copy_installed_layout(site):
    """The package as an installation lays it out (models/ and cli/ inside saliency/), without caches."""
    skip = shutil.ignore_patterns("__pycache__", *CACHE_FILES)
    shutil.copytree(ROOT / "saliency", site / "saliency", ignore=skip)
    shutil.copytree(ROOT / "models", site / "saliency" / "models", ignore=skip)
    shutil.copytree(ROOT / "cli", site / "saliency" / "cli", ignore=skip)


def _snapshot(folder):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(Path(folder).rglob("*"))}


def _read_only_runner(work, site, env):
    """(command prefix, how) that runs a process which cannot write to `site`: the current user when
    permissions bind it, else (root) an unprivileged user, else a read-only bind mount."""
    for path in [*site.rglob("*"), site]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    if os.geteuid() != 0:
        return [], "read-only permissions"
    probe = [sys.executable, "-c", "import numpy, numba, PIL, matplotlib, typer"]
    setpriv = shutil.which("setpriv")
    if setpriv:
        user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        if subprocess.run(user + probe, cwd=work, env=env, capture_output=True).returncode == 0:
            return user, "an unprivileged user"
    unshare = shutil.which("unshare")
    if unshare:
        user = [unshare, "-m", "sh", "-c", f'mount --bind -o ro "{site}" "{site}" && exec "$0" "$@"']
        if subprocess.run(user + probe, cwd=work, env=env, capture_output=True).returncode == 0:
            return user, "a read-only bind mount"
    pytest.skip("running as root without setpriv or unshare: cannot make an installation read-only here")


def test_a_read_only_installation_computes_a_map():
    base = Path(tempfile.mkdtemp(prefix="saliency-ro-"))   # not pytest's tmp_path: another user must reach it
    try:
        base.chmod(0o755)
        site, work, cache, home = base / "site", base / "work", base / "cache", base / "home"
        _copy_installed_layout(site)
        for folder in (work, cache, home):
            folder.mkdir()
            folder.chmod(0o777)
        env = _env(PYTHONPATH=site, HOME=home, **{ENV_VAR: cache})
        before = _snapshot(site)
        user, how = _read_only_runner(work, site, env)
        out = _run(user + [sys.executable, "-m", "saliency.cli.main", "map", str(STAR), "--out", str(work / "m.png")],
                   work, env, timeout=900)
        assert "prediction: star" in out.stdout, how
        assert (work / "m.png").stat().st_size > 0
        assert _cache_files(cache), f"no kernel cache was written ({how})"
        assert _snapshot(site) == before, f"files changed inside the installed package ({how})"
        assert "warning" not in out.stderr.lower(), out.stderr
    finally:
        for path in base.rglob("*"):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_uninstall_leaves_nothing_importable_behind(tmp_path):
    """Install into a fresh environment, compute a map there, uninstall: `import saliency` fails."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "gallery",
        *CACHE_FILES))
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, _env())
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp_path, _env()).stdout.strip())
    # the dependencies come from this test environment (without any saliency of its own), so that no
    # download is needed; only the package itself is installed into the new environment
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("saliency", "__editable__", "_saliency")):
            (deps / entry.name).symlink_to(entry)
    (site / "test-deps.pth").write_text(f"{deps}\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    env = _env(XDG_CACHE_HOME=tmp_path / "xdg", HOME=tmp_path)
    _run(pip + ["install", "--quiet", "--no-deps", "--no-build-isolation", str(source)], tmp_path, env)

    work = tmp_path / "work"
    work.mkdir()
    out = _run([str(venv / "bin" / "saliency"), "map", str(STAR), "--out", str(work / "m.png")], work, env, timeout=900)
    assert "prediction: star" in out.stdout
    assert _cache_files(tmp_path / "xdg" / "saliency-maps" / "numba")

    _run(pip + ["uninstall", "--yes", "--quiet", "saliency-maps"], tmp_path, env)
    assert not (site / "saliency").exists(), sorted(map(str, (site / "saliency").rglob("*")))[:10]
    probe = subprocess.run([str(python), "-c", "import saliency"], cwd=work, env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'saliency'" in probe.stderr
