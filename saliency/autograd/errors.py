"""Errors the ops raise for inputs a caller can get wrong, with what a layer expected."""


class LayerInputError(ValueError):
    """A layer's input does not fit its weight: `expected` and `got` count `what` ("channels" of a
    convolution, "features" of a linear layer); `input_shape` is the shape the layer was given."""

    def __init__(self, message, *, what, expected, got, input_shape):
        super().__init__(message)
        self.what, self.expected, self.got, self.input_shape = what, expected, got, tuple(input_shape)
