"""Fixtures of the store tests (batch runs and their evaluation): the zoo's shapes classifier and
seven of its images. A test file that defines its own `shapes` fixture uses that one."""
import pytest

from saliency import models


@pytest.fixture(scope="module")
def shapes():
    return models.load("shapes")


@pytest.fixture(scope="module")
def images():
    return models.data.shapes(7, seed=5)[0]
