"""The evaluation metrics against their references, in float64: `max_sensitivity`, the deletion curve
of `deletion_insertion`, `pointing_game`, `relevance_mass` and `sparseness` against Quantus 0.6.0
(MaxSensitivity, PixelFlipping, PointingGame, RelevanceMassAccuracy, Sparseness), `infidelity`
against Captum 0.9.0's `captum.metrics.infidelity`. Both sides get the same model (a torch CNN and
ours with its weights), the same maps and the same perturbations (replayed into Quantus's
`perturb_func` and Captum's), and must agree within 1e-5.

How the references are configured to compute our definitions (see each test for what differs):
- Quantus's maps are the importance, our map summed over its channels, shaped (N, 1, H, W): given
  (N, C, H, W), PointingGame, RelevanceMassAccuracy and Sparseness work on the C*H*W values, not on
  the pixels. Its `normalise` (by the largest |value| of the whole batch) is turned off, except
  where a positive scale cannot matter. Its model outputs are logits (`softmax=False`).
- Quantus wraps the model's input as `torch.Tensor(x)`, in torch's default dtype: float64 here
  (`float64_default` below), or the comparison would be with a float32 model.

Quantus imports Zennit where installed, which imports torchvision: its compiled ops are left out
as in tests/models/vision. Skipped without torch, Captum or Quantus (Quantus 0.6.0 with --no-deps,
then pandas, opencv-python-headless and scikit-image, which it imports at the top level).
"""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from saliency import nn
from saliency.attribution import deletion_insertion, gradient, seeds
from saliency.attribution.metrics import (infidelity, max_sensitivity, perturb, pointing_game, relevance_mass,
                                          sparseness)

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models" / "vision"))
from _torchvision import torchvision  # noqa: E402

TOL = 1e-5
N, SIZE, SAMPLES = 4, 12, 6


@pytest.fixture(autouse=True, scope="module")
def float64_default():
    """torch's default dtype float64 (Quantus makes its model inputs with `torch.Tensor(x)`), and one
    thread (tests/attribution/test_rule_parity.py); both restored afterwards."""
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def quantus():
    if importlib.util.find_spec("torchvision"):
        torchvision()  # Quantus -> Zennit -> torchvision, without torchvision's op registrations
    return pytest.importorskip("quantus")


@pytest.fixture(scope="module")
def captum_metrics():
    return pytest.importorskip("captum.metrics")


def cnn(lib):
    """A small classifier (N, 3, 12, 12) -> (N, 5) (tests/attribution/_attribution_models.py's make_cnn)."""
    return lib.Sequential(lib.Conv2d(3, 6, 3, padding=1), lib.ReLU(), lib.MaxPool2d(2),
                          lib.Conv2d(6, 8, 3, padding=1), lib.ReLU(), lib.AdaptiveAvgPool2d(1), lib.Flatten(),
                          lib.Linear(8, 5))


@pytest.fixture(scope="module")
def setup():
    """(torch model, our model with its weights, images x (N, 3, 12, 12), their top classes y,
    our gradient maps of those classes (N, 3, 12, 12))."""
    theirs = cnn(torch.nn).double().eval()
    rng = np.random.default_rng(3)  # top classes 2, 3, 2, 2, close enough for input noise to change some
    with torch.no_grad():
        for p in theirs.parameters():  # N(0, 0.5^2), as _attribution_models.randomize: outputs that move
            p.copy_(torch.from_numpy(0.5 * rng.standard_normal(tuple(p.shape))))
    ours = cnn(nn).double()
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})
    ours.eval()
    x = rng.uniform(0, 1, (N, 3, SIZE, SIZE))
    with torch.no_grad():
        y = theirs(torch.from_numpy(x)).argmax(1).numpy()
    maps = gradient(ours, x, seeds.one_hot(y)).map
    return theirs, ours, x, y, maps


def importance(amap):
    """The map summed over its channels, (N, 1, H, W): what Quantus is given."""
    return amap.sum(axis=1, keepdims=True)


def our_gradient(ours):
    """Quantus's explain_func(model, inputs, targets) computing our gradient map (of our model)."""
    def explain(model, inputs, targets, **kwargs):
        return gradient(ours, np.asarray(inputs, np.float64), seeds.one_hot(np.asarray(targets))).map
    return explain


def torch_gradient(model, inputs, targets, **kwargs):
    """Quantus's explain_func: the gradient of the target logit, by torch."""
    xt = torch.tensor(inputs, dtype=torch.float64, requires_grad=True)
    out = model(xt)
    out[torch.arange(len(xt)), torch.as_tensor(targets)].sum().backward()
    return xt.grad.numpy()


def replayed(d):
    """Quantus's perturb_func(arr, indices, **bounds) returning x + d_s for the s-th call (arr is x
    flattened per image, (N, C*H*W); d (samples, N, C, H, W)); `.unused()` counts the d_s not asked for."""
    calls = iter(d)

    def perturb(arr, indices, **kwargs):
        return arr + next(calls).reshape(arr.shape)
    perturb.unused = lambda: sum(1 for _ in calls)
    return perturb


