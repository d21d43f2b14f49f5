"""`saliency.cuda`, for model files that ask PyTorch's question `torch.cuda.is_available()`:
saliency computes on the CPU only, so the answer is no and such files pick the CPU."""


def is_available():
    return False


def device_count():
    return 0
