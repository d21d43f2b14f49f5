"""Every viz test runs with warnings turned into errors: a picture must never come with a warning."""
import warnings

import pytest


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield
