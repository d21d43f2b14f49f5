"""`MultiheadAttention`, as PyTorch's: the same constructor, parameters (`in_proj_weight` (3E, E),
`in_proj_bias`, `out_proj`; `q_proj_weight`, `k_proj_weight`, `v_proj_weight` when kdim or vdim
differ from embed_dim), masks and return values, so state dicts load and ported code runs."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..autograd.errors import UnsupportedError
from ..autograd.tensor import Tensor
from . import functional as F
from . import init
from .linear import Linear
from .module import Module
from .parameter import Parameter

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from ..autograd.tensor import device as Device


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under the name PyTorch gives MultiheadAttention's out_proj."""


class MultiheadAttention(Module):
    """Attention of `num_heads` heads of embed_dim / num_heads features each (Vaswani et al.): the
    queries, keys and values projected, scaled dot-product attention per head, the heads
    concatenated and projected by out_proj. Inputs are (L, N, E), or (N, L, E) with batch_first,
    or unbatched (L, E); `forward` returns (output, attention weights or None) as PyTorch's."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: str | Device | None = None,
                 dtype: DTypeLike | None = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        for flag, name in ((add_bias_kv, "add_bias_kv"), (add_zero_attn, "add_zero_attn")):
            if flag:
                raise UnsupportedError(f"MultiheadAttention({name}=True) is not supported by saliency; build it "
                                       f"without {name} (docs/your-network.md lists the supported layers)")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = int(embed_dim), int(num_heads), dropout, \
            batch_first
        self.kdim = self.embed_dim if kdim is None else int(kdim)
        self.vdim = self.embed_dim if vdim is None else int(vdim)
        self._qkv_same_embed_dim = self.kdim == self.embed_dim and self.vdim == self.embed_dim
        self.head_dim = self.embed_dim // self.num_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        dtype = np.dtype(dtype or np.float32)
        E = self.embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(np.empty((3 * E, E), dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(np.empty((E, E), dtype))
            self.k_proj_weight = Parameter(np.empty((E, self.kdim), dtype))
            self.v_proj_weight = Parameter(np.empty((E, self.vdim), dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(np.empty(3 * E, dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(E, E, bias=bias, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | np.ndarray | None = None, need_weights: bool = True,
                attn_mask: Tensor | np.ndarray | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """(attention output, attention weights or None) for query (L, N, E), key (S, N, kdim) and
        value (S, N, vdim) ((N, L, E) ... with batch_first; (L, E) ... unbatched); the output has the query's shape.

        key_padding_mask (N, S) and attn_mask ((L, S) or (N * num_heads, L, S)) are boolean (True: the key is
        left out) or added to the scores. need_weights returns the attention weights (N, L, S), averaged
        over the heads with average_attn_weights, else (N, num_heads, L, S); without them the heads run as
        F.scaled_dot_product_attention. is_causal is a hint that attn_mask is the causal mask (it must be
        given)."""
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"MultiheadAttention expects query, key and value of 3 dimensions (batched) or 2 "
                             f"(unbatched), got shapes {tuple(query.shape)}, {tuple(key.shape)} and "
                             f"{tuple(value.shape)}")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint; pass the causal mask as attn_mask "
                               "(True above the diagonal)")
        self_attention = query is key and key is value
        # batch first inside: (N, L, E)
        if not batched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = _as_mask(key_padding_mask)[None]
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        N, L, E = query.shape
        S = key.shape[1]
        if E != self.embed_dim:
            raise ValueError(f"MultiheadAttention({self.embed_dim}) got a query of {E} features, shape "
                             f"{tuple(query.shape)}")
        q, k, v = self._project(query, key, value, self_attention)
        q, k, v = (t.reshape(N, t.shape[1], self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        causal = is_causal and key_padding_mask is None and not need_weights
        mask = None if causal else self._mask(attn_mask, key_padding_mask, N, L, S, query.dtype)
        p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * math.sqrt(1.0 / self.head_dim)) @ k.transpose(-2, -1)
            weights = (scores if mask is None else scores + mask).softmax(-1)
            out = (weights if p == 0.0 else F.dropout(weights, p)) @ v
        else:
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
        out = self.out_proj(out.transpose(1, 2).reshape(N, L, E))
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            return out.squeeze(0), None if weights is None else weights.squeeze(0)
        return (out if self.batch_first else out.transpose(0, 1)), weights

    def _project(self, query: Tensor, key: Tensor, value: Tensor,
                 self_attention: bool) -> tuple[Tensor, Tensor, Tensor]:
        """(q, k, v), each (N, length, E): one product for self-attention, as PyTorch's packed weight."""
        E, b = self.embed_dim, self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if not self._qkv_same_embed_dim:
            return (F.linear(query, self.q_proj_weight, bq), F.linear(key, self.k_proj_weight, bk),
                    F.linear(value, self.v_proj_weight, bv))
        w = self.in_proj_weight
        if self_attention:
            qkv = F.linear(query, w, b).reshape(query.shape[0], query.shape[1], 3, E)
            return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        return F.linear(query, w[:E], bq), F.linear(key, w[E:2 * E], bk), F.linear(value, w[2 * E:], bv)

    def _mask(self, attn_mask: Tensor | np.ndarray | None, key_padding_mask: Tensor | np.ndarray | None,
              N: int, L: int, S: int, dtype: DTypeLike) -> Tensor | np.ndarray | None:
        """attn_mask ((L, S) or (N * heads, L, S)) plus key_padding_mask ((N, S)), boolean ones (True: left
        out) as -inf: one additive mask broadcasting to (N, heads, L, S), or None."""
        mask = None
        if attn_mask is not None:
            mask = _additive(attn_mask, dtype)
            if mask.ndim == 2 and tuple(mask.shape) == (L, S):
                pass
            elif mask.ndim == 3 and tuple(mask.shape) == (N * self.num_heads, L, S):
                mask = mask.reshape(N, self.num_heads, L, S)
            else:
                raise ValueError(f"attn_mask of shape {tuple(mask.shape)} does not fit: expected (L, S) = {(L, S)} "
                                 f"or (N * num_heads, L, S) = {(N * self.num_heads, L, S)}")
        if key_padding_mask is not None:
            pad = _additive(key_padding_mask, dtype)
            if tuple(pad.shape) != (N, S):
                raise ValueError(f"key_padding_mask of shape {tuple(pad.shape)} does not fit: expected (N, S) = "
                                 f"{(N, S)}")
            pad = pad.reshape(N, 1, 1, S)
            mask = pad if mask is None else mask + pad
        return mask


def _as_mask(m: Tensor | np.ndarray) -> Tensor | np.ndarray:
    return m._array if isinstance(m, Tensor) and m.dtype.kind != "f" else m


def _additive(m: Tensor | np.ndarray, dtype: DTypeLike) -> Tensor | np.ndarray:
    """A boolean mask (True: left out) as an array of 0 and -inf; a float mask as it is."""
    m = _as_mask(m)
    if isinstance(m, Tensor):
        return m
    m = np.asarray(m)
    if m.dtype == bool:
        return np.where(m, -np.inf, 0.0).astype(dtype)
    if m.dtype.kind != "f":
        raise TypeError(f"only bool and floating types of masks are supported, got dtype {m.dtype}")
    return m.astype(dtype)
