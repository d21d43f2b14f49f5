"""Seeds: the v each one builds from an output, every error message, parse() and captions."""
import re

import numpy as np
import pytest

from saliency.attribution import SeedError, seeds

LOGITS = np.arange(30, dtype=np.float32).reshape(3, 10) % 7  # argmax per row: 6, 3, 0
DENSE = np.zeros((2, 3, 128, 128), np.float32)


def test_seed_error_is_a_value_error():
    assert issubclass(SeedError, ValueError)


def test_ones_and_weights_and_target():
    np.testing.assert_array_equal(seeds.ones().vector(DENSE), np.ones_like(DENSE))
    w = np.arange(128, dtype=np.float64)
    v = seeds.weights(w).vector(DENSE)
    assert v.shape == DENSE.shape and v.dtype == DENSE.dtype
    np.testing.assert_array_equal(v[1, 2, 5], w)
    t = np.random.default_rng(0).random((2, 3, 128, 128))
    np.testing.assert_allclose(seeds.target(t).vector(DENSE), t.astype(np.float32), rtol=0, atol=0)


def test_one_hot_predicted_and_classes_vectors():
    v = seeds.one_hot(3).vector(LOGITS)
    expected = np.zeros_like(LOGITS)
    expected[:, 3] = 1
    np.testing.assert_array_equal(v, expected)
    v = seeds.one_hot([1, 2, 9]).vector(LOGITS)
    np.testing.assert_array_equal(np.argwhere(v), [[0, 1], [1, 2], [2, 9]])
    resolved = seeds.predicted().resolve(LOGITS)
    np.testing.assert_array_equal(np.argmax(resolved.vector(LOGITS), axis=1), np.argmax(LOGITS, axis=1))
    assert str(resolved) == "predicted classes 6, 3, 0"
    v = seeds.classes([0, 7]).vector(LOGITS)
    assert v.shape == (2, 3, 10) and seeds.classes([0, 7]).count == 2
    np.testing.assert_array_equal(v[0], seeds.one_hot(0).vector(LOGITS))
    np.testing.assert_array_equal(v[1], seeds.one_hot(7).vector(LOGITS))


def test_pixel_region_and_pixels_vectors():
    v = seeds.pixel(5, 7).vector(DENSE)
    assert v.sum() == 2 * 3 and np.all(v[:, :, 5, 7] == 1)
    v = seeds.pixel(5, 7, channel=1).vector(DENSE)
    assert v.sum() == 2 and np.all(v[:, 1, 5, 7] == 1)
    box = seeds.region((2, 3, 6, 10)).vector(DENSE)
    mask = np.zeros((128, 128), bool)
    mask[2:6, 3:10] = True
    np.testing.assert_array_equal(box, seeds.region(mask).vector(DENSE))
    assert box.sum() == 2 * 3 * 4 * 7  # end-exclusive: rows 2..5, cols 3..9
    v = seeds.pixels([(0, 0), (127, 1)]).vector(DENSE)
    assert v.shape == (2,) + DENSE.shape
    np.testing.assert_array_equal(v[1], seeds.pixel(127, 1).vector(DENSE))


@pytest.mark.parametrize("seed, output, message", [
    (seeds.one_hot(12), np.zeros((1, 10)),
     "class 12 is out of range for an output with 10 classes (valid: 0..9)"),
    (seeds.classes([1, 10]), np.zeros((1, 10)),
     "class 10 is out of range for an output with 10 classes (valid: 0..9)"),
    (seeds.one_hot([1, 2]), np.zeros((3, 10)),
     "one_hot() got 2 class indices for a batch of 3 images; pass one per image or a single int"),
    (seeds.one_hot(1), DENSE, ("class 1 needs a classification output of shape (N, K), but the output has shape "
                               "(2, 3, 128, 128); use ones(), pixel(), region() or weights() for a dense output")),
    (seeds.predicted(), DENSE, "predicted class needs a classification output of shape (N, K)"),
    (seeds.pixel(200, 3), DENSE,
     "pixel (200, 3) is outside the 128x128 output map (rows 0..127, cols 0..127)"),
    (seeds.pixels([(1, 1), (3, 128)]), DENSE,
     "pixel (3, 128) is outside the 128x128 output map (rows 0..127, cols 0..127)"),
    (seeds.pixel(1, 1), np.zeros((1, 10)), ("pixel (1, 1) needs a dense output of shape (N, C, H, W), but the "
                                            "output has shape (1, 10)")),
    (seeds.pixel(1, 1, channel=3), DENSE,
     "channel 3 is out of range for an output with 3 channels (valid: 0..2)"),
    (seeds.region((0, 0, 200, 10)), DENSE,
     ("region box (0, 0, 200, 10) does not fit the 128x128 output map (need r1 <= 128 and c1 <= 128; "
      "the box is end-exclusive)")),
    (seeds.region(np.ones((4, 4), bool)), DENSE,
     "region mask of shape (4, 4) does not fit the 128x128 output map; pass a mask of shape (128, 128)"),
    (seeds.weights(np.ones(5)), DENSE,
     ("weights of shape (5,) do not broadcast to the output shape (2, 3, 128, 128); pass an array of shape "
      "(2, 3, 128, 128) or one that broadcasts to it")),
])
def test_a_seed_that_does_not_fit_the_output_says_why(seed, output, message):
    with pytest.raises(SeedError, match=re.escape(message)):
        seed.vector(output)


