"""An Attribution shows itself: in a notebook (`_repr_png_`), as a Figure, on an Axes of the user's,
in a window and in a file, with the panels `saliency map` draws."""
import io

import matplotlib
import numpy as np
import pytest
from PIL import Image

from saliency import attribution as A
from saliency import models, viz

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def shapes():
    return models.load("shapes")


@pytest.fixture(scope="module")
def images():
    return models.data.shapes(3, seed=11)[0]


def _titles(fig):
    return [ax.get_title() for ax in fig.panel_axes[0]]


def test_a_notebook_shows_the_picture_saliency_map_draws(shapes, images):
    attr = A.gradient(shapes, images[0])
    png = attr._repr_png_()
    picture = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert picture.ndim == 3 and picture.shape[1] > picture.shape[0] > 100  # image and map side by side
    predicted = int(np.argmax(attr.output))
    assert _titles(attr.figure()) == ["image", f"gradient · predicted class {predicted} "
                                               f"({shapes.classes[predicted]})"]


def test_the_image_of_a_batch_is_chosen_by_index_and_the_style_by_its_fields(shapes, images):
    attr = A.gradient(shapes, images)
    fig = attr.figure(index=2, overlay=True, sign="all")
    shown = fig.panel_axes[0][0].images[0].get_array()
    np.testing.assert_array_equal(shown, viz.to_rgb(images[2]))
    with pytest.raises(viz.VizError, match="index 3 is out of range for the 3 images of the result"):
        attr.figure(index=3)
    with pytest.raises(viz.VizError, match="unknown sign 'both'"):
        attr.figure(sign="both")


def test_k_seeds_give_a_panel_each_named_by_its_seed(shapes, images):
    attr = A.gradient(shapes, images[:2], A.seeds.classes([0, 3]))
    assert _titles(attr.figure(index=1)) == ["image", "gradient · class 0 (circle)", "gradient · class 3 (star)"]


def test_a_dense_output_is_drawn_beside_its_map():
    depth = models.load("depth")
    scene = models.data.scenes(1, seed=3)[0][0]
    attr = A.gradient(depth, scene, A.seeds.pixel(50, 60))
    assert _titles(attr.figure()) == ["image", "model output", "gradient · pixel (50, 60)"]


def test_plot_draws_the_heatmap_on_the_users_axes(shapes, images):
    import matplotlib.pyplot as plt

    attr = A.gradient(shapes, images)
    fig, ax = plt.subplots()
    try:
        assert attr.plot(ax, index=1) is ax
        np.testing.assert_array_equal(ax.images[0].get_array(), viz.heatmap(attr.map[1]))
        ax2 = fig.add_subplot(2, 2, 4)
        attr.plot(ax2, index=0, overlay=True)
        np.testing.assert_array_equal(ax2.images[0].get_array(), viz.overlay(images[0], attr.map[0]))
    finally:
        plt.close(fig)


def test_save_writes_the_figure_and_show_does_not_fail_headless(shapes, images, tmp_path):
    attr = A.integrated_gradients(shapes, images[1], steps=4)
    path = attr.save(tmp_path / "ig.png", reduce="max_abs")
    assert np.asarray(Image.open(path)).shape[-1] in (3, 4)
    attr.show()  # the Agg backend: nothing to show, nothing raised


def test_a_stores_maps_show_themselves_by_index(shapes, images, tmp_path):
    paths = []
    for i, chw in enumerate(images):
        paths.append(tmp_path / f"img{i}.png")
        Image.fromarray((np.moveaxis(chw, 0, -1) * 255).round().astype(np.uint8)).save(paths[-1])
    store = A.batch(shapes, paths, "gradient", out=tmp_path / "out")
    attr = store.attribution(1)
    np.testing.assert_array_equal(attr.map, np.asarray(store.maps[1]))
    np.testing.assert_allclose(attr.input, viz.load_image(paths[1])[0])
    assert _titles(store.figure(1)) == ["image", f"gradient · predicted class {store.predicted[1]}"]
    assert np.asarray(Image.open(store.save(2, tmp_path / "s.png"))).ndim == 3
    with pytest.raises(A.StoreError, match="index 3 is out of range for the 3 images of"):
        store.figure(3)


def test_an_output_of_several_channels_is_drawn_as_each_pixels_argmax_on_the_channels_scale():
    import saliency as sl
    from saliency import nn

    stripes = np.tile(np.array([0.0, 1.0], np.float32), 4)[None, None, None, :]  # odd columns 1

    class Segmenter(nn.Module):
        task = "segmentation"

        def forward(self, x):  # class 2 in the odd columns, class 0 in the even ones
            odd = sl.tensor(np.repeat(stripes, 8, axis=2))
            return sl.cat([x[:, :1] * 0 + 1 - odd, x[:, 1:2] * 0, x[:, 2:3] * 0 + 2 * odd], dim=1)

    x = np.random.default_rng(0).random((3, 8, 8)).astype(np.float32)
    fig = A.gradient(Segmenter(), x).figure()
    assert _titles(fig)[1] == "argmax of the 3 channels"
    picture = np.asarray(fig.panel_axes[0][1].images[0].get_array())
    assert picture.shape[:2] == (8, 8)
    np.testing.assert_array_equal(picture[:, 0::2], np.broadcast_to(picture[:1, :1], picture[:, 0::2].shape))
    np.testing.assert_array_equal(picture[:, 1::2], np.broadcast_to(picture[:1, 1:2], picture[:, 1::2].shape))
    assert not np.array_equal(picture[0, 0], picture[0, 1])  # two classes, two colours
    limits = [ax.get_ylim() for ax in fig.axes if ax not in fig.panel_axes[0]]  # the colour bars'
    assert (0.0, 2.0) in [tuple(round(v, 6) for v in lim) for lim in limits], limits  # the classes' scale