# --- Quantus ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("explain", ["ours", "torch"])
def test_max_sensitivity_is_quantus(explain, setup, quantus):
    """With our gradient as Quantus's explain_func this checks the metric alone; with torch's, the
    gradient too. Quantus: d_s from perturb_func (replayed), Frobenius norms, max over samples
    (nanmax; no NaNs without return_nan_when_prediction_changes), no abs or normalise."""
    theirs, ours, x, y, maps = setup
    d = np.random.default_rng(1).uniform(-0.2, 0.2, (SAMPLES,) + x.shape)
    got = max_sensitivity(ours, x, lambda m, xs, s: gradient(m, xs, s), seeds.one_hot(y), perturbations=d)
    replay = replayed(d)
    metric = quantus.MaxSensitivity(nr_samples=SAMPLES, perturb_func=replay, abs=False, normalise=False,
                                    return_nan_when_prediction_changes=False, disable_warnings=True)
    expected = metric(theirs, x, y, a_batch=None, channel_first=True, softmax=False,
                      explain_func=our_gradient(ours) if explain == "ours" else torch_gradient)
    assert replay.unused() == 0
    assert np.all(np.asarray(got) > 0)
    np.testing.assert_allclose(got, expected, rtol=TOL, atol=0)


def test_max_sensitivity_keeps_the_class_predicted_at_x_as_quantus_keeps_y(setup, quantus):
    """Our default seed (the predicted class) is resolved at x and kept for the perturbed inputs, as
    Quantus keeps y_batch: equal also where the noise changes the predicted class."""
    theirs, ours, x, y, maps = setup
    d = np.random.default_rng(3).uniform(-0.5, 0.5, (SAMPLES,) + x.shape)
    with torch.no_grad():
        moved = theirs(torch.from_numpy((x[None] + d).reshape(-1, *x.shape[1:]))).argmax(1).numpy()
    assert np.any(moved.reshape(SAMPLES, N) != y)
    got = max_sensitivity(ours, x, lambda m, xs, s: gradient(m, xs, s), perturbations=d)
    metric = quantus.MaxSensitivity(nr_samples=SAMPLES, perturb_func=replayed(d), abs=False, normalise=False,
                                    return_nan_when_prediction_changes=False, disable_warnings=True)
    expected = metric(theirs, x, y, channel_first=True, softmax=False, explain_func=our_gradient(ours))
    np.testing.assert_allclose(got, expected, rtol=TOL, atol=0)


@pytest.mark.parametrize("magnitude", [False, True], ids=["signed", "abs"])
@pytest.mark.parametrize("steps", [12, 9])
def test_deletion_curve_is_quantus_pixel_flipping(steps, magnitude, setup, quantus):
    """Quantus's PixelFlipping broadcasts the (N, 1, H, W) map over the channels and orders the C*H*W
    values (np.argsort(-a), not stable): with distinct pixel values the C copies of a pixel are
    neighbours, so `features_in_step` = C * H*W/steps flips whole pixels, steps of them (Quantus
    checks H*W % features_in_step == 0: H*W must be divisible by C). Its curve starts after the
    first step: our deletion[1:]. perturb_baseline=0.0, since Quantus's "black" is the minimum of
    the image as perturbed so far, not 0."""
    theirs, ours, x, y, maps = setup
    amap = np.abs(maps) if magnitude else maps
    assert len(np.unique(importance(amap))) == N * SIZE * SIZE  # no ties: Quantus's order is not stable
    got = deletion_insertion(ours, x, amap, seeds.one_hot(y), steps=steps, baseline=0.0)
    metric = quantus.PixelFlipping(features_in_step=3 * SIZE * SIZE // steps, perturb_baseline=0.0, abs=False,
                                   normalise=False, disable_warnings=True)
    expected = metric(theirs, x, y, a_batch=importance(amap), channel_first=True, softmax=False)
    assert np.shape(expected) == (N, steps)
    np.testing.assert_allclose(got.deletion[:, 1:], expected, rtol=TOL, atol=TOL)


def masks(maps, hits):
    """Boxes (N, H, W), 4 x 5 pixels: on the top pixel of image i's importance where hits[i], else
    away from it."""
    imp = importance(maps)[:, 0]
    out = np.zeros(imp.shape, bool)
    for i, (m, hit) in enumerate(zip(imp, hits)):
        r, c = np.unravel_index(np.argmax(m), m.shape)
        r0 = min(max(r - 2, 0), SIZE - 4) if hit else (0 if r >= 6 else SIZE - 4)
        c0 = min(max(c - 2, 0), SIZE - 5)
        out[i, r0:r0 + 4, c0:c0 + 5] = True
    return out


