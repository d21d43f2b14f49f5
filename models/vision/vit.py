"""torchvision's Vision Transformer (Dosovitskiy et al., arXiv:2010.11929): the image cut into
patch_size x patch_size patches by a strided convolution (`conv_proj`), a learned class token put in
front, learned position embeddings added (`encoder.pos_embedding`), `num_layers` pre-norm encoder
blocks (`encoder.layers.encoder_layer_N`: ln_1, self_attention, ln_2, mlp), a last LayerNorm
(`encoder.ln`), and the class token's features classified by `heads.head`.

The input must be image_size x image_size (224 unless the builder is given `image_size=`): there is
one position embedding per patch. torchvision's released ViT weights were saved before its MLP blocks
were renamed and still call their layers `mlp.linear_1` / `mlp.linear_2`; `upgrade_keys` gives them
today's names (`mlp.0`, `mlp.3`), as torchvision's own loading does, and `load_state_dict` applies it.
"""
import math
import re
from collections import OrderedDict
from functools import partial
from typing import Any, Callable, Mapping, NamedTuple, Sequence, TypeVar

import saliency as sl
from saliency import Tensor, nn

from . import register
from .layers import MLP, ActivationLayer, Conv2dNormActivation, NormLayer

_V = TypeVar("_V")


class ConvStemConfig(NamedTuple):
    """One convolution of a convolutional stem (Xiao et al., arXiv:2106.14881) instead of conv_proj's patches."""

    out_channels: int
    kernel_size: int
    stride: int
    norm_layer: NormLayer = nn.BatchNorm2d
    activation_layer: ActivationLayer = nn.ReLU


class MLPBlock(MLP):
    """Linear (in_dim -> mlp_dim), GELU, Dropout, Linear (-> in_dim), Dropout: keys "0" and "3"."""

    def __init__(self, in_dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)


