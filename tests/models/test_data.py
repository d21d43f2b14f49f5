"""The zoo's data generators: determinism, shapes and ranges, and that they draw what they claim.

References are independent of the generators: closed-form areas and hand-picked points for each
shape class, the pinhole camera written out again for the ground plane and for back-projecting
object pixels onto their surfaces, scikit-learn's own loader and torch's bilinear resize.
"""
import importlib.util

import numpy as np
import pytest

from saliency.models import data

HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None
needs_sklearn = pytest.mark.skipif(not HAS_SKLEARN, reason="scikit-learn (the 'train' extra) is not installed")


# ---------------------------------------------------------------- shapes

@pytest.fixture(scope="module")
def drawn():
    return data.shapes(320, seed=0, return_info=True)


def test_shapes_arrays_and_ranges(drawn):
    images, labels, info = drawn
    assert images.shape == (320, 3, 64, 64) and images.dtype == np.float32
    assert labels.shape == (320,) and labels.dtype == np.int64
    assert images.min() >= 0 and images.max() <= 1 and np.isfinite(images).all()
    assert len(data.SHAPE_CLASSES) >= 8 and len(set(data.SHAPE_CLASSES)) == len(data.SHAPE_CLASSES)
    assert (np.bincount(labels, minlength=len(data.SHAPE_CLASSES)) >= 15).all()   # every class, roughly evenly
    assert info["mask"].shape == (320, 64, 64) and info["mask"].min() >= 0 and info["mask"].max() <= 1


def test_shapes_are_deterministic_per_seed():
    a, b, c = data.shapes(6, seed=3), data.shapes(6, seed=3), data.shapes(6, seed=4)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_shapes_reject_a_bad_count():
    with pytest.raises(ValueError, match="n must be a non-negative int"):
        data.shapes(-1)


def _lens(r1, r2, d):
    """Area of the intersection of two discs (radii r1, r2, centres d apart)."""
    a1 = r1 ** 2 * np.arccos((d ** 2 + r1 ** 2 - r2 ** 2) / (2 * d * r1))
    a2 = r2 ** 2 * np.arccos((d ** 2 + r2 ** 2 - r1 ** 2) / (2 * d * r2))
    return a1 + a2 - 0.5 * np.sqrt((-d + r1 + r2) * (d + r1 - r2) * (d - r1 + r2) * (d + r1 + r2))


def _polar(radius, degrees):
    a = np.radians(np.asarray(degrees, float))
    return np.stack([radius * np.cos(a), radius * np.sin(a)], axis=1)


EVERY_45 = np.arange(0, 360, 45)
# per class: area in units of circumradius^2, points (shape frame) that must be covered, points that must not be
CENTRE = [[0.0, 0.0]]
EXPECTED = {
    "circle": (np.pi, _polar(0.8, EVERY_45), _polar(1.2, EVERY_45)),
    "square": (4 * 0.7 ** 2, _polar(0.78, EVERY_45[1::2]), _polar(0.86, EVERY_45[::2])),
    "triangle": (3 * np.sqrt(3) / 4,
                 np.vstack([CENTRE, _polar(0.65, [60, 180, 300])]),
                 _polar(0.68, [0, 120, 240])),
    "star": (10 * 0.5 * 0.45 * np.sin(np.radians(36)),
             np.vstack([CENTRE, _polar(0.55, [0, 72, 144, 216, 288])]),
             _polar(0.75, [36, 108, 180, 252, 324])),
    "cross": (2 * (1.88 * 0.6) - 0.36,
              np.vstack([CENTRE, _polar(0.75, EVERY_45[::2])]),
              _polar(0.75, EVERY_45[1::2])),
    "ring": (np.pi * (1 - 0.44 ** 2),
             _polar(0.72, EVERY_45),
             np.vstack([CENTRE, _polar(0.22, EVERY_45), _polar(1.2, EVERY_45)])),
    "hexagon": (3 * np.sqrt(3) / 2,
                _polar(0.8, [30, 90, 150, 210, 270, 330]),
                _polar(1.02, [0, 60, 120, 180, 240, 300])),
    "crescent": (np.pi - _lens(1.0, 0.8, 0.45),
                 [[-0.72, 0], [-0.45, 0.6], [-0.45, -0.6]],
                 [[0, 0], [0.6, 0], [0.3, 0.5], [0.3, -0.5]]),
}


