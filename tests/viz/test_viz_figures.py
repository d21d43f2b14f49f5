"""saliency.viz.figures: grid, panels, heatmap_figure, channel_panels, render."""
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.figure import Figure

from saliency.viz import (
    VizError,
    channel_panels,
    colorize,
    default_title,
    grid,
    heatmap_figure,
    normalize,
    panels,
    render,
    to_rgb,
)

RNG = np.random.default_rng(0)
A, B = RNG.normal(size=(3, 8, 8)), RNG.normal(size=(3, 8, 8))
IMAGE = RNG.random((3, 8, 8))


def _pictures(fig):
    """The arrays shown, panel by panel, as fig.panel_axes nests them."""
    return [[np.asarray(ax.images[0].get_array()) for ax in row] for row in fig.panel_axes]


def _colorbars(fig):
    """The colour-bar axes: the visible axes that are not panels."""
    panel_ids = {id(ax) for row in fig.panel_axes for ax in row}
    return [ax for ax in fig.axes if id(ax) not in panel_ids and ax.axison]


def _n_image_panels(fig):
    return sum(1 for ax in fig.axes if ax.images)


# --- no pyplot --------------------------------------------------------------------------------

def test_import_and_render_do_not_import_pyplot():
    code = ("import sys, numpy as np, saliency.viz as viz\n"
            "assert 'matplotlib.pyplot' not in sys.modules, 'import'\n"
            "fig = viz.grid([[np.ones((4, 4)), np.zeros((4, 4))]], images=np.zeros((3, 4, 4)))\n"
            "viz.render(fig)\n"
            "viz.channel_panels(np.zeros((3, 4, 4)), np.ones((3, 4, 4)))\n"
            "assert 'matplotlib.pyplot' not in sys.modules, 'render'\n")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


# --- panel counts and panel_axes --------------------------------------------------------------

def test_panels_have_one_image_panel_per_map_plus_the_image():
    fig = panels([A, B, A], image=IMAGE)
    assert isinstance(fig, Figure)
    assert _n_image_panels(fig) == 4
    assert [len(row) for row in fig.panel_axes] == [4]
    shown = _pictures(fig)[0]
    np.testing.assert_array_equal(shown[0], to_rgb(IMAGE))
    np.testing.assert_array_equal(shown[2], colorize(normalize(B)))


def test_grid_panel_axes_match_the_cells():
    fig = grid([[A, B], [B]], images=[IMAGE, None], titles=[["a", "b"], ["c"]])
    assert [len(row) for row in fig.panel_axes] == [3, 1]
    assert _n_image_panels(fig) == 4
    assert [ax.get_title() for row in fig.panel_axes for ax in row] == ["image", "a", "b", "c"]
    np.testing.assert_array_equal(_pictures(fig)[1][0], colorize(normalize(B)))
    # every panel Axes is one of the figure's, in the cell the caller expects
    assert fig.panel_axes[0][2].get_subplotspec().colspan.start == 2
    assert fig.panel_axes[1][0].get_subplotspec().rowspan.start == 1


def test_panel_axes_come_first_in_fig_axes():
    # samples/gallery.py still slices fig.axes[r * n_cols:(r + 1) * n_cols]; colour bars must come after
    fig = grid([[A, B], [B, A]], images=IMAGE, shared_scale=True)
    assert fig.axes[:6] == [ax for row in fig.panel_axes for ax in row]
    fig = channel_panels(IMAGE, A)
    assert fig.axes[:5] == fig.panel_axes[0]


def test_grid_takes_a_batch_of_images_one_per_row():
    images = RNG.random((2, 3, 8, 8))
    fig = grid([[A], [B]], images=images)
    shown = _pictures(fig)
    np.testing.assert_array_equal(shown[0][0], to_rgb(images[0]))
    np.testing.assert_array_equal(shown[1][0], to_rgb(images[1]))


def test_rgb_reduction_fills_three_panels_on_one_scale():
    fig = panels([A], reduce="rgb", titles=["grad"])
    assert [ax.get_title() for ax in fig.panel_axes[0]] == ["grad R", "grad G", "grad B"]
    expected = colorize(normalize(A, reduce="rgb"))
    for c, picture in enumerate(_pictures(fig)[0]):
        np.testing.assert_array_equal(picture, expected[c])


def test_reduce_per_map_puts_a_one_channel_map_beside_an_rgb_one():
    fig = panels([A[:1], B], reduce=["sum", "rgb"], titles=["out", "grad"])
    assert [ax.get_title() for ax in fig.panel_axes[0]] == ["out", "grad R", "grad G", "grad B"]
    pictures = _pictures(fig)[0]
    np.testing.assert_array_equal(pictures[0], colorize(normalize(A[:1])))
    np.testing.assert_array_equal(pictures[3], colorize(normalize(B, reduce="rgb"))[2])
    with pytest.raises(VizError, match="reduce must be a name .* or a list of lists nested like rows"):
        grid([[A, B]], reduce=[["sum"]])
    with pytest.raises(VizError, match="shared_scale=True needs one reduce"):
        panels([A, B], reduce=["sum", "rgb"], shared_scale=True)