class EncoderBlock(nn.Module):
    """x + attention(ln_1(x)), then that + mlp(ln_2(that)); x is (batch, sequence, hidden_dim)."""

    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int, dropout: float, attention_dropout: float,
                 norm_layer: NormLayer = partial(nn.LayerNorm, eps=1e-6)) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=attention_dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim != 3:
            raise ValueError(f"Expected (batch_size, seq_length, hidden_dim) got {tuple(input.shape)}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """Position embeddings added, the encoder blocks, a last LayerNorm."""

    def __init__(self, seq_length: int, num_layers: int, num_heads: int, hidden_dim: int, mlp_dim: int, dropout: float,
                 attention_dropout: float, norm_layer: NormLayer = partial(nn.LayerNorm, eps=1e-6)) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(sl.zeros(1, seq_length, hidden_dim))
        nn.init.normal_(self.pos_embedding, std=0.02)  # from BERT
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(OrderedDict(
            (f"encoder_layer_{i}", EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout, attention_dropout, norm_layer))
            for i in range(num_layers)))
        self.ln = norm_layer(hidden_dim)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim != 3:
            raise ValueError(f"Expected (batch_size, seq_length, hidden_dim) got {tuple(input.shape)}")
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


class VisionTransformer(nn.Module):
    """torchvision's VisionTransformer: (N, 3, image_size, image_size) -> (N, num_classes) logits."""

    def __init__(self, image_size: int, patch_size: int, num_layers: int, num_heads: int, hidden_dim: int,
                 mlp_dim: int, dropout: float = 0.0, attention_dropout: float = 0.0, num_classes: int = 1000,
                 representation_size: int | None = None, norm_layer: NormLayer = partial(nn.LayerNorm, eps=1e-6),
                 conv_stem_configs: Sequence[ConvStemConfig] | None = None) -> None:
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"Input shape indivisible by patch size! image_size {image_size}, patch_size {patch_size}")
        self.image_size, self.patch_size, self.hidden_dim, self.mlp_dim = image_size, patch_size, hidden_dim, mlp_dim
        self.attention_dropout, self.dropout, self.num_classes = attention_dropout, dropout, num_classes
        self.representation_size, self.norm_layer = representation_size, norm_layer
        if conv_stem_configs is not None:
            stem, channels = nn.Sequential(), 3
            for i, cfg in enumerate(conv_stem_configs):
                stem.add_module(f"conv_bn_relu_{i}", Conv2dNormActivation(
                    channels, cfg.out_channels, kernel_size=cfg.kernel_size, stride=cfg.stride,
                    norm_layer=cfg.norm_layer, activation_layer=cfg.activation_layer))
                channels = cfg.out_channels
            stem.add_module("conv_last", nn.Conv2d(channels, hidden_dim, kernel_size=1))
            self.conv_proj: nn.Module = stem
        else:
            self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1  # the patches and the class token
        self.class_token = nn.Parameter(sl.zeros(1, 1, hidden_dim))
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                               norm_layer)
        self.seq_length = seq_length
        heads: OrderedDict[str, nn.Module] = OrderedDict()
        if representation_size is None:
            heads["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads["act"] = nn.Tanh()
            heads["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads)
        self._initialise()

    def _initialise(self) -> None:
        if isinstance(self.conv_proj, nn.Conv2d):
            fan_in = self.conv_proj.in_channels * self.conv_proj.kernel_size[0] * self.conv_proj.kernel_size[1]
            nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
            nn.init.zeros_(self.conv_proj.bias)
        else:
            last = self.conv_proj.conv_last
            nn.init.normal_(last.weight, mean=0.0, std=math.sqrt(2.0 / last.out_channels))
            nn.init.zeros_(last.bias)
        if "pre_logits" in self.heads._modules:
            nn.init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / self.heads.pre_logits.in_features))
            nn.init.zeros_(self.heads.pre_logits.bias)
        nn.init.zeros_(self.heads.head.weight)
        nn.init.zeros_(self.heads.head.bias)

    def _process_input(self, x: Tensor) -> Tensor:
        """(n, 3, h, w) -> (n, patches, hidden_dim)."""
        n, _, h, w = x.shape
        if (h, w) != (self.image_size, self.image_size):
            raise ValueError(f"Wrong image size! Expected {self.image_size}x{self.image_size} but got {h}x{w}; "
                             f"this model takes image_size={self.image_size} (build it with image_size={h} for "
                             f"square {h}x{h} inputs)")
        p = self.patch_size
        x = self.conv_proj(x)
        return x.reshape(n, self.hidden_dim, (h // p) * (w // p)).permute(0, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        x = self._process_input(x)
        x = sl.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.encoder(x)
        return self.heads(x[:, 0])

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> nn.IncompatibleKeys:
        """As Module's, after `upgrade_keys` (torchvision's released weights use older MLP names)."""
        return super().load_state_dict(upgrade_keys(state_dict), strict)

    @staticmethod
    def upgrade_keys(state_dict: Mapping[str, _V]) -> Mapping[str, _V]:
        """`upgrade_keys` (for a loader that checks a file's keys before load_state_dict)."""
        return upgrade_keys(state_dict)


_LEGACY_MLP = re.compile(r"(.*\.mlp\.)linear_([12])\.(weight|bias)$")


def upgrade_keys(state_dict: Mapping[str, _V]) -> Mapping[str, _V]:
    """The state dict with the MLP layers' pre-0.14 names `mlp.linear_1` / `mlp.linear_2` renamed to
    `mlp.0` / `mlp.3` (what torchvision's MLPBlock does when it loads such a file); other keys as they are."""
    if not any(_LEGACY_MLP.match(k) for k in state_dict):
        return state_dict
    renamed: OrderedDict[str, _V] = OrderedDict()
    for key, value in state_dict.items():
        m = _LEGACY_MLP.match(key)
        renamed[f"{m.group(1)}{3 * (int(m.group(2)) - 1)}.{m.group(3)}" if m else key] = value
    return renamed


def _family(name: str, patch_size: int, num_layers: int, num_heads: int, hidden_dim: int,
            mlp_dim: int) -> Callable[..., VisionTransformer]:
    def build(image_size: int = 224, **kwargs: Any) -> VisionTransformer:
        return VisionTransformer(image_size=image_size, patch_size=patch_size, num_layers=num_layers,
                                 num_heads=num_heads, hidden_dim=hidden_dim, mlp_dim=mlp_dim, **kwargs)
    build.__name__ = build.__qualname__ = name
    return register(name, build, min_size=224)


vit_b_16 = _family("vit_b_16", 16, 12, 12, 768, 3072)
vit_b_32 = _family("vit_b_32", 32, 12, 12, 768, 3072)
vit_l_16 = _family("vit_l_16", 16, 24, 16, 1024, 4096)
vit_l_32 = _family("vit_l_32", 32, 24, 16, 1024, 4096)
vit_h_14 = _family("vit_h_14", 14, 32, 16, 1280, 5120)
