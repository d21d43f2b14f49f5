"""VarGrad, added as a method of its own file: the variance of the gradients of the noisy copies."""
import numpy as np
from _attribution_models import make_cnn

from saliency import attribution as A
from saliency.attribution import registry


def test_vargrad_is_the_variance_of_the_noisy_gradients():
    model = make_cnn()
    x = np.random.default_rng(3).random((2, 3, 12, 12))
    got = A.vargrad(model, x, n=6, noise=0.2, rng=np.random.default_rng(4))
    rng = np.random.default_rng(4)
    span = (x.max(axis=(1, 2, 3)) - x.min(axis=(1, 2, 3))).reshape(2, 1, 1, 1)
    seed = A.seeds.one_hot(list(np.argmax(model(x).numpy(), axis=1)))
    grads = [A.gradient(model, x + 0.2 * span * rng.standard_normal(x.shape), seed).map for _ in range(6)]
    np.testing.assert_allclose(got.map, np.var(grads, axis=0), rtol=1e-9, atol=1e-12)
    assert got.method == "vargrad"


def test_vargrad_is_on_the_command_line_with_smoothgrads_noise_options():
    record = registry.get("vargrad")
    assert [o.cli_flag for o in record.options] == ["--samples", "--noise"]
    assert record.map_shape((3, 8, 8)) == (3, 8, 8)
