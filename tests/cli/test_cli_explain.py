"""`saliency explain` through typer's CliRunner and as a real subprocess."""
import re
import subprocess
import sys

from typer.testing import CliRunner

from saliency.cli.explain import EXAMPLES, explain
from saliency.cli.main import app

runner = CliRunner()


def test_help_lists_the_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "explain" in result.output


def test_every_example_checks_out_against_the_explicit_jacobian():
    text = explain()
    assert [ex.number for ex in EXAMPLES] == list(range(1, 9))
    for ex in EXAMPLES:
        assert f"Example {ex.number}:" in text
    assert "MISMATCH" not in text
    # one check line per leaf per stage
    expected = sum(len(ex.leaves) * len(ex.stages) for ex in EXAMPLES)
    assert len(re.findall(r"\bmatch\b", text)) == expected


def test_matrix_example_shows_each_seed_selecting_a_jacobian_row():
    result = runner.invoke(app, ["explain", "--example", "2"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "MmBackward0" in out and "AccumulateGrad(x)" in out
    grads = re.findall(r"^  x\s+(\[\[[^\]]*\]\])\s+(\[\[[^\]]*\]\])\s+match", out, flags=re.M)
    assert grads == [("[[1, 3]]", "[[1, 3]]"), ("[[2, 4]]", "[[2, 4]]"), ("[[3, 7]]", "[[3, 7]]")]


def test_graph_example_names_the_nodes_like_pytorch():
    out = explain(8)
    assert "MulBackward0(e)" in out and "AddBackward0(c)" in out
    assert "next_functions[1][0].variable is d: True" in out
    assert re.search(r"^  a\s+4\s+4\s+match", out, flags=re.M) and re.search(r"^  d\s+5\s+5\s+match", out, flags=re.M)


def test_accumulation_example_doubles_the_gradients():
    out = explain(5)
    for leaf, value in (("a", 6), ("b", 8), ("c", 2)):
        assert re.search(rf"^  {leaf}\s+{value}\s+{value}\s+match", out, flags=re.M)


def test_unknown_example_is_one_line_and_nonzero_exit():
    proc = subprocess.run([sys.executable, "-m", "saliency.cli.main", "explain", "--example", "99"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: no example 99; choose one of 1, 2, 3, 4, 5, 6, 7, 8"]
    assert "Traceback" not in proc.stderr


def test_explain_runs_as_a_subprocess():
    proc = subprocess.run([sys.executable, "-m", "saliency.cli.main", "explain", "-e", "3"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^  c\s+\[0.01667, 0.1429, 1.25e-05\]\s+\[0.01667, 0.1429, 1.25e-05\]\s+match",
                     proc.stdout, flags=re.M)
