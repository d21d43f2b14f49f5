"""saliency.nn.fuse / unfuse: an explicit step that lets Upsample(nearest) + 3x3 Conv2d pairs of a
Sequential run as one sub-pixel convolution, and Conv2d + BatchNorm2d pairs in eval mode as one
convolution, with the same results, keys and modules."""
import copy
from collections import Counter, OrderedDict

import numpy as np
import pytest

import saliency as sl
import saliency.nn as nn
from saliency.nn.fusion import fused_pairs

FUSED, UPSAMPLE, CONV = "UpsampleConvolutionBackward0", "UpsampleNearest2DBackward0", "ConvolutionBackward0"


def node_names(y):
    """Counter of the node names of y's graph (each node once)."""
    seen, stack, names = set(), [y.grad_fn], Counter()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names[node.name()] += 1
        stack.extend(n for n, _ in node.next_functions)
    return names


def decoder():
    """conv -> relu -> [up x2 -> conv 3x3] -> relu -> [up x3 -> conv 3x3]: two fusable pairs, float64."""
    sl.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                         nn.Upsample(scale_factor=2), nn.Conv2d(4, 3, 3, padding=1), nn.ReLU(),
                         nn.Upsample(scale_factor=3, mode="nearest"),
                         nn.Conv2d(3, 2, 3, padding=1, bias=False)).double()


