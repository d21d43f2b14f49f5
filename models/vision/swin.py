"""torchvision's Swin Transformers: v1 (Liu et al., arXiv:2103.14030; swin_t, swin_s, swin_b) and v2
(Liu et al., arXiv:2111.09883; swin_v2_t, swin_v2_s, swin_v2_b).

The image is cut into 4x4 patches (`features.0`: a strided convolution, to channels last, a LayerNorm);
four stages of blocks follow. A block is attention within windows of window_size x window_size
patches (`attn`) and an MLP; every second block shifts its windows by half a window (the map rolled,
and a mask keeping apart the patches that the roll brought together). Between stages a `PatchMerging`
halves the map and doubles the channels. Maps are (N, H, W, C) throughout; the head pools them. A map
is padded with zeros to whole windows, as torchvision does.

Attention adds a learned bias per head and relative position (`relative_position_bias_table` (v1), or
a small MLP of log-spaced coordinates, `cpb_mlp` (v2)) to the scores; the shifted windows' masks
depend only on sizes and are computed in NumPy.
"""
import functools
import math
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

import saliency as sl
from saliency import Tensor, nn
from saliency._typing import Float64, FloatArray, IntArray
from saliency.nn import functional as F

from . import register
from .layers import MLP, NormLayer, Permute, StochasticDepth


def _patch_merging_pad(x: Tensor) -> Tensor:
    """(..., H, W, C) -> (..., H/2, W/2, 4C): each 2x2 block's four patches side by side (padded to even)."""
    H, W = x.shape[-3], x.shape[-2]
    x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
    return sl.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1)


class PatchMerging(nn.Module):
    """Halve the map, four times the channels, LayerNorm, then a linear layer to twice the channels."""

    def __init__(self, dim: int, norm_layer: NormLayer = nn.LayerNorm) -> None:
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.reduction(self.norm(_patch_merging_pad(x)))


class PatchMergingV2(PatchMerging):
    """v2: the linear layer first, then LayerNorm over its 2C outputs."""

    def __init__(self, dim: int, norm_layer: NormLayer = nn.LayerNorm) -> None:
        super().__init__(dim, norm_layer)
        self.norm = norm_layer(2 * dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.reduction(_patch_merging_pad(x)))


def relative_position_index(window_size: Sequence[int]) -> IntArray:
    """(Wh*Ww)^2 int64: for each pair of patches of a window, the row of the bias table of their offset."""
    coords = np.stack(np.meshgrid(np.arange(window_size[0]), np.arange(window_size[1]), indexing="ij")).reshape(2, -1)
    offsets = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0)  # Wh*Ww, Wh*Ww, 2
    index = (offsets[..., 0] + window_size[0] - 1) * (2 * window_size[1] - 1) + offsets[..., 1] + window_size[1] - 1
    return index.reshape(-1).astype(np.int64)


