"""Real architectures written as PyTorch files, ported by changing their three import lines,
against PyTorch: state-dict keys and shapes, outputs and input gradients in float64.

One case per file of tests/realmodels/archs/ (the conventions are in porting.py's docstring).
"""
import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from . import porting  # noqa: E402

FILES = porting.arch_files()


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """PyTorch on one thread: its float64 depthwise convolutions loop over groups, and its
    thread pool waits badly when the cores are busy; restored after this module."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _cases(*, real=False):
    cases = []
    for path in FILES:
        _, _, xfail = porting.settings(path)
        marks = [pytest.mark.xfail(reason=xfail, strict=True)] if xfail else []
        cases.append(pytest.param(path, id=porting.arch_name(path), marks=marks))
    return cases


@functools.lru_cache(maxsize=None)
def _pair(path):
    """The file's small (TEST_KWARGS) pair, built once for the tests of that file."""
    return porting.build_pair(path)


def _keys_and_shapes(state):
    return {k: tuple(np.shape(v)) for k, v in state.items()}


def test_there_are_architectures():
    assert FILES, f"no architecture files in {porting.ARCHS_DIR}"


@pytest.mark.parametrize("path", _cases())
def test_state_dict_keys(path):
    pair = _pair(path)
    theirs = _keys_and_shapes(porting.state_arrays(pair.torch_model))
    ours = _keys_and_shapes(pair.our_model.state_dict())
    assert list(ours) == list(theirs)  # same names in the same order
    assert ours == theirs


@pytest.mark.parametrize("path", _cases())
def test_real_size_state_dict_keys(path):
    """build() (the real widths) makes the same parameters and buffers on both sides."""
    torch_model = porting.load(path, "torch").build()
    our_model = porting.load(path, "saliency").build()
    theirs = _keys_and_shapes(porting.state_arrays(torch_model))
    ours = _keys_and_shapes(our_model.state_dict())
    assert list(ours) == list(theirs)
    assert ours == theirs


@pytest.mark.parametrize("path", _cases())
def test_outputs_and_input_gradients(path):
    pair = _pair(path)
    x = porting.make_input(pair.input_shape)
    xt, yt, xs, ys = porting.forward(pair, x)
    assert tuple(ys.shape) == tuple(yt.shape)
    assert ys.dtype == np.float64
    porting.assert_close(ys.numpy(), yt.detach().numpy(), f"{pair.name}: outputs")

    seeds = porting.dense_seeds(tuple(yt.shape)) if porting.is_dense(yt) else porting.class_seeds(yt)
    expected = {}
    for label, v in seeds:
        expected[label] = porting.input_gradient_torch(xt, yt, v)
        got = porting.input_gradient_ours(xs, ys, v)
        assert np.any(expected[label] != 0), f"{pair.name}: seed {label} reaches no input pixel"
        porting.assert_close(got, expected[label], f"{pair.name}: input gradient for seed {label}")

    # all seeds in one batched pass (pixel seeds travel as windows together)
    labels = [label for label, _ in seeds]
    got = porting.input_gradient_ours(xs, ys, np.stack([v for _, v in seeds]), batched=True)
    for k, label in enumerate(labels):
        porting.assert_close(got[k], expected[label], f"{pair.name}: batched input gradient for seed {label}")