def _pixels(info, i, points):
    """The (row, col) of the pixels holding shape-frame points of image i; points off the image dropped."""
    c, s = np.cos(info["angle"][i]), np.sin(info["angle"][i])
    local = np.asarray(points, float).reshape(-1, 2) * info["radius"][i]
    x = info["center"][i, 0] + c * local[:, 0] - s * local[:, 1]
    y = info["center"][i, 1] + s * local[:, 0] + c * local[:, 1]
    keep = (x >= 0) & (x < 64) & (y >= 0) & (y < 64)
    return np.floor(y[keep]).astype(int), np.floor(x[keep]).astype(int)


@pytest.mark.parametrize("name", data.SHAPE_CLASSES)
def test_each_class_draws_its_shape(drawn, name):
    images, labels, info = drawn
    assert name in EXPECTED, f"no hand-checked properties for shape class {name!r}"
    area, inside, outside = EXPECTED[name]
    k = data.SHAPE_CLASSES.index(name)
    for i in np.flatnonzero(labels == k):
        mask, colour, r = info["mask"][i], info["color"][i], info["radius"][i]
        # anti-aliased coverage sums to the analytic area
        np.testing.assert_allclose(mask.sum(), area * r ** 2, rtol=0.02, err_msg=f"{name} #{i}")
        # nothing is drawn outside the circumcircle (plus the one-pixel anti-aliasing ramp)
        rows, cols = np.nonzero(mask)
        assert (np.hypot(cols + 0.5 - info["center"][i, 0], rows + 0.5 - info["center"][i, 1]) < r + 1.3).all()
        rows, cols = _pixels(info, i, inside)
        assert (mask[rows, cols] == 1).all(), f"{name} #{i}: a point inside the shape is not covered"
        # a covered pixel shows the shape's colour (up to the sensor noise)
        assert np.abs(images[i][:, rows, cols] - colour[:, None]).max() < 0.1, f"{name} #{i}"
        rows, cols = _pixels(info, i, outside)
        assert (mask[rows, cols] == 0).all(), f"{name} #{i}: a point outside the shape is covered"
        # and an uncovered pixel (inside the circumcircle, where there is no clutter) shows the background,
        # which contrasts with the shape
        rows, cols = _pixels(info, i, [p for p in outside if np.hypot(*p) < 1])
        assert (np.linalg.norm(images[i][:, rows, cols] - colour[:, None], axis=0) > 0.2).all(), f"{name} #{i}"


def test_most_backgrounds_carry_clutter(drawn):
    images, _, info = drawn
    far = np.hypot(*(np.mgrid[0:64, 0:64] + 0.5)[::-1, None] - info["center"].T[:, :, None, None])
    far = far > info["radius"][:, None, None] + 2
    # the background is smooth apart from clutter: large pixel jumps away from the shape come from clutter
    jump = np.abs(np.diff(images, axis=3)).max(axis=1) > 0.3
    has_clutter = (jump & far[:, :, 1:]).any(axis=(1, 2))
    assert has_clutter.mean() > 0.5


# ---------------------------------------------------------------- scenes

@pytest.fixture(scope="module")
def scene():
    return data.scenes(8, seed=0, return_params=True)


def _closed_form_ground(height, pitch, focal, size=128):
    """z-depth of the plane y = 0 for a camera at height h pitched down by `pitch`, row by row."""
    v = (np.arange(size) + 0.5 - size / 2) / focal
    denom = np.sin(pitch) + np.cos(pitch) * v
    depth = np.full(size, data.MAX_DEPTH)
    below = denom > 0
    depth[below] = np.minimum(height / denom[below], data.MAX_DEPTH)
    return np.repeat(depth[:, None], size, axis=1)