@functools.lru_cache(maxsize=64)
def _shift_mask(pad_H: int, pad_W: int, window_size: tuple[int, ...], shift_size: tuple[int, ...],
                dtype: np.dtype[Any]) -> FloatArray:
    """(windows, Wh*Ww, Wh*Ww): 0 between patches of the same region of the rolled map, -100 between
    patches the roll brought together from opposite edges (torchvision's mask)."""
    region: Float64 = np.zeros((pad_H, pad_W))
    count = 0
    for h0, h1 in ((0, -window_size[0]), (-window_size[0], -shift_size[0]), (-shift_size[0], None)):
        for w0, w1 in ((0, -window_size[1]), (-window_size[1], -shift_size[1]), (-shift_size[1], None)):
            region[h0:h1, w0:w1] = count
            count += 1
    region = region.reshape(pad_H // window_size[0], window_size[0], pad_W // window_size[1], window_size[1])
    region = region.transpose(0, 2, 1, 3).reshape(-1, window_size[0] * window_size[1])
    mask = np.where(region[:, None, :] != region[:, :, None], -100.0, 0.0).astype(dtype)
    mask.flags.writeable = False  # shared by every call with these sizes
    return mask


def shifted_window_attention(input: Tensor, qkv_weight: Tensor, proj_weight: Tensor, relative_position_bias: Tensor,
                             window_size: Sequence[int], num_heads: int, shift_size: Sequence[int],
                             attention_dropout: float = 0.0, dropout: float = 0.0, qkv_bias: Tensor | None = None,
                             proj_bias: Tensor | None = None, logit_scale: Tensor | None = None,
                             training: bool = True) -> Tensor:
    """Multi-head self-attention within (shifted) windows of input (B, H, W, C), with a relative position
    bias (1, heads, Wh*Ww, Wh*Ww); logit_scale (heads, 1, 1) makes it v2's cosine attention."""
    B, H, W, C = input.shape
    pad_b, pad_r = (-H) % window_size[0], (-W) % window_size[1]
    x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b)) if pad_b or pad_r else input
    _, pad_H, pad_W, _ = x.shape
    shift = [0 if window_size[i] >= n else shift_size[i] for i, n in enumerate((pad_H, pad_W))]
    if sum(shift) > 0:
        x = x.roll((-shift[0], -shift[1]), (1, 2))
    rows, cols = pad_H // window_size[0], pad_W // window_size[1]
    windows, n = rows * cols, window_size[0] * window_size[1]
    # the windows' patches as sequences: (B * windows, n, C)
    x = x.reshape(B, rows, window_size[0], cols, window_size[1], C).permute(0, 1, 3, 2, 4, 5).reshape(B * windows, n, C)
    if logit_scale is not None and qkv_bias is not None:  # v2: the keys take no bias
        keep = np.ones(qkv_bias.shape, qkv_bias.dtype)
        keep[C:2 * C] = 0
        qkv_bias = qkv_bias * keep
    qkv = F.linear(x, qkv_weight, qkv_bias).reshape(B, windows, n, 3, num_heads, C // num_heads)
    q, k, v = (qkv[:, :, :, i].transpose(2, 3) for i in range(3))  # (B, windows, heads, n, C / heads)
    bias = relative_position_bias
    if sum(shift) > 0:
        bias = bias + _shift_mask(pad_H, pad_W, tuple(window_size), tuple(shift), np.dtype(x.dtype))[:, None]
    if logit_scale is not None:  # cosine attention, a learned temperature per head
        q = F.normalize(q, dim=-1) * logit_scale.clamp(max=math.log(100.0)).exp()
        k, scale = F.normalize(k, dim=-1), 1.0
    else:
        scale = (C // num_heads) ** -0.5
    x = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=attention_dropout if training else 0.0,
                                       scale=scale)
    x = F.linear(x.transpose(2, 3).reshape(B * windows, n, C), proj_weight, proj_bias)
    x = F.dropout(x, p=dropout, training=training)
    x = x.reshape(B, rows, cols, window_size[0], window_size[1], C).permute(0, 1, 3, 2, 4, 5)
    x = x.reshape(B, pad_H, pad_W, C)
    if sum(shift) > 0:
        x = x.roll((shift[0], shift[1]), (1, 2))
    return x[:, :H, :W, :] if pad_b or pad_r else x


class ShiftedWindowAttention(nn.Module):
    """Window attention with torchvision's parameters: qkv, proj, relative_position_bias_table and the
    relative_position_index buffer (in the state dict, as torchvision registers it)."""

    def __init__(self, dim: int, window_size: Sequence[int], shift_size: Sequence[int], num_heads: int,
                 qkv_bias: bool = True, proj_bias: bool = True, attention_dropout: float = 0.0,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError("window_size and shift_size must be of length 2")
        self.window_size, self.shift_size, self.num_heads = list(window_size), list(shift_size), num_heads
        self.attention_dropout, self.dropout = attention_dropout, dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.define_relative_position_bias_table()
        self.define_relative_position_index()

    def define_relative_position_bias_table(self) -> None:
        size = (2 * self.window_size[0] - 1) * (2 * self.window_size[1] - 1)
        self.relative_position_bias_table = nn.Parameter(np.zeros((size, self.num_heads), np.float32))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def define_relative_position_index(self) -> None:
        self.register_buffer("relative_position_index", relative_position_index(self.window_size))

    def _bias(self, table: Tensor) -> Tensor:
        """(1, heads, n, n): the table's row of each pair's offset, per head."""
        n = self.window_size[0] * self.window_size[1]
        return table[self.relative_position_index].reshape(n, n, -1).permute(2, 0, 1).unsqueeze(0)

    def get_relative_position_bias(self) -> Tensor:
        return self._bias(self.relative_position_bias_table)

    def forward(self, x: Tensor) -> Tensor:
        return shifted_window_attention(x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
                                        self.window_size, self.num_heads, shift_size=self.shift_size,
                                        attention_dropout=self.attention_dropout, dropout=self.dropout,
                                        qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class ShiftedWindowAttentionV2(ShiftedWindowAttention):
    """v2: cosine attention with a learned temperature per head (logit_scale), and the bias from a small
    MLP (cpb_mlp) of the log-spaced relative coordinates (the relative_coords_table buffer)."""

    def __init__(self, dim: int, window_size: Sequence[int], shift_size: Sequence[int], num_heads: int,
                 qkv_bias: bool = True, proj_bias: bool = True, attention_dropout: float = 0.0,
                 dropout: float = 0.0) -> None:
        super().__init__(dim, window_size, shift_size, num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias,
                         attention_dropout=attention_dropout, dropout=dropout)
        self.logit_scale = nn.Parameter(np.full((num_heads, 1, 1), math.log(10.0), np.float32))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))
        if qkv_bias:
            with sl.no_grad():
                self.qkv.bias[dim:2 * dim] = 0

    def define_relative_position_bias_table(self) -> None:
        axes = [np.arange(-(w - 1), w, dtype=np.float32) / np.float32(max(w - 1, 1)) for w in self.window_size]
        # 1, 2Wh-1, 2Ww-1, 2
        table: FloatArray = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)[None] * np.float32(8)
        table = np.sign(table) * np.log2(np.abs(table) + np.float32(1.0)) / np.float32(3.0)
        self.register_buffer("relative_coords_table", table.astype(np.float32))

    def get_relative_position_bias(self) -> Tensor:
        return 16 * self._bias(self.cpb_mlp(self.relative_coords_table).reshape(-1, self.num_heads)).sigmoid()

    def forward(self, x: Tensor) -> Tensor:
        return shifted_window_attention(x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
                                        self.window_size, self.num_heads, shift_size=self.shift_size,
                                        attention_dropout=self.attention_dropout, dropout=self.dropout,
                                        qkv_bias=self.qkv.bias, proj_bias=self.proj.bias,
                                        logit_scale=self.logit_scale, training=self.training)


class SwinTransformerBlock(nn.Module):
    """x + attn(norm1(x)), then that + mlp(norm2(that)), each branch under stochastic depth."""

    def __init__(self, dim: int, num_heads: int, window_size: Sequence[int], shift_size: Sequence[int],
                 mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.0, norm_layer: NormLayer = nn.LayerNorm,
                 attn_layer: Callable[..., nn.Module] = ShiftedWindowAttention) -> None:
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = attn_layer(dim, window_size, shift_size, num_heads, attention_dropout=attention_dropout,
                               dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformerBlockV2(SwinTransformerBlock):
    """v2: the norms after the branches: x + norm1(attn(x)), then that + norm2(mlp(that))."""

    def __init__(self, dim: int, num_heads: int, window_size: Sequence[int], shift_size: Sequence[int],
                 mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.0, norm_layer: NormLayer = nn.LayerNorm,
                 attn_layer: Callable[..., nn.Module] = ShiftedWindowAttentionV2) -> None:
        super().__init__(dim, num_heads, window_size, shift_size, mlp_ratio=mlp_ratio, dropout=dropout,
                         attention_dropout=attention_dropout, stochastic_depth_prob=stochastic_depth_prob,
                         norm_layer=norm_layer, attn_layer=attn_layer)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.stochastic_depth(self.norm1(self.attn(x)))
        return x + self.stochastic_depth(self.norm2(self.mlp(x)))


class SwinTransformer(nn.Module):
    """torchvision's SwinTransformer: (N, 3, H, W) -> (N, num_classes) logits."""

    def __init__(self, patch_size: Sequence[int], embed_dim: int, depths: Sequence[int], num_heads: Sequence[int],
                 window_size: Sequence[int], mlp_ratio: float = 4.0, dropout: float = 0.0,
                 attention_dropout: float = 0.0, stochastic_depth_prob: float = 0.1, num_classes: int = 1000,
                 norm_layer: NormLayer | None = None, block: Callable[..., nn.Module] | None = None,
                 downsample_layer: Callable[..., nn.Module] = PatchMerging) -> None:
        super().__init__()
        self.num_classes = num_classes
        block = block or SwinTransformerBlock
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        layers: list[nn.Module] = [
            nn.Sequential(nn.Conv2d(3, embed_dim, kernel_size=tuple(patch_size), stride=tuple(patch_size)),
                          Permute([0, 2, 3, 1]), norm_layer(embed_dim))]
        total, index = sum(depths), 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage: list[nn.Module] = []
            for i_layer in range(depth):
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else w // 2 for w in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout, attention_dropout=attention_dropout,
                                   stochastic_depth_prob=stochastic_depth_prob * float(index) / (total - 1),
                                   norm_layer=norm_layer))
                index += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])  # B H W C -> B C H W
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.features(x))
        return self.head(self.flatten(self.avgpool(self.permute(x))))


def _family(name: str, embed_dim: int, depths: list[int], num_heads: list[int], window_size: list[int],
            stochastic_depth_prob: float, v2: bool = False) -> Callable[..., SwinTransformer]:
    v2_layers: dict[str, Any] = dict(block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2) if v2 else {}

    # a layer the family sets cannot be given again (a TypeError, as torchvision's)
    def build(**kwargs: Any) -> SwinTransformer:
        return SwinTransformer(patch_size=[4, 4], embed_dim=embed_dim, depths=depths, num_heads=num_heads,
                               window_size=window_size, stochastic_depth_prob=stochastic_depth_prob, **v2_layers,
                               **kwargs)
    build.__name__ = build.__qualname__ = name
    return register(name, build, min_size=256 if v2 else 224)


swin_t = _family("swin_t", 96, [2, 2, 6, 2], [3, 6, 12, 24], [7, 7], 0.2)
swin_s = _family("swin_s", 96, [2, 2, 18, 2], [3, 6, 12, 24], [7, 7], 0.3)
swin_b = _family("swin_b", 128, [2, 2, 18, 2], [4, 8, 16, 32], [7, 7], 0.5)
swin_v2_t = _family("swin_v2_t", 96, [2, 2, 6, 2], [3, 6, 12, 24], [8, 8], 0.2, v2=True)
swin_v2_s = _family("swin_v2_s", 96, [2, 2, 18, 2], [3, 6, 12, 24], [8, 8], 0.3, v2=True)
swin_v2_b = _family("swin_v2_b", 128, [2, 2, 18, 2], [4, 8, 16, 32], [8, 8], 0.5, v2=True)
