"""An op on incompatible shapes raises ValueError naming both shapes."""
import re

import numpy as np
import pytest

import saliency as sl


def _t(*shape):
    return sl.tensor(np.zeros(shape), requires_grad=True)


CASES = {
    "add": (lambda: _t(2, 3) + _t(4,), [(2, 3), (4,)]),
    "add_numpy_operand": (lambda: _t(2, 3) + np.zeros((3, 2)), [(2, 3), (3, 2)]),
    "sub": (lambda: _t(3, 1, 2) - _t(4, 3), [(3, 1, 2), (4, 3)]),
    "mul": (lambda: _t(2, 3) * _t(2, 4), [(2, 3), (2, 4)]),
    "div": (lambda: _t(5,) / _t(4,), [(5,), (4,)]),
    "pow": (lambda: _t(2, 3) ** _t(2,), [(2, 3), (2,)]),
    "maximum": (lambda: sl.maximum(_t(2, 3), _t(3, 2)), [(2, 3), (3, 2)]),
    "matmul": (lambda: _t(2, 3) @ _t(4, 5), [(2, 3), (4, 5)]),
    "matmul_vectors": (lambda: _t(3) @ _t(4), [(3,), (4,)]),
    "matmul_batch": (lambda: _t(2, 3, 4) @ _t(3, 4, 5), [(2, 3, 4), (3, 4, 5)]),
    "matmul_0d": (lambda: _t() @ _t(3), [(), (3,)]),
    "mm": (lambda: sl.mm(_t(2, 3), _t(3)), [(2, 3), (3,)]),
    "cat": (lambda: sl.cat([_t(2, 3), _t(3, 4)]), [(2, 3), (3, 4)]),
    "cat_ndim": (lambda: sl.cat([_t(2, 3), _t(2)], dim=0), [(2, 3), (2,)]),
    "stack": (lambda: sl.stack([_t(2, 3), _t(3, 2)]), [(2, 3), (3, 2)]),
    "where": (lambda: sl.where(np.ones((2, 3), dtype=bool), _t(2, 3), _t(4,)), [(2, 3), (4,)]),
    "where_condition": (lambda: sl.where(np.ones(5, dtype=bool), _t(2, 3), _t(3,)), [(5,), (2, 3)]),
    "mse_loss": (lambda: sl.mse_loss(_t(2, 3), _t(3, 2)), [(2, 3), (3, 2)]),
    "reshape": (lambda: _t(2, 3).reshape(4, 2), [(2, 3), (4, 2)]),
    "expand": (lambda: _t(2, 3).expand(2, 4), [(2, 3), (2, 4)]),
    "nll_loss": (lambda: sl.nll_loss(_t(3, 4), np.zeros(2, dtype=int)), [(2,), (3, 4)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_incompatible_shapes_raise_value_error_naming_both(case):
    make, shapes = CASES[case]
    with pytest.raises(ValueError) as info:
        make()
    message = str(info.value)
    for shape in shapes:
        assert str(shape) in message, f"{shape} missing from {message!r}"
    assert message[0].islower() and not message.endswith("."), f"house style: {message!r}"


def test_add_error_says_what_broadcasting_needs():
    with pytest.raises(ValueError, match=re.escape("shapes (2, 3) and (4,) cannot be broadcast")):
        _t(2, 3) + _t(4)


def test_matmul_error_names_the_mismatched_dimensions():
    with pytest.raises(ValueError, match=r"last dimension of the first \(3\) must equal .* second \(4\)"):
        _t(2, 3) @ _t(4, 5)
