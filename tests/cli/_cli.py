"""What the command-line tests share: running `saliency` in this process and reading what it said."""
import pytest

from saliency.cli.main import main


def run_cli(capsys, *args):
    """(exit code, stdout, stderr) of `saliency ARGS` run through its console entry point (0 when it
    returns normally)."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err
