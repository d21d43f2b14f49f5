"""saliency.viz.value_panels: maps in their own units, with labelled colour bars, over the image or alone."""
import numpy as np
import pytest

from saliency.viz import VizError, render, value_panels

RNG = np.random.default_rng(0)
IMAGE = RNG.random((3, 16, 12))


def test_panels_keep_the_values_and_label_their_bars():
    coarse = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])       # a value every 6 px, with a hole
    depth = RNG.random((16, 12)) * 20
    fig = value_panels([depth, coarse], image=IMAGE, alpha=0.5, titles=["depth", "radius"],
                       labels=["depth (m)", "radius (input px)"], extents=[None, (-0.5, 17.5, 11.5, -0.5)],
                       vmax=[None, 10.0])
    _image_ax, depth_ax, radius_ax = fig.panel_axes[0]
    assert [ax.get_title() for ax in fig.panel_axes[0]] == ["image", "depth", "radius"]
    shown = radius_ax.images[-1]
    np.testing.assert_array_equal(shown.get_array().filled(np.nan), coarse)
    assert shown.get_extent() == [-0.5, 17.5, 11.5, -0.5] and shown.get_clim() == (0.0, 10.0)
    assert depth_ax.images[-1].get_clim() == (0.0, float(depth.max()))
    assert radius_ax.get_xlim() == (-0.5, 11.5) and radius_ax.get_ylim() == (15.5, -0.5)   # the image's frame
    assert [bar.ax.get_ylabel() for bar in fig.colorbars] == ["depth (m)", "radius (input px)"]
    picture = render(fig)
    assert picture.dtype == np.uint8 and picture.ndim == 3


def test_maps_alone_and_all_nan():
    fig = value_panels([np.full((4, 5), np.nan)], vmin=None)
    assert len(fig.panel_axes[0]) == 1 and fig.panel_axes[0][0].images[0].get_clim() == (0.0, 1.0)
    render(fig)


@pytest.mark.parametrize("kwargs, message", [
    ({"maps": []}, "maps is empty"),
    ({"maps": [np.zeros(3)]}, r"maps\[0\] must be a 2-D array"),
    ({"maps": [np.zeros((2, 2))], "titles": ["a", "b"]}, "titles has 2 entries for 1 maps"),
    ({"maps": [np.zeros((2, 2))], "alpha": 0.5}, "needs an image"),
    ({"maps": [np.zeros((2, 2))], "vmax": np.inf}, "vmax must be a finite number"),
])
def test_errors(kwargs, message):
    with pytest.raises(VizError, match=message):
        value_panels(**kwargs)
