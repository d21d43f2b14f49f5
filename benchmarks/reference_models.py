"""The two reference models of the benchmarks, defined once for both engines.

`build(name, nn)` makes the model from either `saliency.nn` or `torch.nn` (the layer names and
arguments are the same; ours is fused with `saliency.nn.fuse`, as the zoo's models are);
`copy_weights(src, dst)` moves a torch model's weights into ours through state_dict, so both
engines compute the same function.
"""
import numpy as np

# (layer, positional args, keyword args)
LAYERS = {
    "classifier": [
        ("Conv2d", (3, 16, 3), {"padding": 1}), ("ReLU", (), {}), ("MaxPool2d", (2,), {}),
        ("Conv2d", (16, 32, 3), {"padding": 1}), ("ReLU", (), {}), ("MaxPool2d", (2,), {}),
        ("Conv2d", (32, 64, 3), {"padding": 1}), ("ReLU", (), {}), ("AdaptiveAvgPool2d", (1,), {}),
        ("Flatten", (), {}), ("Linear", (64, 10), {}),
    ],
    "depth": [
        ("Conv2d", (3, 16, 3), {"padding": 1}), ("ReLU", (), {}),
        ("Conv2d", (16, 32, 3), {"stride": 2, "padding": 1}), ("ReLU", (), {}),
        ("Conv2d", (32, 64, 3), {"stride": 2, "padding": 1}), ("ReLU", (), {}),
        ("Upsample", (), {"scale_factor": 2, "mode": "nearest"}),
        ("Conv2d", (64, 32, 3), {"padding": 1}), ("ReLU", (), {}),
        ("Upsample", (), {"scale_factor": 2, "mode": "nearest"}),
        ("Conv2d", (32, 16, 3), {"padding": 1}), ("ReLU", (), {}),
        ("Conv2d", (16, 1, 3), {"padding": 1}),
    ],
}
INPUT_SHAPES = {"classifier": (3, 64, 64), "depth": (3, 128, 128)}


def build(name, nn):
    """The reference model `name` built from `nn` (saliency.nn or torch.nn); ours is fused
    (`saliency.nn.fuse`: the depth model's Upsample + Conv2d pairs run as sub-pixel convolutions)."""
    model = nn.Sequential(*[getattr(nn, layer)(*args, **kwargs) for layer, args, kwargs in LAYERS[name]])
    return nn.fuse(model) if nn.__name__ == "saliency.nn" else model


def copy_weights(torch_model, our_model):
    """Load the torch model's weights into ours (PyTorch's key names and layouts)."""
    our_model.load_state_dict({k: v.detach().cpu().numpy() for k, v in torch_model.state_dict().items()})
    return our_model


def conv_layers(name, batch=1):
    """(label, input shape, weight shape, stride, padding, upsampled-before) for each Conv2d of the model."""
    _, h, w = INPUT_SHAPES[name]
    out, upsample = [], False
    for layer, args, kwargs in LAYERS[name]:
        if layer == "Conv2d":
            cin, cout, k = args
            s, p = kwargs.get("stride", 1), kwargs.get("padding", 0)
            out.append((f"Conv2d({cin},{cout},{k},s={s},p={p}) @{h}x{w}", (batch, cin, h, w), (cout, cin, k, k), s, p,
                        upsample))
            h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            upsample = False
        elif layer == "MaxPool2d":
            h, w = h // args[0], w // args[0]
        elif layer == "Upsample":
            h, w, upsample = h * kwargs["scale_factor"], w * kwargs["scale_factor"], True
    return out


def flops(x_shape, w_shape, stride, padding):
    """Multiply-adds x 2 of one conv forward (the input VJP costs the same)."""
    n, cin, h, w = x_shape
    cout, _, kh, kw = w_shape
    oh, ow = (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1
    return 2.0 * n * cout * cin * kh * kw * oh * ow


def random_input(name, batch, seed=0):
    return np.random.default_rng(seed).random((batch,) + INPUT_SHAPES[name]).astype(np.float32)
