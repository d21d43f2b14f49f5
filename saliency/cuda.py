"""`saliency.cuda`, for model files that ask PyTorch's question `torch.cuda.is_available()`:
saliency computes on the CPU only, so the answer is no and such files pick the CPU."""
from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0
