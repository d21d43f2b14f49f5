"""Inputs a method cannot use are refused with an InputError that says what is wrong and where."""
import numpy as np
import pytest

import saliency as sl
from saliency import attribution as A
from saliency import nn
from saliency.attribution import InputError, seeds
from saliency.autograd.errors import LayerInputError

from _attribution_models import make_cnn, make_dense, make_linear, randomize

METHODS = {
    "gradient": lambda m, x: A.gradient(m, x),
    "input_x_gradient": lambda m, x: A.input_x_gradient(m, x),
    "guided_backprop": lambda m, x: A.guided_backprop(m, x),
    "smoothgrad": lambda m, x: A.smoothgrad(m, x, n=2, rng=np.random.default_rng(0)),
    "integrated_gradients": lambda m, x: A.integrated_gradients(m, x, steps=2),
    "gradcam": lambda m, x: A.gradcam(m, x, layer=m[3]),
    "occlusion": lambda m, x: A.occlusion(m, x, window=4, stride=4),
}


def _images(n=2, seed=0):
    return np.random.default_rng(seed).random((n, 3, 12, 12))


@pytest.mark.parametrize("method", METHODS)
def test_every_method_refuses_nan_and_infinite_input_naming_counts_and_places(method):
    x = _images(3)
    x[1, 0, 2, 5] = np.nan
    x[2, 2, 7, 1] = np.inf
    x[2, 1, 0, 0] = np.nan
    with pytest.raises(InputError, match=r"^x holds 2 NaN values and 1 infinite value in images 1, 2 "
                                         r"\(at index \(1, 0, 2, 5\), \(2, 1, 0, 0\), \(2, 2, 7, 1\)\)"):
        METHODS[method](make_cnn(), x)


def test_many_bad_values_are_counted_and_the_first_few_placed():
    x = np.full((3, 4, 4), np.nan)
    with pytest.raises(InputError, match=r"x holds 48 NaN values \(at index \(0, 0, 0\), \(0, 0, 1\), \(0, 0, 2\), "
                                         r"\.\.\.\); a map needs a finite input"):
        A.gradient(make_dense(), x)


def test_values_that_overflow_the_models_dtype_are_refused():
    x = _images(1)
    x[0, 1, 1, 1] = 1e300                       # finite in float64, inf in a float32 model
    with pytest.raises(InputError, match=r"x cast to the model's float32 holds 1 infinite value"):
        A.gradient(make_cnn(dtype=np.float32), x)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype, hint", [(np.uint8, r"x.astype\(np.float32\) / 255"), (np.int64, r"x.astype\(np.float32\)"),
                                         (bool, r"x.astype\(np.float32\)")])
def test_integer_and_bool_images_are_refused_not_used_as_floats(method, dtype, hint):
    x = (_images(1) * 255).astype(dtype)
    with pytest.raises(TypeError, match=rf"^x has dtype {np.dtype(dtype)}; the methods take a floating-point image "
                                        rf"\(values in \[0, 1\] for the zoo's models\): convert it first, e.g. {hint}"):
        METHODS[method](make_cnn(), x)


def test_a_non_finite_baseline_is_refused():
    baseline = np.zeros((3, 12, 12))
    baseline[1, 2, 3] = np.nan
    with pytest.raises(InputError, match=r"^baseline holds 1 NaN value in image 0 \(at index \(0, 1, 2, 3\)\)"):
        A.integrated_gradients(make_cnn(), _images(1), baseline=baseline)


@pytest.mark.parametrize("shape, message", [((0, 3, 12, 12), r"x is an empty batch \(shape \(0, 3, 12, 12\)\)"),
                                            ((1, 3, 0, 12), r"x has shape \(1, 3, 0, 12\): an image needs at least"),
                                            ((0, 12, 12), r"x has shape \(0, 12, 12\)")])
def test_empty_inputs_are_refused(shape, message):
    with pytest.raises(InputError, match=message):
        A.gradient(make_cnn(), np.zeros(shape))


@pytest.mark.parametrize("channels", [1, 4])
def test_a_channel_count_the_first_layer_does_not_take_names_both_counts(channels):
    x = np.random.default_rng(0).random((2, channels, 12, 12))
    with pytest.raises(InputError, match=rf"^the model's first layer takes 3 channels; the input has {channels} "
                                         rf"\(shape \(2, {channels}, 12, 12\)\)$"):
        A.gradient(make_cnn(), x)


def test_the_first_layer_is_found_after_elementwise_preprocessing():
    model = make_cnn()
    with pytest.raises(InputError, match="the model's first layer takes 3 channels; the input has 4"):
        A.gradient(lambda t: model((t - 0.5) * 2.0), np.zeros((1, 4, 12, 12)))


def test_a_flattening_first_layer_names_features():
    model = make_linear(shape=(3, 6, 5))
    with pytest.raises(InputError, match=r"^the model's first layer takes 90 features; the input has 72 "
                                         r"\(2x6x6 flattened\)$"):
        A.gradient(model, np.zeros((1, 2, 6, 6)))


def test_a_mismatch_inside_the_model_is_reported_as_that_layer_not_the_first():
    model = randomize(nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, padding=1)))
    with pytest.raises(LayerInputError, match=r"conv2d with weight of shape \(2, 4, 3, 3\) takes 4 input channels; "
                                              r"its input has 5") as info:
        A.gradient(model, np.zeros((1, 3, 8, 8)))
    assert not isinstance(info.value, InputError)


def test_grouped_convolutions_state_the_channels_they_take():
    x = sl.tensor(np.zeros((1, 6, 5, 5), np.float32))
    w = sl.tensor(np.zeros((4, 2, 3, 3), np.float32))
    with pytest.raises(LayerInputError, match=r"weight of shape \(4, 2, 3, 3\) and groups=2 takes 4 input channels; "
                                              r"its input has 6"):
        sl.conv2d(x, w, groups=2)


def test_receptive_field_and_pixel_seeds_check_the_input_too():
    x = _images(1)
    x[0, 0, 0, 0] = -np.inf
    with pytest.raises(InputError, match="x holds 1 infinite value"):
        A.receptive_field(make_dense(), x, (3, 3))
    with pytest.raises(InputError, match="x holds 1 infinite value"):
        A.gradient(make_dense(), x, seeds.pixels([(1, 1), (2, 2)]))
