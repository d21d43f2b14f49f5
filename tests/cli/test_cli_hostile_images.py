"""`saliency map` and `saliency batch` given hostile images: another format under an image's name
(EPS, which Pillow hands to Ghostscript), rows too long for Pillow's decoders, and paths that are
no regular file (a FIFO must never block). Each is one line and exit code 2."""
import os
import struct
import threading
import zlib

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from saliency.cli.batch import batch_files
from saliency.cli.main import app, main
from saliency.models import data

runner = CliRunner()
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nnewpath 0 0 moveto 10 10 lineto stroke\nshowpage\n"
fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")


@pytest.fixture(scope="module")
def star(tmp_path_factory):
    images, labels = data.shapes(40, seed=31)
    chw = images[int(np.flatnonzero(labels == data.SHAPE_CLASSES.index("star"))[0])]
    path = tmp_path_factory.mktemp("img") / "star.png"
    Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(path)
    return path


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _long_png(path, width=170_000_000):
    """A valid RGB PNG of `width` x 1 grey pixels (0.5 MB): blocks of a million pixels deflated
    once, each ended by a full flush so that its bytes can be repeated."""
    block = b"\x80" * 3_000_000
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(b"\0") + deflate.flush(zlib.Z_FULL_FLUSH)
    body = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    tail = deflate.flush(zlib.Z_FINISH)
    adler = zlib.adler32(b"\0")
    for _ in range(width // 1_000_000):
        adler = zlib.adler32(block, adler)
    stream = b"\x78\xda" + head + body * (width // 1_000_000) + tail + struct.pack(">I", adler)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, 1, 8, 2, 0, 0, 0))
                     + _chunk(b"IDAT", stream) + _chunk(b"IEND", b""))
    return path


def _run(capsys, args, fifo=None):
    """(exit code, stdout, stderr) of main(args), run in a thread that must end within 60 s: if it
    opened `fifo` and waits for a writer, a writer is opened to release it and the test fails."""
    outcome = {}

    def run():
        try:
            main([str(a) for a in args])
            outcome["code"] = 0
        except SystemExit as exc:
            outcome["code"] = exc.code
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(60)
        pytest.fail(f"saliency {args[0]} blocked on the FIFO {fifo}")
    captured = capsys.readouterr()
    return outcome["code"], captured.out, captured.err


def _one_line_error(capsys, args, fifo=None):
    code, _, err = _run(capsys, args, fifo)
    err = err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err, (code, err)
    return err


# --- saliency map ---------------------------------------------------------------------------------

def test_eps_named_png_is_refused_in_one_line(capsys, tmp_path):
    path = tmp_path / "x.png"
    path.write_bytes(EPS)
    err = _one_line_error(capsys, ["map", path, "--out", tmp_path / "o.png"])
    assert err == (f"error: cannot read image '{path}': its first bytes say EPS (Encapsulated Postscript), not a "
                   "raster image format this tool reads (PNG, JPEG, GIF, BMP, TIFF, WEBP or PPM)")
    assert not (tmp_path / "o.png").exists()


def test_png_of_170_million_by_1_pixels_is_refused_in_one_line(capsys, tmp_path):
    path = _long_png(tmp_path / "long.png")
    err = _one_line_error(capsys, ["map", path, "--out", tmp_path / "o.png"])
    assert err == (f"error: cannot read image '{path}': its rows of 170,000,000 pixels are longer than Pillow's "
                   "decoders take (at most 89,478,478 pixels of 24 bits: 2**31 bits a row); make the image narrower "
                   "first")


@fifo_only
def test_a_fifo_given_as_the_image_is_named_and_not_opened(capsys, tmp_path):
    fifo = tmp_path / "x.png"
    os.mkfifo(fifo)
    err = _one_line_error(capsys, ["map", fifo, "--out", tmp_path / "o.png"], fifo)
    assert err == f"error: image file {fifo} is a FIFO (named pipe), not an image file"


@pytest.mark.parametrize("make, said", [
    (lambda p: (p.symlink_to(p.with_name("b.png")), p.with_name("b.png").symlink_to(p)),
     "is a symbolic link loop (too many levels of symbolic links)"),
    (lambda p: p.symlink_to(p.with_name("gone.png")), "is a symbolic link to '{tmp}/gone.png', which does not exist"),
    (lambda p: None, "does not exist"),
])
def test_a_link_loop_a_dangling_link_and_nothing_are_told_apart(capsys, tmp_path, make, said):
    path = tmp_path / "a.png"
    make(path)
    err = _one_line_error(capsys, ["map", path, "--out", tmp_path / "o.png"])
    assert err == f"error: image file {path} {said.format(tmp=tmp_path)}"


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_a_device_given_as_the_image_is_named(capsys, tmp_path):
    err = _one_line_error(capsys, ["map", "/dev/null", "--out", tmp_path / "o.png"])
    assert err == "error: image file /dev/null is a character device, not an image file"


def test_a_symbolic_link_to_an_image_and_an_image_of_another_name_are_read(star, tmp_path):
    link = tmp_path / "link.png"
    link.symlink_to(star)
    renamed = tmp_path / "star.tif"                        # the content says PNG, and PNG is read
    renamed.write_bytes(star.read_bytes())
    for path in (link, renamed):
        result = runner.invoke(app, ["map", str(path), "--out", str(tmp_path / "o.png")])
        assert result.exit_code == 0, result.output
        assert "prediction: star" in result.output


# --- saliency batch -------------------------------------------------------------------------------

@fifo_only
def test_batch_skips_a_fifo_named_like_an_image_and_does_not_hang(capsys, star, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "star.png").write_bytes(star.read_bytes())
    os.mkfifo(folder / "x.png")
    assert batch_files(folder) == [folder / "star.png"]
    code, out, err = _run(capsys, ["batch", folder, "--out", tmp_path / "out"], folder / "x.png")
    assert code == 0 and "wrote 1 of 1 maps" in out, (out, err)


@fifo_only
def test_batch_of_a_folder_holding_only_a_fifo_says_what_it_skipped(capsys, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    os.mkfifo(folder / "x.png")
    (folder / "notes.txt").write_text("not an image")
    err = _one_line_error(capsys, ["batch", folder, "--out", tmp_path / "out"], folder / "x.png")
    assert err.startswith(f"error: {folder} holds no image files (.apng, .bmp, ")
    assert err.endswith("; skipped x.png is a FIFO (named pipe), not an image file")


def test_batch_records_an_eps_named_png_as_a_failed_image(capsys, star, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "star.png").write_bytes(star.read_bytes())
    (folder / "x.png").write_bytes(EPS)
    code, out, err = _run(capsys, ["batch", folder, "--out", tmp_path / "out"])
    assert code == 2 and "wrote 1 of 2 maps" in out, (out, err)
    assert "x.png: cannot read image" in err and "its first bytes say EPS (Encapsulated Postscript)" in err
