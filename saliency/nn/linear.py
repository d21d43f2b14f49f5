"""`Linear` (y = x W^T + b, PyTorch's layout and initialisation) and `Identity`."""

from . import functional as F
from . import init
from .module import Module


class Identity(Module):
    """Returns its input unchanged (a placeholder, e.g. for a removed layer); ignores any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features).

    Initialised as PyTorch does: weight ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_ with a=sqrt(5)),
    bias ~ U(-1/sqrt(in), 1/sqrt(in)); `generator` makes it reproducible.
    """

    def __init__(self, in_features, out_features, bias=True, dtype=None, generator=None):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        init.register_weight_and_bias(self, (self.out_features, self.in_features), bias, dtype)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        init.default_weight_and_bias_(self.weight, self.bias, generator)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
