"""`saliency explore`: serves the page, prints its URL with the token, stops cleanly on Ctrl-C; a bad
image is one line and exit code 2."""
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
SCENE = REPO / "samples" / "images" / "scene.png"


def _command(*args):
    return [sys.executable, "-m", "saliency.cli.main", "explore", *args]


def test_the_server_prints_its_url_answers_and_stops_on_ctrl_c(tmp_path):
    proc = subprocess.Popen(_command(str(SCENE), "--model", "depth", "--no-browser"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = None
        for _ in range(20):
            line = proc.stdout.readline()
            found = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
            if found:
                url = found.group(0)
                break
        assert url, "no URL printed"
        base, token = url.split("/?token=")
        with urllib.request.urlopen(f"{base}/api/info?token={token}", timeout=60) as response:
            assert json.loads(response.read())["task"] == "depth"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


def test_a_bad_image_is_one_line(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_text("not an image")
    proc = subprocess.run(_command(str(bad), "--no-browser"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "not an image" in proc.stderr and "Traceback" not in proc.stderr
