"""The model zoo: architectures, data generators and trained weights."""
from . import data