@pytest.mark.parametrize("make, message", [
    (lambda: seeds.one_hot(-1), "class must be a non-negative integer, got -1"),
    (lambda: seeds.one_hot(2.5), "class must be a non-negative integer, got 2.5"),
    (lambda: seeds.one_hot(True), "class must be a non-negative integer, got True"),
    (lambda: seeds.one_hot([]), "one_hot() needs a class index or one class index per image, got an empty list"),
    (lambda: seeds.pixel(-1, 0), "pixel row must be a non-negative integer, got -1"),
    (lambda: seeds.region((4, 0, 4, 3)), "region box (4, 0, 4, 3) is empty"),
    (lambda: seeds.region(np.zeros((3, 3), bool)), "region mask selects no pixels"),
    (lambda: seeds.region("top"), "region() takes a boolean mask of shape (H, W) or a box (r0, c0, r1, c1)"),
    (lambda: seeds.region((0.5, 0, 2, 2)), "region() takes a boolean mask"),
    (lambda: seeds.pixels([(1, 2, 3)]), "pixels() takes a list of (row, col) pairs"),
    (lambda: seeds.pixels([]), "pixels() needs at least one (row, col) pair"),
    (lambda: seeds.classes([]), "classes() takes a non-empty list of class indices"),
    (lambda: seeds.weights(np.array(["a"])), "weights() needs a numeric array"),
])
def test_a_malformed_seed_is_refused_when_made(make, message):
    with pytest.raises(SeedError, match=re.escape(message)):
        make()


@pytest.mark.parametrize("text, expected", [
    ("predicted", "predicted class"), ("ones", "all ones"), ("class:3", "class 3"), (" class: 3 ", "class 3"),
    ("pixel:10,20", "pixel (10, 20)"), ("region:1,2,5,9", "region rows 1..4, cols 2..8"), ("CLASS:0", "class 0"),
    ("classes:0,2", "classes 0, 2"), ("pixels:1,2;3,4", "2 pixels (1, 2), (3, 4)"),
    ("segment:3", "class 3 where predicted"), ("segment", "the commonest predicted class where predicted"),
    ("pixel:10,20@2", "pixel (10, 20) channel 2"),
    ("region:1,2,5,9@0", "region rows 1..4, cols 2..8 channel 0"),
    ("pixels:1,2;3,4@1", "2 pixels (1, 2), (3, 4) channel 1"),
])
def test_parse_reads_the_command_line_forms(text, expected):
    assert seeds.parse(text).describe() == expected


@pytest.mark.parametrize("text", ["", "foo", "class", "class:", "class:x", "class:1,2", "pixel:1", "pixel:1,2,3",
                                  "region:1,2,3", "predicted:1", "ones:", "pixel:a,b", "classes:", "classes:1;2",
                                  "pixels:1,2;3", "pixels:1,2,3", "segment:", "segment:1,2"])
def test_parse_refuses_anything_else_and_lists_the_forms(text):
    message = (f"cannot read seed {text!r}; use one of: predicted, ones, class:K, segment or segment:K, pixel:ROW,COL, "
               f"region:R0,C0,R1,C1, classes:K1,K2,..., pixels:ROW,COL;ROW,COL;... (pixel, region and pixels "
               f"take @K for output channel K only: pixel:ROW,COL@K)")
    with pytest.raises(SeedError, match=re.escape(message)):
        seeds.parse(text)


def test_parse_of_a_valid_form_with_bad_values_gives_the_value_error():
    with pytest.raises(SeedError, match="class must be a non-negative integer, got -2"):
        seeds.parse("class:-2")


