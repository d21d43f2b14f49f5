"""Every sample script runs to the end (each checks its own numbers with assertions)."""
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "samples").glob("*.py"))


def test_there_are_samples():
    assert SAMPLES


@pytest.mark.slow
@pytest.mark.parametrize("script", SAMPLES, ids=[s.name for s in SAMPLES])
def test_sample_runs(script, tmp_path):
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