@pytest.mark.parametrize("magnitude", [False, True], ids=["signed", "abs"])
def test_pointing_game_is_quantus(magnitude, setup, quantus):
    theirs, ours, x, y, maps = setup
    amap = np.abs(maps) if magnitude else maps
    s = masks(amap, [True, False, True, False])
    got = pointing_game(amap, s)
    metric = quantus.PointingGame(abs=False, normalise=False, disable_warnings=True)
    expected = metric(theirs, x, y, a_batch=importance(amap), s_batch=s[:, None], channel_first=True)
    np.testing.assert_array_equal(got, [1.0, 0.0, 1.0, 0.0])
    np.testing.assert_allclose(got, np.asarray(expected, np.float64), rtol=0, atol=TOL)


def test_an_empty_mask_scores_nan_where_quantus_pointing_game_scores_a_hit(setup, quantus):
    """A documented difference: Quantus's PointingGame sets NaN into its boolean hits for an empty
    mask, which makes it True; ours is NaN, as Quantus's RelevanceMassAccuracy and our relevance_mass."""
    theirs, ours, x, y, maps = setup
    s = masks(maps, [True, False, True, False])
    s[1] = False
    got = pointing_game(maps, s)
    kwargs = dict(a_batch=importance(maps), s_batch=s[:, None], channel_first=True)
    expected = quantus.PointingGame(abs=False, normalise=False, disable_warnings=True)(theirs, x, y, **kwargs)
    np.testing.assert_array_equal(got, [1.0, np.nan, 1.0, 0.0])
    assert list(expected) == [True, True, True, False]
    with pytest.warns(UserWarning, match="segmentation map is empty"):
        mass = quantus.RelevanceMassAccuracy(abs=False, normalise=False, disable_warnings=True)(theirs, x, y, **kwargs)
    np.testing.assert_allclose(relevance_mass(maps, s), mass, rtol=TOL, atol=TOL)
    assert np.isnan(mass[1])


@pytest.mark.parametrize("normalise", [False, True])
@pytest.mark.parametrize("magnitude", [False, True], ids=["signed", "abs"])
def test_relevance_mass_is_quantus_relevance_mass_accuracy(magnitude, normalise, setup, quantus):
    """Quantus's normalise (its default) divides the whole batch by one positive number, which the
    ratio cancels."""
    theirs, ours, x, y, maps = setup
    amap = np.abs(maps) if magnitude else maps
    s = masks(amap, [True, False, True, True])
    got = relevance_mass(amap, s)
    metric = quantus.RelevanceMassAccuracy(abs=False, normalise=normalise, disable_warnings=True)
    expected = metric(theirs, x, y, a_batch=importance(amap), s_batch=s[:, None], channel_first=True)
    np.testing.assert_allclose(got, expected, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("magnitude", [False, True], ids=["signed", "abs"])
def test_sparseness_is_quantus(magnitude, setup, quantus):
    """Quantus's Sparseness with its defaults (abs, normalise: the Gini index does not depend on the
    scale) adds 1e-7 to every value, which scales the index by S / (S + n * 1e-7), S the sum of the
    normalised values: about 1e-6 here, within the tolerance, and undone for a tight comparison."""
    theirs, ours, x, y, maps = setup
    amap = np.abs(maps) if magnitude else maps
    got = sparseness(amap)
    a = importance(amap)
    expected = np.asarray(quantus.Sparseness(disable_warnings=True)(theirs, x, y, a_batch=a.copy(),
                                                                    channel_first=True))
    np.testing.assert_allclose(got, expected, rtol=TOL, atol=0)
    s = np.abs(a).reshape(N, -1).sum(axis=1) / np.abs(a).max()
    np.testing.assert_allclose(got, expected * (s + SIZE * SIZE * 1e-7) / s, rtol=1e-12, atol=0)


# --- Captum ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["gaussian", "square"])
@pytest.mark.parametrize("normalize", [True, False])
def test_infidelity_is_captums(normalize, kind, setup, captum_metrics):
    """Captum draws its perturbations for the inputs repeated image-major (repeat_interleave:
    image i, sample s at i * samples + s) and takes (perturbations, perturbed inputs) from its
    perturb_func; the perturbed input is x - I, as ours. The gaussian case judges the gradient map,
    the square removal (`perturb(..., "square")`) a random map."""
    theirs, ours, x, y, maps = setup
    rng = np.random.default_rng(2)
    if kind == "gaussian":
        amap, d = maps, perturb(x, "gaussian", scale=0.3, samples=SAMPLES, rng=rng)
    else:
        amap, d = rng.standard_normal(x.shape), perturb(x, "square", samples=SAMPLES, rng=rng)
    got = infidelity(ours, x, amap, seeds.one_hot(y), normalize=normalize, perturbations=d)
    interleaved = torch.from_numpy(np.ascontiguousarray(d.transpose(1, 0, 2, 3, 4)).reshape(-1, *x.shape[1:]))

    def captum_perturb(inputs):
        assert inputs.shape == interleaved.shape
        return interleaved, inputs - interleaved

    expected = captum_metrics.infidelity(theirs, captum_perturb, torch.from_numpy(x), torch.from_numpy(amap),
                                         target=torch.from_numpy(y), n_perturb_samples=SAMPLES,
                                         normalize=normalize)
    assert np.all(got > 0)
    np.testing.assert_allclose(got, expected.numpy(), rtol=TOL, atol=0)
