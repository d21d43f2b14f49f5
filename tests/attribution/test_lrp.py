"""LRP on the engine's own ops: each rule's formula, conservation, the same map for functional and
module code, batch norm merged, pixel seeds kept cropped, and a RuleError (never a silent map) for
an op without a sound rule. Against Zennit itself: test_rule_parity.py."""
import numpy as np
import pytest

import saliency as sl
from saliency import nn
from saliency.attribution import RuleError, lrp, seeds
from saliency.attribution.lrp import (COMPOSITES, AlphaBeta, Epsilon, Flat, Gamma, Norm, Pass, WSquare, ZBox,
                                      ZPlus)
from saliency.autograd import trace
from saliency.nn import functional as F

from _attribution_models import randomize


def stab(z, eps=1e-6):
    return z + np.where(z < 0, -eps, eps)


# --- one linear layer: each rule against its formula in matrix form -------------------------------

class OneLayer(nn.Module):
    def __init__(self, n_in=7, n_out=4):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return self.fc(x.flatten(1))


def _layer():
    model = randomize(OneLayer(), seed=3, scale=1.0)
    x = np.random.default_rng(4).standard_normal((2, 7, 1, 1))  # mixed signs: the x- terms count
    w, b = model.fc.weight.numpy(), model.fc.bias.numpy()
    return model, x, w, b


def _by_hand(rule, x, w, b, r):
    """Zennit's formulas for one linear layer z = x w^T + b, r the relevance at z."""
    xp, xn = np.maximum(x, 0), np.minimum(x, 0)
    wp, wn = np.maximum(w, 0), np.minimum(w, 0)
    bp, bn = np.maximum(b, 0), np.minimum(b, 0)
    z = x @ w.T + b
    if isinstance(rule, Epsilon):
        return x * ((r / stab(z, rule.epsilon)) @ w)
    if isinstance(rule, ZPlus):
        s = r / stab(xp @ wp.T + xn @ wn.T + bp)
        return xp * (s @ wp) + xn * (s @ wn)
    if isinstance(rule, AlphaBeta):
        sp = r / stab(xp @ wp.T + xn @ wn.T + bp)
        sn = r / stab(xp @ wn.T + xn @ wp.T + bn)
        return rule.alpha * (xp * (sp @ wp) + xn * (sp @ wn)) - rule.beta * (xp * (sn @ wn) + xn * (sn @ wp))
    if isinstance(rule, Gamma):
        wu, wd = w + rule.gamma * wp, w + rule.gamma * wn
        bu, bd = b + rule.gamma * bp, b + rule.gamma * bn
        su = (z > 0) * r / stab(xp @ wu.T + xn @ wd.T + bu)
        sd = (z < 0) * r / stab(xp @ wd.T + xn @ wu.T + bd)
        return xp * (su @ wu) + xn * (su @ wd) + xp * (sd @ wd) + xn * (sd @ wu)
    if isinstance(rule, ZBox):
        lo, hi = np.full_like(x, rule.low), np.full_like(x, rule.high)
        s = r / stab(x @ w.T - lo @ wp.T - hi @ wn.T)
        return x * (s @ w) - lo * (s @ wp) - hi * (s @ wn)
    if isinstance(rule, Flat):
        ones = np.ones_like(w)
        return (r / stab(np.ones_like(x) @ ones.T)) @ ones
    if isinstance(rule, WSquare):
        return (r / stab(np.ones_like(x) @ (w * w).T + b * b)) @ (w * w)
    if isinstance(rule, Norm):
        return x * ((r / stab(z)) @ w)
    raise AssertionError(rule)


RULES = [Epsilon(), Epsilon(0.25), ZPlus(), AlphaBeta(), AlphaBeta(1.0, 0.0), Gamma(), Gamma(0.5),
         ZBox(-1.0, 2.0), Flat(), WSquare(), Norm()]


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_each_rule_is_zennits_formula_on_a_linear_layer(rule):
    model, x, w, b = _layer()
    y = x.reshape(2, -1) @ w.T + b
    k = y.argmax(axis=1)
    r = np.zeros_like(y)
    r[np.arange(2), k] = y[np.arange(2), k]  # relevance starts from v * y
    attr = lrp(model, x, rules={"fc": rule})
    np.testing.assert_allclose(attr.map.reshape(2, -1), _by_hand(rule, x.reshape(2, -1), w, b, r), rtol=1e-12,
                               atol=1e-14)


