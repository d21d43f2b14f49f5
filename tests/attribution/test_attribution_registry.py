"""Every public attribution method is declared once, in its own file (`registry.method`), with all
the tool needs to know about it; what it did not declare, nobody can ask of it."""
import inspect

import numpy as np
import pytest

from saliency import attribution
from saliency.attribution import registry

# keywords of a method function that are tuning or plumbing, passed by the caller, not options; and
# LRP's `rules`, a mapping of names to rule objects that only the Python API can give
PLUMBING = {"batch", "progress", "rng", "chunk", "rules"}


def _public_methods():
    """The functions of attribution.__all__ whose signature is method(model, x, seed=None, ...)."""
    out = []
    for name in attribution.__all__:
        fn = getattr(attribution, name)
        params = list(inspect.signature(fn).parameters) if inspect.isfunction(fn) else []
        if params[:3] == ["model", "x", "seed"]:
            out.append(fn)
    return out


def test_every_public_method_is_registered_and_the_registry_holds_only_them():
    public = _public_methods()
    assert {fn.__name__ for fn in public} >= {"gradient", "smoothgrad", "integrated_gradients", "gradcam", "occlusion"}
    for fn in public:
        assert registry.get(fn) is registry.METHODS[fn.__name__] and registry.get(fn).function is fn
    assert attribution.METHODS == {name: m.function for name, m in registry.METHODS.items()}


@pytest.mark.parametrize("name", list(registry.METHODS))
def test_each_method_declares_every_keyword_it_takes(name):
    m = registry.METHODS[name]
    params = inspect.signature(m.function).parameters
    keywords = {k for k, p in params.items() if p.kind == inspect.Parameter.KEYWORD_ONLY}
    options = {o.name for o in m.options}
    assert keywords - PLUMBING == options, f"{name}: undeclared keywords {sorted(keywords - PLUMBING - options)}"
    assert m.map_channels == "input" or isinstance(m.map_channels, int)
    assert m.summary and not m.summary.startswith(name)
    for o in m.options:
        default = m.defaults[o.name]
        if default is inspect.Parameter.empty:  # a required option: leaving it out is one clear error
            with pytest.raises(registry.OptionError, match=f"{name} needs {o.cli_flag}"):
                m.check({})
            continue
        assert o.help and o.cli_flag.startswith("--")
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert o.parse(str(default)) == default   # the command line can give back the default


def test_a_flag_means_one_thing_whichever_method_takes_it():
    seen = {}
    for m in registry.METHODS.values():
        for o in m.options:
            before = seen.setdefault(o.cli_flag, o)
            assert (before.name, before.kind) == (o.name, o.kind), f"{o.cli_flag} means two things"


def test_what_a_method_did_not_declare_cannot_be_asked_of_it():
    m = registry.get("gradient")
    with pytest.raises(registry.OptionError, match="gradient has no option 'steps'; its options: none"):
        m.option("steps")
    with pytest.raises(registry.OptionError, match=r"smoothgrad has no option 'steps'; its options: --samples, "):
        registry.get("smoothgrad").check({"steps": 4})
    with pytest.raises(attribution.InputError, match="unknown method 'lime'; choose one of: gradient"):
        registry.get("lime")
    with pytest.raises(TypeError, match="map_channels"):
        registry.method(options=())
    with pytest.raises(registry.OptionError, match="--variant must be one of mean, squared, vargrad, got 'max'"):
        registry.get("smoothgrad").option("variant").parse("max")
    with pytest.raises(registry.OptionError, match="--steps takes an int, got 'many'"):
        registry.get("integrated_gradients").option("--steps").parse("many")
    with pytest.raises(registry.OptionError, match="--noise must be a finite number >= 0, got -0.5"):
        registry.get("smoothgrad").option("noise").parse("-0.5")


def test_map_shapes_follow_the_declaration():
    assert registry.get("gradcam").map_shape((3, 64, 48)) == (1, 64, 48)
    assert registry.get("smoothgrad").map_shape((3, 64, 48)) == (3, 64, 48)


def test_a_method_called_through_its_record_checks_its_options():
    x = np.zeros((1, 3, 8, 8), np.float32)

    def model(t):
        return (t * t).sum(dim=(1, 2, 3)).reshape(-1, 1)

    m = registry.get("integrated_gradients")
    np.testing.assert_array_equal(m(model, x, steps=2).map, attribution.integrated_gradients(model, x, steps=2).map)
    with pytest.raises(registry.OptionError, match="--steps must be a finite number >= 1, got 0"):
        m(model, x, steps=0)


def test_a_method_function_of_your_own_gets_a_plain_record():
    def mine(model, x, seed=None, *, scale=1.0):
        return None

    record = registry.method_of(mine)
    assert record.name == "mine" and record.options == () and record.map_shape((3, 4, 5)) == (3, 4, 5)
    assert record.check({"scale": 2.0}) == {"scale": 2.0}