def _rays(pitch, focal, size=128):
    """World direction of every pixel's ray, scaled so its component along the viewing axis is 1."""
    i, j = np.mgrid[0:size, 0:size] + 0.5
    u, v = (j - size / 2) / focal, -(i - size / 2) / focal
    return np.stack([u, v * np.cos(pitch) - np.sin(pitch), v * np.sin(pitch) + np.cos(pitch)])


def test_scenes_arrays_and_ranges(scene):
    images, depths, masks, params = scene
    assert images.shape == (8, 3, 128, 128) and images.dtype == np.float32
    assert depths.shape == (8, 1, 128, 128) and depths.dtype == np.float32
    assert masks.shape == (8, data.MAX_OBJECTS, 128, 128) and masks.dtype == bool
    assert images.min() >= 0 and images.max() <= 1
    assert np.isfinite(depths).all() and depths.min() > 0 and depths.max() <= data.MAX_DEPTH
    assert masks.sum(axis=1).max() <= 1                              # one object per pixel
    present = params["kind"] >= 0
    assert (present.sum(axis=1) >= 1).all() and (present.sum(axis=1) <= 5).all()
    assert not masks[~present].any()                                 # absent slots have empty masks
    assert masks.any(axis=(1, 2, 3)).all()                           # every scene shows an object


def test_scenes_are_deterministic_per_seed():
    a, b, c = data.scenes(2, seed=1), data.scenes(2, seed=1), data.scenes(2, seed=2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[1], c[1])


def test_empty_scenes_show_the_ground_plane_in_closed_form():
    _, depths, masks, params = data.scenes(3, seed=7, objects=(0, 0), return_params=True)
    assert not masks.any() and (params["kind"] == -1).all()
    for k in range(3):
        expected = _closed_form_ground(params["height"][k], params["pitch"][k], params["focal"])
        np.testing.assert_allclose(depths[k, 0], expected, rtol=1e-4, atol=0)
        np.testing.assert_allclose(data.ground_depth(params["height"][k], params["pitch"][k]), expected, rtol=1e-12)
        assert (expected < data.MAX_DEPTH).any() and (expected == data.MAX_DEPTH).any()  # ground and sky both in view


def test_objects_are_in_front_of_the_ground_and_the_rest_is_ground(scene):
    _, depths, masks, params = scene
    for k in range(len(depths)):
        ground = _closed_form_ground(params["height"][k], params["pitch"][k], params["focal"])
        on_object = masks[k].any(axis=0)
        np.testing.assert_allclose(depths[k, 0][~on_object], ground[~on_object], rtol=1e-4, atol=0)
        assert (depths[k, 0][on_object] <= ground[on_object] * (1 + 1e-6)).all()
        assert (depths[k, 0][on_object] < ground[on_object]).mean() > 0.99


def _surface_sdf(kind, point, pos, size):
    """Signed distance of points (3, m) from one object's surface (see scenes' return_params)."""
    x, y, z = point[0] - pos[0], point[1], point[2] - pos[1]
    if kind == "sphere":
        return np.sqrt(x ** 2 + (y - size[0]) ** 2 + z ** 2) - size[0]
    if kind == "box":
        q = np.stack([np.abs(x) - size[0], np.abs(y - size[1] / 2) - size[1] / 2, np.abs(z) - size[2]])
        return np.linalg.norm(np.maximum(q, 0), axis=0) + np.minimum(q.max(axis=0), 0)
    radial, vertical = np.hypot(x, z) - size[0], np.abs(y - size[1] / 2) - size[1] / 2
    return np.hypot(np.maximum(radial, 0), np.maximum(vertical, 0)) + np.minimum(np.maximum(radial, vertical), 0)


