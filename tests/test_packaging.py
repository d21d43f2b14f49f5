"""The package imports the same way from a regular install, an editable one, and the source tree."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # installs the package into fresh environments

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import saliency, saliency.models, saliency.cli.main, saliency.autograd; "
         "print(saliency.__file__); print(saliency.models.__file__); print(saliency.cli.main.__file__)")


def _probe(cwd, env=None):
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [Path(line) for line in out.stdout.split()]


def test_subpackages_resolve_from_the_repository_root():
    pkg, models, cli = _probe(ROOT)
    assert pkg == ROOT / "saliency" / "__init__.py"
    assert models == ROOT / "models" / "__init__.py"
    assert cli == ROOT / "cli" / "main.py"


def test_installed_package_imports_from_elsewhere(tmp_path):
    """However the test environment installed the package (editable or not), it works outside the checkout."""
    pkg, models, cli = _probe(tmp_path)
    assert models.is_file() and cli.is_file() and pkg.is_file()


def test_regular_install_works_from_any_directory(tmp_path):
    site = tmp_path / "site"
    # build from a copy, so that the build leaves nothing behind in the checkout
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "venv", "build", "*.egg-info",
                                                                 "__pycache__", ".pytest_cache", ".hypothesis"))
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    build = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation,
                            "--target", str(site), str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    installed = site / "saliency"
    assert (installed / "models" / "__init__.py").is_file() and (installed / "cli" / "main.py").is_file()
    env = {**os.environ, "PYTHONPATH": str(site)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pkg, models, cli = _probe(elsewhere, env)
    assert pkg == installed / "__init__.py"
    assert models == installed / "models" / "__init__.py"
    assert cli == installed / "cli" / "main.py"
    # from the repository root the source folder shadows the install; its subpackages must still resolve
    pkg, models, cli = _probe(ROOT, env)
    assert pkg == ROOT / "saliency" / "__init__.py" and models == ROOT / "models" / "__init__.py"
