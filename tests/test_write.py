"""Files appear whole or not at all (saliency._write)."""
import pytest

from saliency._write import atomic_open, atomic_path, is_part, write_text


def test_the_file_replaces_the_target_only_when_the_block_ends(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with atomic_open(target) as f:
        f.write(b"new")
        assert target.read_bytes() == b"old"          # not yet
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, error):
    target = tmp_path / "out.txt"
    write_text(target, "complete")
    with pytest.raises(error):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise error()
    assert target.read_text() == "complete"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_temporary_names_are_hidden_beside_the_target(tmp_path):
    with atomic_path(tmp_path / "map.png") as tmp:
        assert tmp.parent == tmp_path and is_part(tmp) and tmp.name.startswith(".map.png.")
        tmp.write_bytes(b"x")
    assert not is_part(tmp_path / "map.png")


def test_only_whole_file_modes(tmp_path):
    with pytest.raises(ValueError, match="mode must be"):
        with atomic_open(tmp_path / "a", "ab"):
            pass