def test_heatmap_figure_has_one_or_two_panels():
    assert _n_image_panels(heatmap_figure(A)) == 1
    fig = heatmap_figure(A, image=IMAGE, title="x")
    assert _n_image_panels(fig) == 2 and fig.panel_axes[0][1].get_title() == "x"


def test_channel_panels_show_image_channels_and_sum():
    fig = channel_panels(IMAGE, A, title="three channels")
    assert [ax.get_title() for ax in fig.panel_axes[0]] == ["image", "R", "G", "B", "sum"]
    assert _n_image_panels(fig) == 5
    assert fig.get_suptitle() == "three channels"
    fig = channel_panels(IMAGE, A[:2])
    assert [ax.get_title() for ax in fig.panel_axes[0]] == ["image", "channel 0", "channel 1", "sum"]


def test_channel_panels_resize_a_smaller_map_to_the_image():
    image = RNG.random((3, 16, 16))
    fig = channel_panels(image, A)
    assert all(p.shape == (16, 16, 3) for p in _pictures(fig)[0])


def test_channel_panels_refuse_many_channels():
    with pytest.raises(VizError, match=r"attr has 5 channels \(shape \(5, 8, 8\)\); channel_panels takes"):
        channel_panels(IMAGE, np.zeros((5, 8, 8)))


def test_overlay_panels_blend_the_row_image():
    opaque = _pictures(panels([A], image=IMAGE, alpha=1.0))[0]
    np.testing.assert_array_equal(opaque[1], colorize(normalize(A)))
    clear = _pictures(panels([A], image=IMAGE, alpha=0.0))[0]
    np.testing.assert_array_equal(clear[1], to_rgb(IMAGE))


# --- scales and colour bars -------------------------------------------------------------------

def test_shared_scale_tells_a_map_from_twice_the_map():
    own = _pictures(panels([A, 2 * A]))[0]
    np.testing.assert_array_equal(own[0], own[1])
    shared = _pictures(panels([A, 2 * A], shared_scale=True))[0]
    assert not np.array_equal(shared[0], shared[1])


def test_shared_scale_draws_one_colour_bar():
    assert len(_colorbars(panels([A, B, A]))) == 3
    assert len(_colorbars(panels([A, B, A], shared_scale=True))) == 1
    assert len(_colorbars(grid([[A, B], [B, A]], images=IMAGE, shared_scale=True))) == 1
    assert len(_colorbars(panels([A, B], vmax=2.0))) == 1
    assert len(_colorbars(panels([A, B], shared_scale=True, colorbar=False))) == 0
    assert len(_colorbars(panels([A], reduce="rgb"))) == 1         # three channels on one scale


def test_shared_colour_bar_is_in_map_units():
    (bar,) = _colorbars(panels([A, B], vmax=3.0, sign="all"))
    assert bar.get_ylim() == pytest.approx((-3.0, 3.0))
    (bar,) = _colorbars(panels([A, B], vmax=3.0, sign="negative"))
    assert bar.get_ylim() == pytest.approx((0.0, 3.0))


def test_channel_panels_share_a_bar_for_the_channels_and_keep_one_for_the_sum():
    assert len(_colorbars(channel_panels(IMAGE, A))) == 2
    assert len(_colorbars(channel_panels(IMAGE, A, shared_scale=False))) == 4


# --- per-map vmax -----------------------------------------------------------------------------

def test_vmax_list_gives_each_map_its_own_scale():
    shown = _pictures(panels([A, A, A], vmax=[1.0, 4.0, None]))[0]
    np.testing.assert_array_equal(shown[0], colorize(normalize(A, vmax=1.0)))
    np.testing.assert_array_equal(shown[1], colorize(normalize(A, vmax=4.0)))
    np.testing.assert_array_equal(shown[2], colorize(normalize(A)))
    nested = _pictures(grid([[A], [A, B]], vmax=[[2.0], [0.5, None]]))
    np.testing.assert_array_equal(nested[0][0], colorize(normalize(A, vmax=2.0)))
    np.testing.assert_array_equal(nested[1][0], colorize(normalize(A, vmax=0.5)))
    np.testing.assert_array_equal(nested[1][1], colorize(normalize(B)))


def test_vmax_list_bars_show_each_scale():
    bars = _colorbars(panels([A, A], vmax=[1.0, 4.0]))
    assert sorted(bar.get_ylim()[1] for bar in bars) == pytest.approx([1.0, 4.0])


@pytest.mark.parametrize("vmax, message", [
    ([[1.0]], r"vmax must be a number, None, or a list of lists nested like rows"),
    ([[1.0, 2.0], [1.0]], r"vmax must be a number, None, or a list of lists nested like rows"),
    ([[1.0, -2.0], [1.0, 1.0]], r"vmax\[0\]\[1\] must be a finite number > 0 or None, got -2\.0"),
    ("big", r"vmax must be a number, None, or a list of lists"),
])
def test_bad_vmax_lists(vmax, message):
    with pytest.raises(VizError, match=message):
        grid([[A, B], [A, B]], vmax=vmax)