def _object_points(depths, params, k, slot, mask):
    """World points of the pixels in mask, back-projected from their depth."""
    point = _rays(params["pitch"][k], params["focal"])[:, mask] * depths[k, 0][mask]
    point[1] += params["height"][k]
    return point


def test_object_pixels_back_project_onto_their_object(scene):
    _, depths, masks, params = scene
    checked = set()
    for k in range(len(depths)):
        for slot in np.flatnonzero(params["kind"][k] >= 0):
            mask = masks[k, slot]
            if not mask.any():
                continue
            kind = data.OBJECT_KINDS[params["kind"][k, slot]]
            point = _object_points(depths, params, k, slot, mask)
            gap = np.abs(_surface_sdf(kind, point, params["pos"][k, slot], params["size"][k, slot]))
            assert gap.max() < 1e-4 + 1e-5 * depths[k, 0][mask].max(), (k, slot, kind, gap.max())
            assert point[1].min() > -1e-3                                    # on or above the ground
            checked.add(kind)
    assert checked == set(data.OBJECT_KINDS)


def test_objects_are_lambertian():
    """On a lone object, each colour channel follows albedo * (ambient + diffuse * max(0, n.l))."""
    images, depths, masks, params = data.scenes(8, seed=3, objects=(1, 1), return_params=True)
    checked = 0
    for k in range(8):
        mask = masks[k, 0]
        kind = data.OBJECT_KINDS[params["kind"][k, 0]]
        point = _object_points(depths, params, k, 0, mask)
        pos, size = params["pos"][k, 0], params["size"][k, 0]
        step = np.eye(3)[:, :, None] * 1e-5
        normal = np.stack([_surface_sdf(kind, point + e, pos, size) - _surface_sdf(kind, point - e, pos, size)
                           for e in step]) / 2e-5
        lambert = np.maximum(params["light"][k] @ normal, 0)
        if lambert.std() < 0.05:
            continue                                                      # too evenly lit to tell
        for c in range(3):
            assert np.corrcoef(lambert, images[k, c][mask])[0, 1] > 0.95, (k, kind, c)
        checked += 1
    assert checked >= 4


def test_sixty_four_scenes_at_full_resolution():
    images, depths, masks = data.scenes(64, seed=11)
    assert images.shape == (64, 3, 128, 128) and depths.shape == (64, 1, 128, 128)
    assert masks.shape == (64, data.MAX_OBJECTS, 128, 128)
    counts = masks.any(axis=(2, 3)).sum(axis=1)
    assert counts.min() >= 1 and counts.max() >= 4                   # 1 to 5 visible objects
    assert np.isfinite(depths).all() and depths.min() > 0


def test_scenes_reject_a_bad_object_range():
    with pytest.raises(ValueError, match="objects must be a range"):
        data.scenes(1, objects=(2, 9))


# ---------------------------------------------------------------- digits

@pytest.fixture(scope="module")
def split():
    return data.digits("train"), data.digits("test")


@needs_sklearn
def test_digits_split_is_80_20_stratified_and_disjoint(split):
    (train, y_train), (test, y_test) = split
    assert len(train) + len(test) == 1797
    assert abs(len(test) - 0.2 * 1797) <= 1
    for images, labels in split:
        assert images.dtype == np.float32 and images.shape[1:] == (1, 32, 32)
        assert labels.dtype == np.int64 and set(labels) == set(range(10))
        assert images.min() >= 0 and images.max() <= 1 and images.max() > 0.99
    per_class = np.bincount(np.concatenate([y_train, y_test]))
    np.testing.assert_allclose(np.bincount(y_test) / per_class, 0.2, atol=1 / per_class.min())
    seen = {row.tobytes() for row in train}
    assert not any(row.tobytes() in seen for row in test)


@needs_sklearn
def test_digits_are_deterministic_and_the_seed_picks_the_split(split):
    again = data.digits("test")
    np.testing.assert_array_equal(again[0], split[1][0])
    other = data.digits("test", seed=1)
    assert not np.array_equal(other[0], split[1][0])


