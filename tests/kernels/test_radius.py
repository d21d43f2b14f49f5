"""The mass-radius kernel against a plain NumPy reference: a full sort by distance and a cumulative sum."""
import numpy as np
import pytest

from saliency.attribution.receptive import mass_radius
from saliency.kernels import radius as R

FRACTIONS = (0.01, 0.25, 0.5, 0.9, 1.0)


def reference(mass, centre, fraction):
    """Sort every pixel by distance (row-major among equals), accumulate, take the first reaching fraction."""
    h, w = mass.shape
    rows, cols = np.meshgrid(np.arange(h) - centre[0], np.arange(w) - centre[1], indexing="ij")
    dist = np.sqrt(rows ** 2 + cols ** 2).ravel()
    order = np.argsort(dist, kind="stable")
    cum = np.cumsum(mass.ravel()[order])
    if not cum[-1] > 0:
        return np.nan
    return dist[order][min(np.searchsorted(cum, fraction * cum[-1], side="left"), h * w - 1)]


def references(mass, centres, fractions=FRACTIONS):
    return np.array([[reference(m, c, f) for f in fractions] for m, c in zip(mass, centres)])


@pytest.mark.parametrize("shape, density", [((40, 9, 13), 1.0), ((40, 17, 23), 0.3), ((30, 1, 7), 0.6),
                                            ((20, 32, 32), 0.02)])
def test_random_maps_and_centres_match_the_reference(shape, density):
    rng = np.random.default_rng(shape[1])
    mass = rng.random(shape) * (rng.random(shape) < density)
    centres = np.stack([rng.uniform(-4, shape[1] + 4, shape[0]), rng.uniform(-4, shape[2] + 4, shape[0])], axis=1)
    centres[::3] = np.round(centres[::3])                   # integer centres too, where distances tie exactly
    out = R.mass_radii(mass, centres, FRACTIONS)
    assert out.shape == (shape[0], len(FRACTIONS)) and out.dtype == np.float64
    np.testing.assert_array_equal(out, references(mass, centres))


def test_ties_at_equal_distances_and_exact_fractions():
    # integer masses on rings around an integer centre: many pixels at one distance, and fractions
    # whose share is reached exactly at the end of a ring
    mass = np.zeros((4, 9, 9))
    mass[0, 4, 4] = 2.0
    mass[0, [3, 5, 4, 4], [4, 4, 3, 5]] = 1.0               # 2 of the 6 at r = 0, four at r = 1
    mass[1] = 1.0                                           # uniform: rings of 4 and 8 pixels
    mass[2, [0, 8, 0, 8], [0, 0, 8, 8]] = 1.0               # the four corners, all at sqrt(32)
    mass[3, 4, [0, 8]] = 1.0                                # two pixels at distance 4, either side
    centres = np.full((4, 2), 4.0)
    fractions = (1 / 3, 0.5, 2 / 3, 1.0, 0.999)
    np.testing.assert_array_equal(R.mass_radii(mass, centres, fractions), references(mass, centres, fractions))
    assert R.mass_radii(mass[0], (4, 4), (1 / 3,))[0] == 0.0
    assert R.mass_radii(mass[0], (4, 4), (0.34,))[0] == 1.0
    assert R.mass_radii(mass[3], (4, 4), (0.5,))[0] == 4.0


def test_zero_and_nan_maps_give_nan_and_infinite_mass_is_kept():
    mass = np.zeros((3, 5, 6))
    mass[1, 2, 2] = np.nan
    mass[1, 0, 0] = 1.0
    mass[2, 1, 1], mass[2, 4, 5] = 1.0, np.inf
    out = R.mass_radii(mass, (2.0, 2.0), (0.5, 0.9))
    assert np.isnan(out[:2]).all()
    np.testing.assert_array_equal(out[2], references(mass[2:], [(2.0, 2.0)], (0.5, 0.9))[0])


def test_centres_broadcast_over_leading_dimensions():
    rng = np.random.default_rng(3)
    mass = rng.random((2, 3, 6, 7))
    centres = rng.uniform(0, 6, (2, 3, 2))
    out = R.mass_radii(mass, centres, (0.5, 0.9))
    assert out.shape == (2, 3, 2)
    np.testing.assert_array_equal(out.reshape(6, 2), references(mass.reshape(6, 6, 7), centres.reshape(6, 2),
                                                                (0.5, 0.9)))
    one = R.mass_radii(mass, (2.5, 3.0), (0.5,))
    np.testing.assert_array_equal(one[..., 0], mass_radius(mass, (2.5, 3.0), 0.5))
    assert R.mass_radii(np.zeros((0, 4, 4)), (1, 1), (0.5,)).shape == (0, 1)


def test_the_compiled_kernel_equals_its_python_function():
    rng = np.random.default_rng(4)
    mass = rng.random((6, 8, 11)) * (rng.random((6, 8, 11)) < 0.5)
    centres = rng.uniform(0, 8, (6, 2))
    fractions = np.array([0.5, 0.9])
    compiled, python = np.empty((6, 2)), np.empty((6, 2))
    R._mass_radii(mass, centres, fractions, compiled)
    getattr(R._mass_radii, "py_func", R._mass_radii)(mass, centres, fractions, python)   # NUMBA_DISABLE_JIT
    np.testing.assert_array_equal(compiled, python)


def test_mass_radius_keeps_its_meaning():
    """mass_radius (receptive_field's) runs on the kernel: the old sort-everything definition, any float dtype."""
    rng = np.random.default_rng(5)
    mass = rng.random((5, 12, 10)).astype(np.float32)
    for fraction in (0.5, 0.9):
        expected = references(mass.astype(np.float64), [(5.5, 4.0)] * 5, (fraction,))[:, 0]
        np.testing.assert_array_equal(mass_radius(mass, (5.5, 4.0), fraction), expected)
    assert mass_radius(mass[0], (5.5, 4.0), 0.5).shape == ()
    with pytest.raises(ValueError, match="fraction must be in"):
        mass_radius(mass, (0, 0), 1.5)