def test_vmax_list_and_shared_scale_together_are_refused():
    with pytest.raises(VizError, match="pass a list vmax or shared_scale, not both"):
        panels([A, B], vmax=[1.0, 2.0], shared_scale=True)


# --- titles fit -------------------------------------------------------------------------------

def _title_fits(fig, ax):
    render(fig)
    renderer = fig.canvas.get_renderer()
    title, frame = ax.title.get_window_extent(renderer), fig.bbox
    return frame.y0 <= title.y0 and title.y1 <= frame.y1 and frame.x0 <= title.x0 and title.x1 <= frame.x1


@pytest.mark.parametrize("lines", [2, 3])
def test_multi_line_titles_fit_and_panels_keep_their_size(lines):
    one = panels([A], titles=["d y / d x"], colorbar=False)
    many = panels([A], titles=["\n".join(["d y / d x"] * lines)], colorbar=False)
    assert _title_fits(one, one.panel_axes[0][0]) and _title_fits(many, many.panel_axes[0][0])
    size = one.panel_axes[0][0].get_window_extent().height
    assert many.panel_axes[0][0].get_window_extent().height == pytest.approx(size, rel=0.005)


def test_figure_title_and_row_titles_leave_panels_their_size():
    plain = grid([[A, B], [B, A]], colorbar=False)
    titled = grid([[A, B], [B, A]], titles=[["a\nb", "c"], ["d", "e"]], row_titles=["first\nrow", "second"],
                  colorbar=False)
    render(plain)
    size = plain.panel_axes[0][0].get_window_extent().height
    assert _title_fits(titled, titled.panel_axes[0][0])
    assert titled.panel_axes[0][0].get_window_extent().height >= 0.995 * size      # not shrunk
    fig = channel_panels(IMAGE, A, title="first line\nsecond line", colorbar=False)
    render(fig)
    text = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert text.y1 <= fig.bbox.y1


# --- zero and constant maps, rendering --------------------------------------------------------

@pytest.mark.parametrize("sign", ["abs", "positive", "negative", "all"])
def test_zero_and_constant_maps_render_without_warnings(sign):
    maps = [np.zeros((3, 8, 8)), np.full((8, 8), 2.0), np.full((8, 8), -1.0)]
    for fig in (panels(maps, sign=sign), panels(maps, sign=sign, shared_scale=True),
                channel_panels(IMAGE, np.zeros((3, 8, 8)), sign=sign), heatmap_figure(maps[1], sign=sign)):
        pixels = render(fig)
        assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[-1] == 3


def test_render_has_the_figure_size_in_pixels():
    fig = heatmap_figure(A, panel_size=2.0)
    width, height = fig.get_size_inches() * fig.dpi
    assert render(fig).shape == (round(height), round(width), 3)


# --- titles and errors ------------------------------------------------------------------------

def test_default_title_from_method_and_seed():
    assert default_title(np.zeros(3)) is None
    assert default_title(SimpleNamespace(method="gradient", seed=3)) == "gradient · 3"
    assert default_title(SimpleNamespace(method=np.sum, seed=None)) == "sum"
    assert default_title(SimpleNamespace(method=None, seed="x" * 40)) == "str"
    fig = panels([SimpleNamespace(method="smoothgrad", seed=1, map=A)])
    assert fig.panel_axes[0][0].get_title() == "smoothgrad · 1"


@pytest.mark.parametrize("call, message", [
    (lambda: grid([]), r"rows is empty; pass a list of lists of maps, e\.g\. \[\[attr\]\]"),
    (lambda: grid([[A], [B]], titles=[["a"]]), "titles must have the same nesting as rows"),
    (lambda: grid([[A], [B]], row_titles=["a"]), "row_titles has 1 entries for 2 rows"),
    (lambda: grid([[A], [B]], images=[IMAGE]), "images has 1 entries for 2 rows"),
    (lambda: panels([np.zeros(5)]), r"attr must have shape \(H, W\), \(C, H, W\) or \(1, C, H, W\)"),
])
def test_figure_errors(call, message):
    with pytest.raises(VizError, match=message):
        call()


def test_a_long_title_is_broken_into_lines_that_do_not_run_into_the_next_panel():
    rng = np.random.default_rng(0)
    long = "gradient · class 1 (aeroplane) where predicted (21760 pixels)"
    fig = panels([rng.random((1, 16, 16)), rng.random((1, 16, 16))], titles=["model output", long])
    first, second = fig.panel_axes[0]
    assert first.get_title() == "model output"
    assert second.get_title().replace("\n", " ") == long and "\n" in second.get_title()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title_box = second.title.get_window_extent(renderer)
    assert title_box.x0 >= first.get_window_extent(renderer).x1  # clear of the panel on its left
