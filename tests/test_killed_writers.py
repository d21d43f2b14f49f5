"""A writer killed (SIGKILL) in the middle of writing leaves the target as it was: absent, or
whole with its old contents. Each case runs a writer in a child process, waits until its
temporary file has started to grow, kills it and looks at what is on disk."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from saliency._write import is_part

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGKILL")

# each writer writes a file big enough to take a second or more to encode
WRITERS = {
    "map": """
        import numpy as np
        from saliency import viz
        picture = np.random.default_rng(0).random((3000, 3000, 3))
        viz.save(picture, TARGET)
    """,
    "weights": """
        import numpy as np
        import saliency as sl
        rng = np.random.default_rng(0)
        sl.nn.save({f"layer{i}.weight": rng.random((1000, 1000)) for i in range(40)}, TARGET, compressed=True)
    """,
}
SUFFIX = {"map": ".png", "weights": ".npz"}


def _kill_mid_write(tmp_path, kind, target):
    code = f"TARGET = {str(target)!r}\n" + textwrap.dedent(WRITERS[kind])
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            parts = [p for p in tmp_path.iterdir() if is_part(p) and p.stat().st_size > 0]
            if parts:
                break
            assert proc.poll() is None, f"the writer ended before it was killed: {proc.stderr.read()}"
            time.sleep(0.005)
        else:
            raise AssertionError("the writer never started its temporary file")
        assert proc.poll() is None, "the writer finished before it could be killed mid-write"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    return parts


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_killed_writer_leaves_no_target(tmp_path, kind):
    target = tmp_path / f"out{SUFFIX[kind]}"
    parts = _kill_mid_write(tmp_path, kind, target)
    assert not target.exists()
    assert all(is_part(p) for p in tmp_path.iterdir()) and parts   # only the hidden temporary file


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_killed_writer_keeps_the_old_target(tmp_path, kind):
    target = tmp_path / f"out{SUFFIX[kind]}"
    target.write_bytes(b"the previous run's complete file")
    _kill_mid_write(tmp_path, kind, target)
    assert target.read_bytes() == b"the previous run's complete file"