def test_rules_check_their_parameters():
    with pytest.raises(ValueError, match="alpha - beta = 1"):
        AlphaBeta(2.0, 2.0)
    model, x, _, _ = _layer()
    with pytest.raises(TypeError, match="rule object"):
        lrp(model, x, rules={"fc": "epsilon"})
    with pytest.raises(ValueError, match="unknown composite 'zplus'"):
        lrp(model, x, composite="zplus")


# --- conservation on networks with every kind of op --------------------------------------------------

class Mixed(nn.Module):
    """Convolutions (strided, grouped, transposed, sub-pixel), batch norm, residual addition,
    concatenation, max and average pooling, bilinear upsampling, pixel shuffle, padding, a mean and
    a linear head, written partly as functions."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.side = nn.Conv2d(8, 8, 1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.shuffle = nn.Conv2d(8, 8, 3, padding=1)
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(2, 4, 3, padding=1))
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        h = F.relu(self.bn(self.stem(x)))
        d = F.relu(self.down(h))
        d = d + F.relu(self.side(d))                           # residual add
        d = F.max_pool2d(F.pad(d, (1, 1, 1, 1)), 2, stride=1)  # pad, then max pooling
        u = F.relu(self.up(sl.cat([d[:, :, 1:, 1:], F.avg_pool2d(d, 2, stride=1)], dim=1)))
        u = F.interpolate(u, scale_factor=0.5, mode="bilinear", align_corners=False)
        p = F.pixel_shuffle(F.relu(self.shuffle(u)), 2)        # (N, 2, H, W)
        p = F.relu(self.dec(p))
        return self.head(p.mean(dim=(2, 3)))


def _mixed(seed=0):
    model = randomize(Mixed(), seed=seed)
    bn = model.bn
    bn.running_mean.numpy()[...] = np.random.default_rng(seed).standard_normal(8) * 0.1
    bn.running_var.numpy()[...] = np.random.default_rng(seed + 1).uniform(0.5, 1.5, 8)
    return model.eval()


def _zero_biases(model):
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.numpy()[...] = 0
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.numpy()[...] = 0
    return model


@pytest.mark.parametrize("composite", [c for c in COMPOSITES if "alpha" not in c])
def test_every_composite_conserves_the_score_without_biases(composite):
    """Every op's rule passes on all the relevance it gets when no bias takes a share and the
    stabilisers are tiny (ZPlus loses what reaches outputs without positive contributions, which a
    branch added before its ReLU could send: here every branch is rectified). AlphaBeta is left out:
    where an output has no negative contributions its beta share has nothing to go to (Zennit's
    formula), so it gives alpha times the relevance there."""
    model = _zero_biases(_mixed())
    x = np.random.default_rng(5).uniform(0, 1, (2, 3, 16, 16))
    attr = lrp(model, x, composite=composite, epsilon=1e-12, stabilizer=1e-12)
    c = attr.extras["conservation"]
    np.testing.assert_allclose(c["input"], c["score"], rtol=1e-9)
    np.testing.assert_allclose(attr.map.reshape(2, -1).sum(axis=1), c["score"], rtol=1e-9)
    np.testing.assert_allclose(c["biases"], 0, atol=1e-12)


def test_conservation_accounts_for_biases_and_stabilisers():
    model = _mixed()
    x = np.random.default_rng(6).uniform(0, 1, (2, 3, 16, 16))
    attr = lrp(model, x, composite="epsilon_plus")
    c = attr.extras["conservation"]
    assert set(c) == {"score", "input", "biases", "dropped", "stabilisers"} and c["score"].shape == (2,)
    np.testing.assert_allclose(c["input"] + c["biases"] + c["dropped"] + c["stabilisers"], c["score"], rtol=1e-12)
    assert np.all(np.abs(c["biases"]) > 1e-3)                 # the biases took a visible share
    assert np.all(np.abs(c["stabilisers"]) < 1e-3 * np.abs(c["score"]))
    zeroed = lrp(model, x, composite="epsilon_plus", zero_bias=True).extras["conservation"]
    np.testing.assert_allclose(zeroed["biases"], 0, atol=1e-12)  # zero_bias: no weight rule uses a bias


def test_k_seeds_in_one_pass_equal_one_at_a_time():
    model = _mixed()
    x = np.random.default_rng(7).uniform(0, 1, (2, 3, 16, 16))
    both = lrp(model, x, seeds.classes([1, 3]))
    for i, k in enumerate([1, 3]):
        one = lrp(model, x, seeds.classes([k]))
        np.testing.assert_allclose(both.map[i], one.map[0], rtol=1e-12, atol=1e-15)
        for key, value in both.extras["conservation"].items():
            np.testing.assert_allclose(value[i], one.extras["conservation"][key][0], rtol=1e-12, atol=1e-15)
    chunked = lrp(model, x, seeds.classes([1, 3]), chunk=1)
    np.testing.assert_allclose(chunked.map, both.map, rtol=1e-12, atol=1e-15)


# --- the same map whatever way the network is written ------------------------------------------------

class Block(nn.Module):
    """A residual block as module code: nn.ReLU modules, one reused."""

    def __init__(self, functional=False):
        super().__init__()
        self.functional = functional
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.relu2 = nn.ReLU()

    def forward(self, x):
        if self.functional:
            out = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(out)) + x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu2(sl.add(self.bn2(self.conv2(out)), x))


class Net(nn.Module):
    def __init__(self, functional=False, reuse=False):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block = Block(functional)
        self.fc = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.reuse = reuse

    def forward(self, x):
        h = self.act(self.stem(x))
        h = self.block(h)
        if self.reuse:
            h = self.act(h)   # the same ReLU module a second time
        return self.fc(h.mean(dim=(2, 3)))


def _same_weights(*models):
    models = [m.double() for m in models]
    first = randomize(models[0], seed=9)
    for m in first.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_var.numpy()[...] = np.random.default_rng(1).uniform(0.5, 1.5, m.num_features)
    for m in models[1:]:
        m.load_state_dict(first.state_dict())
    return [m.eval() for m in models]


@pytest.mark.parametrize("composite", ["epsilon_plus_flat", "epsilon_gamma_box", "epsilon_alpha2_beta1"])
def test_functional_code_gets_the_map_of_module_code(composite):
    modules, functional = _same_weights(Net(), Net(functional=True))
    x = np.random.default_rng(10).uniform(0, 1, (2, 3, 8, 8))
    a, b = lrp(modules, x, composite=composite), lrp(functional, x, composite=composite)
    np.testing.assert_array_equal(a.map, b.map)


def test_a_reused_relu_module_gives_the_map_of_separate_ones():
    reused, separate = _same_weights(Net(reuse=True), Net(reuse=True))
    separate.act2 = nn.ReLU()

    def forward(x):
        h = separate.act(separate.stem(x))
        return separate.fc(separate.act2(separate.block(h)).mean(dim=(2, 3)))

    x = np.random.default_rng(11).uniform(0, 1, (1, 3, 8, 8))
    np.testing.assert_array_equal(lrp(reused, x).map, lrp(forward, x).map)


def test_batch_norm_is_merged_into_the_convolution_before_it():
    """conv + batch norm gives the map of one convolution with the norm folded into its weights, as
    Zennit's canonizer merges it (and nn.fuse's fused pair gives the same map)."""
    seq = randomize(nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.BatchNorm2d(5), nn.ReLU(), nn.Flatten(),
                                  nn.Linear(5 * 36, 4)).double(), seed=12)
    bn = seq[1]
    bn.running_mean.numpy()[...] = np.linspace(-0.5, 0.5, 5)
    bn.running_var.numpy()[...] = np.linspace(0.5, 2.0, 5)
    bn.weight.numpy()[...] = np.array([1.5, -0.7, 0.3, 2.0, -1.1])  # negative scales flip w+ and w-
    seq.eval()
    scale = bn.weight.numpy() / np.sqrt(bn.running_var.numpy() + bn.eps)
    folded = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(5 * 36, 4)).double()
    folded[0].weight.data = seq[0].weight.numpy() * scale[:, None, None, None]
    folded[0].bias.data = (seq[0].bias.numpy() - bn.running_mean.numpy()) * scale + bn.bias.numpy()
    folded[3].load_state_dict(seq[4].state_dict())
    x = np.random.default_rng(13).uniform(0, 1, (2, 3, 6, 6))
    for composite in ("epsilon_plus", "epsilon_gamma_box", "epsilon_alpha2_beta1_flat"):
        a, b = lrp(seq, x, composite=composite), lrp(folded.eval(), x, composite=composite)
        np.testing.assert_allclose(a.map, b.map, rtol=1e-10, atol=1e-14)
        fused = lrp(nn.fuse(seq), x, composite=composite)
        np.testing.assert_allclose(fused.map, b.map, rtol=1e-10, atol=1e-14)
        nn.unfuse(seq)


# --- dense outputs: pixel seeds stay cropped ------------------------------------------------------------

def _decoder():
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 6, 3, stride=2, padding=1),
                          nn.ReLU(), nn.Upsample(scale_factor=2, mode="bilinear"), nn.Conv2d(6, 4, 3, padding=1),
                          nn.ReLU(), nn.ConvTranspose2d(4, 2, 3, padding=1))
    return randomize(model, seed=14).eval()


@pytest.mark.parametrize("composite", ["epsilon_plus_flat", "epsilon_gamma_box", "epsilon"])
def test_pixel_seeds_give_the_map_of_the_dense_pass(composite):
    model = _decoder()
    x = np.random.default_rng(15).uniform(0, 1, (1, 3, 40, 40))
    seed = seeds.pixels([(5, 7), (30, 22), (20, 20)], channel=1)
    cropped = lrp(model, x, seed, composite=composite)
    with trace():  # a traced pass shows dense arrays: the windows are not used
        dense = lrp(model, x, seed, composite=composite)
    np.testing.assert_allclose(cropped.map, dense.map, rtol=1e-10, atol=1e-15)
    support = np.argwhere(np.abs(cropped.map[0]).sum(axis=(0, 1)) > 0)
    assert support.max(axis=0).tolist() <= [5 + 8, 7 + 8] and support.min() >= 0  # within its receptive field
    region = seeds.region((10, 12, 16, 20))
    cropped = lrp(model, x, region, composite=composite)
    with trace():
        dense = lrp(model, x, region, composite=composite)
    np.testing.assert_allclose(cropped.map, dense.map, rtol=1e-10, atol=1e-15)
    c = cropped.extras["conservation"]
    np.testing.assert_allclose(c["input"] + c["biases"] + c["dropped"] + c["stabilisers"], c["score"], rtol=1e-12)


# --- ops without a sound rule --------------------------------------------------------------------------

class SoftmaxInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.body = nn.Sequential(nn.ReLU(), nn.Flatten(), nn.Softmax(dim=1))
        self.fc = nn.Linear(4 * 16, 3)

    def forward(self, x):
        return self.fc(self.body(self.conv(x)))


def test_softmax_inside_the_network_is_a_rule_error_naming_it_and_its_module():
    model = randomize(SoftmaxInside(), seed=16).eval()
    x = np.random.default_rng(17).uniform(0, 1, (1, 3, 4, 4))
    with pytest.raises(RuleError, match=r"no rule for Softmax \(SoftmaxBackward0\) in module 'body.2'"):
        lrp(model, x)
    by_module = lrp(model, x, rules={"body.2": Pass()})
    by_op = lrp(model, x, rules={"Softmax": Pass()})
    np.testing.assert_array_equal(by_module.map, by_op.map)
    assert np.abs(by_module.map).sum() > 0


@pytest.mark.parametrize("body, op", [
    (lambda h: h * h, "Mul"),
    (lambda h: F.layer_norm(h, h.shape[1:]), "LayerNorm"),
    (lambda h: h @ h.transpose(2, 3), "Matmul"),
])
def test_ops_without_a_sound_rule_are_named(body, op):
    conv = randomize(nn.Conv2d(3, 4, 3, padding=1), seed=18)

    def model(x):
        return body(conv(x)).mean(dim=(2, 3))

    with pytest.raises(RuleError, match=f"no rule for {op} "):
        lrp(model, np.random.default_rng(19).uniform(0, 1, (1, 3, 4, 4)))


def test_a_weight_rule_on_an_op_without_weights_is_refused():
    model = randomize(SoftmaxInside(), seed=16).eval()
    with pytest.raises(RuleError, match="ZPlus is a rule for layers with weights"):
        lrp(model, np.ones((1, 3, 4, 4)), rules={"Softmax": ZPlus()})


def test_the_first_layer_and_module_rules_override_the_composite():
    model = _mixed()
    x = np.random.default_rng(20).uniform(0, 1, (1, 3, 16, 16))
    default = lrp(model, x, composite="epsilon_plus_flat")                 # Flat on stem
    same = lrp(model, x, composite="epsilon_plus", rules={"first": Flat()})
    np.testing.assert_allclose(default.map, same.map, rtol=1e-12)
    also = lrp(model, x, composite="epsilon_plus", rules={"stem": Flat()})
    np.testing.assert_allclose(default.map, also.map, rtol=1e-12)
    other = lrp(model, x, composite="epsilon_plus_flat", rules={"stem": Epsilon()})
    assert not np.allclose(other.map, default.map)


def test_epsilon_gamma_box_takes_per_channel_bounds():
    model = _mixed()
    x = np.random.default_rng(21).uniform(-1, 1, (1, 3, 16, 16))
    low, high = np.full((1, 3, 1, 1), -1.0), np.full((1, 3, 1, 1), 1.0)
    a = lrp(model, x, composite="epsilon_gamma_box", low=low, high=high)
    b = lrp(model, x, composite="epsilon_gamma_box", low=-1.0, high=1.0)
    np.testing.assert_allclose(a.map, b.map, rtol=1e-12)


@pytest.mark.parametrize("composite", ["epsilon_plus", "epsilon_alpha2_beta1", "epsilon_gamma_box"])
def test_inputs_of_both_signs_run_as_one_stacked_product_with_the_same_map(composite, monkeypatch):
    """x+ w+ + x- w- as one convolution over [x+ x-] and [w+ w-] gives the map of the two products, for
    the whole map and for pixel seeds (no ReLU between the convolutions: their inputs have both signs)."""
    from saliency.autograd.ops.conv import Convolution

    model = randomize(nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.Conv2d(6, 5, 3, padding=1),
                                    nn.Conv2d(5, 2, 1)), seed=22).eval()
    x = np.random.default_rng(23).uniform(-1, 1, (2, 3, 24, 24))
    seed = seeds.pixels([(3, 4), (20, 11)], channel=1)
    stacked = [lrp(model, x, s, composite=composite).map for s in (seeds.ones(), seed)]
    monkeypatch.setattr(Convolution, "stacks", property(lambda self: False))
    apart = [lrp(model, x, s, composite=composite).map for s in (seeds.ones(), seed)]
    for a, b in zip(stacked, apart):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


class Gated(nn.Module):
    """A squeeze-and-excitation block: the features scaled by a gate computed from them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.squeeze = nn.Linear(4, 4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = F.relu(self.conv(x))
        gate = sl.sigmoid(self.squeeze(h.mean(dim=(2, 3))))
        h = h * gate[:, :, None, None]
        return self.fc(h.mean(dim=(2, 3)))


def test_pass_on_a_gate_gives_the_relevance_to_the_signal():
    model = randomize(Gated(), seed=24).eval()
    x = np.random.default_rng(25).uniform(0, 1, (2, 3, 6, 6))
    with pytest.raises(RuleError, match=r"no rule for Mul \(MulBackward0\)"):
        lrp(model, x)
    attr = lrp(model, x, rules={"Mul": Pass()}, zero_bias=True, epsilon=1e-12, stabilizer=1e-12)
    c = attr.extras["conservation"]
    np.testing.assert_allclose(c["input"], c["score"], rtol=1e-9)  # none went down the gate's path
    with pytest.raises(RuleError, match="Pass\\(\\) cannot choose the input"):
        lrp(lambda t: (t * t).mean(dim=(2, 3)), x, rules={"Mul": Pass()})


def test_a_normalisation_inside_the_network_passes_the_relevance_on():
    """(x - mean) / std written in the model gives the map of the model fed the normalised image: adding
    or scaling by a constant is an elementwise function of the data, whose relevance passes unchanged
    (a proportional split would hand the mean a share, and divide by x - mean where x is near it)."""
    net = _mixed()
    mean, std = np.array([0.5, 0.4, 0.45]).reshape(1, 3, 1, 1), np.array([0.2, 0.25, 0.3]).reshape(1, 3, 1, 1)

    def inside(x):
        return net((x - sl.tensor(mean)) / sl.tensor(std))

    x = np.random.default_rng(26).uniform(0, 1, (2, 3, 16, 16))
    for composite in ("epsilon_plus_flat", "epsilon"):
        np.testing.assert_allclose(lrp(inside, x, composite=composite).map,
                                   lrp(net, (x - mean) / std, composite=composite).map, rtol=1e-10, atol=1e-14)
