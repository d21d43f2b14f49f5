"""`saliency train`'s options: the random seed is `--random-seed` (`--seed` is the backward seed of
map and batch); the old `train --seed` still works, hidden, with a warning. Training itself is
replaced by a stub here (tests/models/test_zoo.py trains for real)."""
import pytest
from typer.testing import CliRunner

from saliency.cli import zoo as cli_zoo
from saliency.cli.main import app, main

runner = CliRunner()


@pytest.fixture
def calls(monkeypatch):
    seen = []

    def fake_train(name, epochs, random_seed, out):
        seen.append({"name": name, "epochs": epochs, "random_seed": random_seed, "out": out})
        return [f"trained {name}"]

    monkeypatch.setattr(cli_zoo, "train", fake_train)
    return seen


def test_random_seed_reaches_training(calls):
    result = runner.invoke(app, ["train", "digits", "--epochs", "2", "--random-seed", "7"])
    assert result.exit_code == 0, result.output
    assert calls == [{"name": "digits", "epochs": 2, "random_seed": 7, "out": None}]
    assert "deprecated" not in result.output


def test_random_seed_defaults_to_zero(calls):
    result = runner.invoke(app, ["train", "shapes"])
    assert result.exit_code == 0, result.output
    assert calls[0]["random_seed"] == 0


def test_old_seed_option_still_works_with_a_warning(calls, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "digits", "--seed", "5"])
    assert info.value.code == 0
    assert calls[0]["random_seed"] == 5
    captured = capsys.readouterr()
    assert "trained digits" in captured.out
    assert "--seed is deprecated, use --random-seed" in captured.err


def test_old_and_new_seed_together_are_refused(calls, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "digits", "--seed", "5", "--random-seed", "5"])
    assert info.value.code == 2 and not calls
    assert "give only --random-seed" in capsys.readouterr().err


def test_help_shows_random_seed_only():
    result = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--random-seed" in result.output
    assert "--seed " not in result.output.replace("--random-seed", "")


@pytest.mark.parametrize("out, message", [
    ("{tmp}/x.png", "--out must be a file name ending in .npz (the weights; a .json card goes beside it), got "
                    "{tmp}/x.png"),
    ("{tmp}", "--out {tmp} is a folder; give a file name ending in .npz, e.g. {tmp}/shapes.npz"),
    ("{tmp}/file/w.npz", "cannot write --out {tmp}/file/w.npz: "),
])
def test_an_out_that_cannot_be_written_is_refused_before_training(tmp_path, monkeypatch, capsys, out, message):
    from saliency.models import train as training

    def no_training(*args, **kwargs):
        raise AssertionError("trained although --out cannot be written")

    monkeypatch.setattr(training, "train", no_training)
    (tmp_path / "file").write_text("")          # a file where a folder would have to be created
    with pytest.raises(SystemExit) as info:
        main(["train", "shapes", "--out", out.format(tmp=tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: " + message.format(tmp=tmp_path)) and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]      # no probe file left behind
