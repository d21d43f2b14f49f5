"""What the store tests of the explore page share: a store as `saliency batch` and `saliency
evaluate` write it, and a server for it as `saliency explore STORE` builds it."""
import json
from pathlib import Path

import pytest

from saliency import attribution, explore
from saliency.cli.evaluate import store_at
from saliency.cli.explore import explorer
from saliency.cli.main import main

IMAGES = Path(__file__).resolve().parents[2] / "samples" / "images"


def run(capsys, *args):
    """(exit code, stdout, stderr) of `saliency ARGS` run in this process."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def made_store(folder):
    """The shapes classifier's gradient maps of the sample images in `folder` (saliency batch), and
    their evaluation beside them (saliency evaluate --out FOLDER): the folder."""
    for args in (["batch", IMAGES, "--out", folder], ["evaluate", folder, "--out", folder, "--sample", "0"]):
        with pytest.raises(SystemExit) as info:
            main([str(a) for a in args])
            raise SystemExit(0)
        assert info.value.code == 0, args
    return folder


def opened(folder):
    """(the store at `folder`, its evaluation.json's entry)."""
    store = attribution.open_store(store_at(folder))
    entry = next(iter(json.loads((folder / "evaluation.json").read_text()).values()))
    return store, entry


def served(folder, **options):
    """A started explore Server for the store in `folder`, made as the command line makes it; its notes."""
    made, notes, _ = explorer(folder, options.get("model"), None, None, None, options.get("evaluation"), None)
    return explore.Server(made).start(), notes