class Net(nn.Module):
    """A decoder nested in a Module and in a named Sequential: fuse walks every submodule."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(OrderedDict(dec=decoder(), act=nn.Sigmoid()))  # seeds the generator
        self.stem = nn.Conv2d(2, 2, 1)

    def forward(self, x):
        return self.body(self.stem(x))


def run(model, x_np, v_np):
    x = sl.tensor(x_np, requires_grad=True)
    y = model(x)
    y.backward(sl.tensor(v_np))
    return y, x.grad.numpy()


def inputs(model, shape=(2, 2, 5, 6)):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    out_shape = model(sl.tensor(x)).shape
    return x, rng.standard_normal(out_shape)


@pytest.mark.parametrize("make", [decoder, lambda: Net().double()], ids=["sequential", "nested"])
def test_fuse_gives_the_same_outputs_and_gradients_with_one_node_per_pair(make):
    plain, fused = make(), make()
    assert nn.fuse(fused) is fused
    x, v = inputs(plain)
    y0, g0 = run(plain, x, v)
    y1, g1 = run(fused, x, v)
    np.testing.assert_allclose(y1.numpy(), y0.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g1, g0, rtol=1e-12, atol=1e-12)
    for p0, p1 in zip(plain.parameters(), fused.parameters()):
        np.testing.assert_allclose(p1.grad.numpy(), p0.grad.numpy(), rtol=1e-12, atol=1e-12)
    n0, n1 = node_names(y0), node_names(y1)
    assert n0[UPSAMPLE] == 2 and n0[FUSED] == 0
    assert n1[FUSED] == 2 and n1[UPSAMPLE] == 0 and n1[CONV] == n0[CONV] - 2  # each pair: one node, not two
    assert n1 - Counter({FUSED: 2}) == n0 - Counter({UPSAMPLE: 2, CONV: 2})  # and nothing else changed


def test_a_sequential_is_not_fused_unless_asked():
    model = decoder()
    x, _ = inputs(model)
    names = node_names(model(sl.tensor(x, requires_grad=True)))
    assert names[FUSED] == 0 and names[UPSAMPLE] == 2
    assert fused_pairs(model) == []


def test_fuse_keeps_state_dict_parameters_and_modules():
    model = Net().double()
    keys = list(model.state_dict())
    modules = [(name, type(m), id(m)) for name, m in model.named_modules()]
    params = [(name, id(p)) for name, p in model.named_parameters()]
    text = repr(model)
    nn.fuse(model)
    assert fused_pairs(model) == [("body.dec.2", "body.dec.3", "upsample_conv2d"),
                                  ("body.dec.5", "body.dec.6", "upsample_conv2d")]
    assert list(model.state_dict()) == keys
    assert [(name, type(m), id(m)) for name, m in model.named_modules()] == modules
    assert [(name, id(p)) for name, p in model.named_parameters()] == params
    assert repr(model) == text
    # weights load the same way into a fused model, and it then computes the plain model's function
    other = Net().double()
    other.load_state_dict(model.state_dict())
    x, v = inputs(model)
    np.testing.assert_allclose(run(nn.fuse(other), x, v)[0].numpy(), run(model, x, v)[0].numpy(), rtol=1e-12)


def test_unfuse_restores_the_plain_graph():
    plain, model = decoder(), nn.fuse(decoder())
    assert nn.unfuse(model) is model
    assert fused_pairs(model) == []
    x, v = inputs(model)
    y0, g0 = run(plain, x, v)
    y1, g1 = run(model, x, v)
    assert node_names(y1) == node_names(y0)
    np.testing.assert_array_equal(y1.numpy(), y0.numpy())
    np.testing.assert_array_equal(g1, g0)
    nn.fuse(model)  # and fuse again
    assert node_names(model(sl.tensor(x, requires_grad=True)))[FUSED] == 2


@pytest.mark.parametrize("hooked", [2, 3], ids=["hook on the upsample", "hook on the conv"])
@pytest.mark.parametrize("kind", ["forward", "forward_pre", "full_backward"])
def test_a_hook_registered_after_fuse_runs_that_pair_unfused(hooked, kind):
    model = nn.fuse(decoder())
    x, v = inputs(model)
    seen = []
    register = getattr(model[hooked], f"register_{kind}_hook")
    handle = register(lambda module, *args: seen.append(type(module).__name__))
    y, g = run(model, x, v)
    assert seen == [type(model[hooked]).__name__]
    names = node_names(y)
    assert names[FUSED] == 1 and names[UPSAMPLE] == 1  # the other pair stays fused
    y0, g0 = run(nn.unfuse(decoder()), x, v)
    np.testing.assert_allclose(y.numpy(), y0.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-12)
    handle.remove()  # without the hook the plan applies again
    assert node_names(model(sl.tensor(x, requires_grad=True)))[FUSED] == 2


def test_a_forward_hook_sees_the_upsampled_input_of_the_conv():
    model = nn.fuse(decoder())
    seen = []
    model[3].register_forward_hook(lambda module, args, out: seen.append((args[0].shape, out.shape)))
    model(sl.tensor(np.zeros((1, 2, 5, 6))))
    assert seen == [((1, 4, 10, 12), (1, 3, 10, 12))]


def test_a_module_changed_after_fuse_falls_back_to_the_two_modules():
    model = nn.fuse(decoder())
    model[2].mode = "bilinear"
    model[6] = nn.Conv2d(3, 2, 5, padding=2).double()
    names = node_names(model(sl.tensor(np.ones((1, 2, 5, 6)), requires_grad=True)))
    assert names[FUSED] == 0 and names["UpsampleBilinear2DBackward0"] + names[UPSAMPLE] == 2


@pytest.mark.parametrize("upsample,conv", [
    (dict(scale_factor=2, mode="bilinear"), dict(kernel_size=3, padding=1)),
    (dict(scale_factor=2), dict(kernel_size=5, padding=2)),
    (dict(scale_factor=2), dict(kernel_size=3, padding=1, stride=2)),
    (dict(scale_factor=2), dict(kernel_size=3, padding=0)),
    (dict(scale_factor=2), dict(kernel_size=3, padding=2, dilation=2)),
    (dict(scale_factor=2), dict(kernel_size=3, padding=1, groups=2)),
    (dict(scale_factor=1), dict(kernel_size=3, padding=1)),
], ids=["bilinear", "5x5", "stride 2", "padding 0", "dilation 2", "groups 2", "scale 1"])
def test_pairs_that_cannot_run_as_one_op_are_not_fused(upsample, conv):
    model = nn.fuse(nn.Sequential(nn.Upsample(**upsample), nn.Conv2d(4, 4, **conv)).double())
    assert fused_pairs(model) == []
    names = node_names(model(sl.tensor(np.ones((1, 4, 6, 6)), requires_grad=True)))
    assert names[FUSED] == 0 and names[CONV] == 1


def test_other_orders_and_layers_between_are_not_fused():
    model = nn.fuse(nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.Upsample(scale_factor=2),  # conv, then up: no
                                  nn.ReLU(), nn.Conv2d(2, 2, 3, padding=1),                    # a ReLU between: no
                                  nn.Upsample(scale_factor=2)))                                # up at the end: no
    assert fused_pairs(model) == []


def test_a_hook_present_at_fuse_time_is_not_planned():
    model = decoder()
    handle = model[3].register_forward_hook(lambda *a: None)
    nn.fuse(model)
    assert [pair[0] for pair in fused_pairs(model)] == ["5"]
    handle.remove()
    assert node_names(model(sl.tensor(np.ones((1, 2, 5, 6)), requires_grad=True)))[FUSED] == 1  # until fused again


def test_copies_and_slices():
    model = nn.fuse(decoder())
    clone = copy.deepcopy(model)
    assert fused_pairs(clone) == fused_pairs(model)
    assert node_names(clone(sl.tensor(np.ones((1, 2, 5, 6)), requires_grad=True)))[FUSED] == 2
    assert fused_pairs(model[2:]) == []  # a slice is a new Sequential, not fused
    assert fused_pairs(nn.fuse(model[2:])) == [("2", "3", "upsample_conv2d"), ("5", "6", "upsample_conv2d")]


def test_fuse_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="saliency.nn.Module"):
        nn.fuse(lambda x: x)


def test_zoo_models_are_built_fused():
    from saliency.models import zoo

    for name in zoo.SPECS:
        model = zoo.build(name)
        plain = zoo.spec(name).build()
        assert list(model.state_dict()) == list(plain.state_dict())
        assert all("_fusion_plan" in vars(seq) for seq in model.modules() if isinstance(seq, nn.Sequential))
        assert not any("_fusion_plan" in vars(seq) for seq in plain.modules() if isinstance(seq, nn.Sequential))


def conv_bn(affine=True, conv_bias=True, norm_bias=True):
    """conv -> batch norm (running statistics drawn) -> relu, float64."""
    sl.manual_seed(1)
    rng = np.random.default_rng(1)
    seq = nn.Sequential(nn.Conv2d(3, 5, 3, stride=2, padding=1, bias=conv_bias),
                        nn.BatchNorm2d(5, affine=affine, bias=norm_bias), nn.ReLU()).double()
    bn = seq[1]
    bn.running_mean.numpy()[:] = rng.standard_normal(5)
    bn.running_var.numpy()[:] = rng.random(5) + 0.2
    if affine:
        bn.weight.numpy()[:] = rng.standard_normal(5)
        if norm_bias:
            bn.bias.numpy()[:] = rng.standard_normal(5)
    return seq


@pytest.mark.parametrize("affine, conv_bias, norm_bias",
                         [(True, True, True), (True, False, True), (False, True, False), (True, True, False)])
def test_a_conv_and_its_batch_norm_in_eval_mode_run_as_one_convolution(affine, conv_bias, norm_bias):
    """The outputs and every gradient (input, the convolution's and the norm's parameters) are the
    unfused ones; the graph has no batch-norm node."""
    seq = conv_bn(affine, conv_bias, norm_bias).eval()
    x = sl.tensor(np.random.default_rng(2).standard_normal((2, 3, 9, 8)), requires_grad=True)
    params = list(seq.parameters())
    y = seq(x)
    want = sl.autograd.grad((y * y).sum(), [x] + params)
    nn.fuse(seq)
    assert fused_pairs(seq) == [("0", "1", "conv2d_batch_norm")]
    fused = seq(x)
    assert "NativeBatchNormBackward0" in node_names(y) and "NativeBatchNormBackward0" not in node_names(fused)
    np.testing.assert_allclose(fused.numpy(), y.numpy(), rtol=1e-12, atol=1e-12)
    for got, ref in zip(sl.autograd.grad((fused * fused).sum(), [x] + params), want):
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_in_training_mode_a_fused_conv_and_batch_norm_run_on_their_own():
    """Batch statistics, and the running statistics updated as without the fusion."""
    plain, fused = conv_bn().train(), nn.fuse(conv_bn().train())
    x = sl.tensor(np.random.default_rng(3).standard_normal((4, 3, 8, 8)))
    np.testing.assert_array_equal(fused(x).numpy(), plain(x).numpy())
    np.testing.assert_array_equal(fused[1].running_mean.numpy(), plain[1].running_mean.numpy())
    np.testing.assert_array_equal(fused[1].running_var.numpy(), plain[1].running_var.numpy())


def test_a_hook_on_the_batch_norm_keeps_it_apart():
    seq = nn.fuse(conv_bn().eval())
    seen = []
    seq[1].register_forward_hook(lambda m, inputs, output: seen.append(output.shape))
    y = seq(sl.tensor(np.ones((1, 3, 6, 6))))
    assert seen == [(1, 5, 3, 3)] and "NativeBatchNormBackward0" in node_names(y)


def test_a_large_weight_on_a_small_map_is_not_folded():
    """Folding would pass over 64 x 32 x 9 weights to save a pass over 64 x 2 x 2 outputs."""
    sl.manual_seed(2)
    seq = nn.fuse(nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64)).double().eval())
    small, large = (sl.tensor(np.ones((1, 32, s, s)), requires_grad=True) for s in (2, 32))
    assert "NativeBatchNormBackward0" in node_names(seq(small))
    assert "NativeBatchNormBackward0" not in node_names(seq(large))
    plain = nn.unfuse(copy.deepcopy(seq))
    np.testing.assert_allclose(seq(small).numpy(), plain(small).numpy())


def frozen_conv_bn():
    """A frozen 64-channel 3x3 conv (Winograd's tiles on a 32x32 map) and its batch norm, fused,
    float32, and the same modules unfused."""
    sl.manual_seed(4)
    rng = np.random.default_rng(4)
    seq = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64)).eval()
    seq[1].running_var.copy_(rng.random(64) + 0.5)
    seq[1].running_mean.copy_(rng.standard_normal(64))
    seq.requires_grad_(False)
    plain = nn.unfuse(copy.copy(seq))  # the same parameter tensors, no plan
    plain._fusion_plan = {}
    return nn.fuse(seq), plain


def frozen_map(model, x):
    x = sl.tensor(x, requires_grad=True)
    y = model(x)
    return y.numpy().copy(), sl.autograd.grad((y * y).sum(), x)[0].numpy()


def check_same(fused, plain, x):
    for got, want in zip(frozen_map(fused, x), frozen_map(plain, x)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())  # float32 rounding


@pytest.mark.parametrize("change", ["data", "numpy", "load_state_dict", "init", "optimizer", "running_stats",
                                    "eps", "replaced", "train_step"])
def test_frozen_weights_are_folded_once_and_every_change_is_seen(change):
    """With frozen weights the fold (and the Winograd tiles of the folded weight) is computed once per
    version of the weights; every way of changing a weight or statistic gives the new map."""
    from saliency.kernels import winograd

    fused, plain = frozen_conv_bn()
    conv, bn = fused[0], fused[1]
    x = np.random.default_rng(5).standard_normal((1, 64, 32, 32)).astype(np.float32)
    check_same(fused, plain, x)
    calls = []
    real = winograd._transform_weight
    winograd._transform_weight = lambda w: (calls.append(1), real(w))[1]
    try:
        frozen_map(fused, x)
        frozen_map(fused, x)
        assert calls == []  # forward and VJP of two maps: the tiles of the first map's fold
        assert "NativeBatchNormBackward0" not in node_names(fused(sl.tensor(x, requires_grad=True)))
        rng = np.random.default_rng(6)
        if change == "data":
            conv.weight.data.normal_(0.0, 0.05)
        elif change == "numpy":
            conv.weight.numpy()[:, :, 1, 1] += 0.5
        elif change == "load_state_dict":
            state = {k: v * 1.5 for k, v in fused.state_dict().items()}
            fused.load_state_dict(state)
        elif change == "init":
            nn.init.kaiming_uniform_(conv.weight)
        elif change == "optimizer":
            fused.requires_grad_(True)
            frozen_map(plain, x)  # gradients for the parameters
            y = plain(sl.tensor(x))
            (y * y).sum().backward()
            sl.optim.SGD(fused.parameters(), lr=1e-3).step()
            fused.requires_grad_(False)
        elif change == "running_stats":
            bn.running_var.copy_(rng.random(64) + 2.0)
        elif change == "eps":
            bn.eps = 0.5
        elif change == "replaced":
            conv.weight.data = rng.standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.05
        elif change == "train_step":  # batch statistics update the running ones in place
            fused.train()
            fused(sl.tensor(x * 3.0 + 1.0))
            fused.eval()
        calls.clear()
        frozen_map(fused, x)
        frozen_map(fused, x)
        assert calls == [1]  # the new fold's tiles, once for the forward and VJP of both maps
        check_same(fused, plain, x)
    finally:
        winograd._transform_weight = real
