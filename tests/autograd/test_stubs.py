"""The type stubs of the names the op registry makes at import time (saliency/autograd/stubs.py):
each committed stub is what the generator writes now, and a type checker given a user's file sees
the Tensor methods, `saliency.<name>` and `nn.functional` functions with their types, and flags a
name the package does not have. Skipped without mypy (the `test` extra pins it)."""
import textwrap

import pytest

from saliency.autograd import api, stubs

pytest.importorskip("mypy.api")


@pytest.mark.parametrize("module", list(stubs.STUBS))
def test_each_stub_is_up_to_date(module):
    path = stubs.stub_path(module)
    assert path.is_file(), f"{path} is missing: run python -m saliency.autograd.stubs"
    assert path.read_text(encoding="utf-8") == stubs.render(module), \
        f"{path} is out of date: run python -m saliency.autograd.stubs"


def test_the_tensor_stub_has_every_registered_method_and_no_catch_all():
    text = stubs.stub_path("saliency.autograd.tensor").read_text(encoding="utf-8")
    for name in api.exported("Tensor"):
        assert f"    def {name}(self" in text, name
    assert "__getattr__" not in text


def test_a_type_checker_sees_the_generated_names_and_flags_unknown_ones(tmp_path):
    from mypy import api as mypy

    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent("""\
        import saliency as sl
        import saliency.nn.functional as F

        x = sl.randn(2, 3, requires_grad=True)
        y = x.relu().view(-1).sum()
        reveal_type(y)
        reveal_type(sl.exp(x))
        reveal_type(F.relu(x))
        reveal_type((x == 0).float())
        y.backward()
        x.no_such_method()
        sl.no_such_function(x)
        """))
    out, err, code = mypy.run([str(user), "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                               "--ignore-missing-imports", "--follow-imports", "silent"])
    lines = out.splitlines()
    revealed = [line for line in lines if "Revealed type" in line]
    assert len(revealed) == 4 and all('"saliency.autograd.tensor.Tensor"' in line for line in revealed), out
    assert any('user.py:11: error: "Tensor" has no attribute "no_such_method"' in line for line in lines), out
    assert any('user.py:12: error: Module has no attribute "no_such_function"' in line for line in lines), out
    assert sum(": error:" in line for line in lines) == 2, out