def test_captions():
    assert str(seeds.one_hot(3)) == "class 3"
    assert seeds.one_hot(1).describe(classes=["square", "circle"]) == "class 1 (circle)"
    assert str(seeds.classes([1, 4])) == "classes 1, 4"
    assert str(seeds.pixels([(1, 2), (3, 4)])) == "2 pixels (1, 2), (3, 4)"
    assert str(seeds.pixels([(i, i) for i in range(6)])).endswith("(3, 3), ...")
    assert str(seeds.region(np.eye(3, dtype=bool))) == "region of 3 pixels"
    assert str(seeds.weights(np.ones((1, 10)))) == "weights of shape (1, 10)"
    assert str(seeds.target(np.ones((1, 10)))) == "target of shape (1, 10)"
    assert repr(seeds.ones()) == "<seed: all ones>"


def test_segment_is_the_class_k_logits_of_the_pixels_predicted_k():
    y = np.random.default_rng(0).standard_normal((2, 4, 5, 6))
    seed = seeds.segment(2).resolve(y)
    v = seed.vector(y)
    expected = np.zeros_like(y)
    expected[:, 2] = y.argmax(axis=1) == 2
    np.testing.assert_array_equal(v, expected)
    assert seed.describe(["bg", "a", "cat", "dog"]) == f"class 2 (cat) where predicted ({int(expected.sum())} pixels)"
    # resolved at x: the same v for another output of the same shape (smoothgrad's noisy copies, IG's path)
    np.testing.assert_array_equal(seed.vector(-y), v)
    np.testing.assert_array_equal(seeds.segment(2).vector(y), v)


def test_segment_without_a_class_takes_each_images_commonest_predicted_class():
    y = np.zeros((2, 3, 4, 4))
    y[0, 1] = 1.0                       # image 0: every pixel predicted class 1 ...
    y[0, 2, :1] = 2.0                   # ... but the top row, class 2
    y[1, 2, :3] = 2.0                   # image 1: three rows class 2, the last row class 0
    seed = seeds.segment().resolve(y)
    expected = np.zeros_like(y)
    expected[0, 1, 1:] = 1.0
    expected[1, 2, :3] = 1.0
    np.testing.assert_array_equal(seed.vector(y), expected)
    assert seed.describe(["bg", "cat", "dog"]) == "classes 1 (cat), 2 (dog) where predicted (24 pixels)"


def test_a_segmentation_models_default_seed_is_its_commonest_class_and_other_dense_outputs_ones():
    import saliency as sl
    from saliency import attribution as A, nn

    class Segmenter(nn.Module):
        task = "segmentation"

        def forward(self, x):
            return sl.cat([x[:, :1] * 0.0, x[:, :1] * 2.0 + 1.0, x[:, 1:2]], dim=1)  # class 1 wins where x0 > -1

    x = np.random.default_rng(0).uniform(-0.5, 0.5, (1, 3, 6, 6)).astype(np.float32)
    a = A.gradient(Segmenter(), x)
    assert "class 1 where predicted" in a.seed.describe()
    expected = np.zeros_like(x)
    expected[:, 0] = 2.0 * (2.0 * x[:, 0] + 1.0 > np.maximum(0.0, x[:, 1]))
    np.testing.assert_array_equal(a.map, expected)
    plain = Segmenter()
    plain.task = None
    assert A.gradient(plain, x).seed.describe() == "all ones"


@pytest.mark.parametrize("seed, output, message", [
    (seeds.segment(1), np.zeros((1, 10)), "needs a segmentation output of shape (N, classes, H, W)"),
    (seeds.segment(4), np.zeros((1, 4, 3, 3)), "channel 4 is out of range for an output with 4 channels"),
])
def test_segment_that_does_not_fit_says_why(seed, output, message):
    with pytest.raises(SeedError, match=re.escape(message)):
        seed.vector(output)


@pytest.mark.parametrize("text", ["class:1@2", "pixel:1,2@", "pixel:1,2@x", "pixel:1,2@-1", "ones@1", "segment:1@1"])
def test_a_channel_follows_only_pixel_region_and_pixels(text):
    with pytest.raises(SeedError, match=re.escape("@K (a non-negative channel) follows only pixel, region or pixels")):
        seeds.parse(text)


def test_a_pixel_seed_with_a_channel_takes_that_channel_only():
    y = np.zeros((1, 3, 4, 4))
    v = seeds.parse("pixel:1,2@2").vector(y)
    assert v.sum() == 1 and v[0, 2, 1, 2] == 1
    assert seeds.parse("pixel:1,2@2").describe(["bg", "cat", "dog"]) == "pixel (1, 2) channel 2 (dog)"
    assert seeds.parse("region:0,0,2,2@1").vector(y)[0, 1].sum() == 4
