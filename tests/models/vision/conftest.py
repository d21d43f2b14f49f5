"""torch runs on one thread while these tests compare with torchvision: its float64 convolutions on
two OpenMP threads that wait by spinning take several times as long on a busy two-core machine."""
import pytest


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    try:
        import torch
    except ImportError:  # the tests that need it skip by themselves
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
