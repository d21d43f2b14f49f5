"""Small models with known weights for the attribution tests (float64 unless a test asks)."""
import numpy as np

import saliency as sl
from saliency import nn


def randomize(model, seed=0, dtype=np.float64, scale=0.5):
    """Give every parameter N(0, scale^2) values of `dtype`, reproducibly; returns the model."""
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data = (scale * rng.standard_normal(p.shape)).astype(dtype)
    return model


class FunctionalReLUs(nn.Module):
    """A classifier whose ReLUs are functions (sl.relu), not modules."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        h = sl.max_pool2d(sl.relu(self.conv1(x)), 2)
        h = sl.relu(self.conv2(h)).mean(dim=(2, 3))
        return self.fc(h)


def make_cnn(dtype=np.float64, seed=0):
    """A small random classifier (N, 3, 12, 12) -> (N, 5): conv, ReLU, max-pool, conv, ReLU, avg-pool, linear."""
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 5))
    return randomize(model, seed, dtype)


def make_dense(dtype=np.float64, seed=1):
    """A small random dense model (N, 3, H, W) -> (N, 2, H, W)."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, padding=1))
    return randomize(model, seed, dtype)


def make_linear(shape=(3, 6, 5), k=4, dtype=np.float64, seed=2):
    """y = flatten(x) @ W.T + b: (N, *shape) -> (N, k); dy_k/dx = W[k] reshaped to `shape`."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(shape)), k))
    return randomize(model, seed, dtype)