def _bilinear_reference(small, size):
    """Half-pixel-centred bilinear resize (align_corners=False), one output coordinate at a time."""
    n = small.shape[-1]
    src = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0, n - 1)
    lo = np.floor(src).astype(int)
    hi, w = np.minimum(lo + 1, n - 1), src - lo
    rows = small[:, lo, :] * (1 - w)[:, None] + small[:, hi, :] * w[:, None]
    return rows[:, :, lo] * (1 - w) + rows[:, :, hi] * w


def _match(images, reference):
    """For each image the index of the nearest reference image, and that distance."""
    a, b = images.reshape(len(images), -1).astype(np.float64), reference.reshape(len(reference), -1)
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None] - 2 * a @ b.T
    index = d2.argmin(axis=1)
    return index, np.sqrt(np.maximum(d2[np.arange(len(a)), index], 0))


@needs_sklearn
def test_digits_are_scikit_learns_digits_upsampled(split):
    reference = pytest.importorskip("sklearn.datasets").load_digits()
    images = np.concatenate([split[0][0], split[1][0]])[:, 0]
    labels = np.concatenate([split[0][1], split[1][1]])
    big = _bilinear_reference(reference.images / 16.0, 32)
    index, gap = _match(images, big)
    assert len(set(index)) == 1797 and gap.max() < 1e-4      # every digit once
    np.testing.assert_array_equal(labels, reference.target[index])
    np.testing.assert_allclose(images, big[index], rtol=0, atol=1e-6)


def test_digit_upsampling_matches_torch():
    torch = pytest.importorskip("torch")
    small = np.random.default_rng(0).uniform(0, 1, (3, 8, 8))
    expected = torch.nn.functional.interpolate(torch.tensor(small)[:, None], size=(32, 32), mode="bilinear",
                                               align_corners=False).numpy()[:, 0]
    np.testing.assert_allclose(_bilinear_reference(small, 32), expected, rtol=0, atol=1e-12)
    up = data._bilinear_matrix(32, 8)
    np.testing.assert_allclose(up @ small.astype(np.float32) @ up.T, expected, rtol=0, atol=1e-6)


def test_digits_reject_an_unknown_split():
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        data.digits("validation")


def test_digits_without_scikit_learn_names_the_extra(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'saliency-maps\[train\]'"):
        data.digits("train")


# ---------------------------------------------------------------- training sources

def test_shifted_moves_each_image_by_whole_pixels_and_fills_zeros():
    rng = np.random.default_rng(0)
    images = rng.uniform(0.1, 1, (6, 2, 7, 9)).astype(np.float32)
    out = data.shifted(images, np.random.default_rng(3), 3)
    dy, dx = np.random.default_rng(3).integers(-3, 4, (2, 6))
    for i in range(6):
        padded = np.pad(images[i], ((0, 0), (3, 3), (3, 3)))   # the image inside a frame of zeros
        expected = padded[:, 3 - dy[i]:3 - dy[i] + 7, 3 - dx[i]:3 - dx[i] + 9]
        np.testing.assert_array_equal(out[i], expected)
    assert out.dtype == images.dtype and not np.shares_memory(out, images)


def test_a_generated_source_draws_each_epoch_and_the_held_out_data_from_its_seed():
    source = data.Generated(data.scene_depths)
    n, epoch = source.training(2)
    images, depths = epoch(5, np.random.default_rng(0))
    expected = data.scenes(2, seed=5)
    assert n == 2
    np.testing.assert_array_equal(images, expected[0])
    np.testing.assert_array_equal(depths, expected[1])
    held_images, held_labels = data.Generated(data.shapes).held_out(3, seed=9)
    np.testing.assert_array_equal(held_images, data.shapes(3, seed=9)[0])
    np.testing.assert_array_equal(held_labels, data.shapes(3, seed=9)[1])
