"""`nn.MultiheadAttention` and the Transformer layers, with MindSpore 2.10's arguments, parameter
names and numerics (which follow PyTorch's layout).

Layout: inputs are (L, N, E) — sequence first — unless `batch_first=True` ((N, L, E)); a 2-d
(L, E) input is one unbatched sequence. Parameter names a checkpoint carries:

    MultiheadAttention   in_proj_weight (3E, E), in_proj_bias (3E,), out_proj.weight, out_proj.bias
                         (with kdim/vdim != E: q_proj_weight, k_proj_weight, v_proj_weight instead
                         of in_proj_weight; add_bias_kv: bias_k, bias_v of shape (1, 1, E))
    TransformerEncoderLayer  self_attn.*, dense1.*, dense2.*, norm1.*, norm2.* (LayerNorm gamma/beta)
    TransformerDecoderLayer  self_attn.*, multihead_attn.*, dense1/2.*, norm1/2/3.*
    TransformerEncoder/Decoder  layers.<i>.*, norm.* ; Transformer  encoder.*, decoder.*

Masks, as MindSpore (and PyTorch): a bool mask is True where attention is NOT allowed (it becomes
-inf before the softmax); a float mask is added to the scores. `attn_mask` is (L, S) or
(N * num_heads, L, S); `key_padding_mask` is (N, S). Quirk kept from MindSpore: a float attn_mask
combined with a bool key_padding_mask adds the bool as 0/1 (not -inf).

Attention is computed as MindSpore's `_scaled_dot_product_attention` does: both q and k are divided
by head_dim ** 0.25 (so the product carries 1 / sqrt(head_dim)), softmax, dropout in training,
then @ v and the output projection.
"""
from __future__ import annotations

import copy
import math
import numbers

from ... import ops as _ops
from ...common import dtype as mstype
from ...common.errors import OpTypeError, OpValueError
from ...common.initializer import HeUniform, Uniform, XavierNormal, XavierUniform, initializer
from ...common.tensor import Parameter, Tensor
from ...ops import functional as F
from .. import _checks
from ..cell import Cell
from ..container import CellList
from .activation import GELU, ReLU
from .dense import Dense
from .dropout import Dropout
from .normalization import LayerNorm


def _linear(x, w, b):
    y = F.matmul(x, F.swapaxes(w, 0, 1))
    return y if b is None else y + b


def _is_float(t):
    return t.dtype in (mstype.float16, mstype.float32, mstype.float64, mstype.bfloat16)


def _pad_last(mask):
    """One more (unmasked) key column: for bias_k/bias_v and add_zero_attn."""
    if mask.dtype == mstype.bool_:
        return F.cast(F.pad(F.cast(mask, mstype.int32), (0, 1)), mstype.bool_)
    return F.pad(mask, (0, 1))


def multi_head_attention_forward(mha, query, key, value, key_padding_mask=None, attn_mask=None,
                                 average_attn_weights=True):
    """The attention of `mha` on sequence-first (L, N, E) / unbatched (L, E) inputs -> (output,
    averaged-or-per-head weights). See the module docstring."""
    who = "MultiheadAttention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise OpTypeError(who, f"'{name}' to be a Tensor", type(t).__name__)
    nd = query.ndim
    if nd not in (2, 3):
        raise OpValueError(who, "an unbatched 2-D or batched 3-D query", f"{nd}-D")
    if key.ndim != nd or value.ndim != nd:
        raise OpValueError(who, f"key and value of rank {nd} like the query", f"{key.ndim}-D and {value.ndim}-D")
    if key_padding_mask is not None and key_padding_mask.ndim != nd - 1:
        raise OpValueError(who, f"a {nd - 1}-D key_padding_mask", f"{key_padding_mask.ndim}-D")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise OpValueError(who, "a 2-D or 3-D attn_mask", f"{attn_mask.ndim}-D")
    batched = nd == 3
    if not batched:
        query, key, value = (F.expand_dims(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = F.expand_dims(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    heads, head_dim = mha.num_heads, mha.head_dim
    if key_padding_mask is not None and key_padding_mask.dtype != mstype.bool_ and not _is_float(key_padding_mask):
        raise OpTypeError(who, "a bool or floating key_padding_mask", str(key_padding_mask.dtype))
    if embed_dim != mha.embed_dim:
        raise OpValueError(who, f"a query of embed_dim {mha.embed_dim}", f"{embed_dim}")
    if mha._qkv_same_embed_dim:
        if tuple(key.shape) != tuple(value.shape):
            raise OpValueError(who, "key and value of the same shape", f"{tuple(key.shape)} and {tuple(value.shape)}")
    elif tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise OpValueError(who, "key and value with the same sequence and batch dims",
                           f"{tuple(key.shape[:2])} and {tuple(value.shape[:2])}")

    # in-projection (one packed (3E, E) weight, or three separate ones)
    if mha.in_proj_bias is None:
        b_q = b_k = b_v = None
    else:
        b_q, b_k, b_v = F.split(mha.in_proj_bias, embed_dim, 0)
    if mha._qkv_same_embed_dim:
        w_q, w_k, w_v = F.split(mha.in_proj_weight, embed_dim, 0)
    else:
        w_q, w_k, w_v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
    q, k, v = _linear(query, w_q, b_q), _linear(key, w_k, b_k), _linear(value, w_v, b_v)

    if attn_mask is not None:
        if attn_mask.dtype == mstype.uint8:
            attn_mask = F.cast(attn_mask, mstype.bool_)
        elif not _is_float(attn_mask) and attn_mask.dtype != mstype.bool_:
            raise OpTypeError(who, "a float, uint8 or bool attn_mask", str(attn_mask.dtype))
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise OpValueError(who, f"a 2-D attn_mask of shape {(tgt_len, src_len)}", f"{tuple(attn_mask.shape)}")
            attn_mask = F.expand_dims(attn_mask, 0)
        elif tuple(attn_mask.shape) != (bsz * heads, tgt_len, src_len):
            raise OpValueError(who, f"a 3-D attn_mask of shape {(bsz * heads, tgt_len, src_len)}",
                               f"{tuple(attn_mask.shape)}")

    if mha.bias_k is not None:
        k = F.concat([k, F.tile(mha.bias_k, (1, bsz, 1))], 0)
        v = F.concat([v, F.tile(mha.bias_v, (1, bsz, 1))], 0)
        if attn_mask is not None:
            attn_mask = _pad_last(attn_mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)

    # (L, N, E) -> (N * heads, L, head_dim)
    q = F.swapaxes(F.reshape(q, (tgt_len, bsz * heads, head_dim)), 0, 1)
    k = F.swapaxes(F.reshape(k, (k.shape[0], bsz * heads, head_dim)), 0, 1)
    v = F.swapaxes(F.reshape(v, (v.shape[0], bsz * heads, head_dim)), 0, 1)
    if mha.add_zero_attn:
        zeros = F.zeros((bsz * heads, 1, head_dim), k.dtype)
        k = F.concat([k, zeros], 1)
        v = F.concat([v, zeros], 1)
        if attn_mask is not None:
            attn_mask = _pad_last(attn_mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise OpValueError(who, f"a key_padding_mask of shape {(bsz, src_len)}", f"{tuple(key_padding_mask.shape)}")
        kpm = F.reshape(F.tile(F.reshape(key_padding_mask, (bsz, 1, 1, src_len)), (1, heads, 1, 1)),
                        (bsz * heads, 1, src_len))
        if attn_mask is None:
            attn_mask = kpm
        elif attn_mask.dtype == mstype.bool_:
            attn_mask = F.logical_or(attn_mask, kpm)
        else:
            attn_mask = attn_mask + kpm
    if attn_mask is not None and attn_mask.dtype == mstype.bool_:
        attn_mask = F.masked_fill(F.zeros(tuple(attn_mask.shape), q.dtype), attn_mask, float("-inf"))
    if attn_mask is not None:
        if attn_mask.shape[0] == 1:
            attn_mask = F.expand_dims(attn_mask, 0)
        else:
            attn_mask = F.reshape(attn_mask, (bsz, heads, -1, src_len))

    q = F.reshape(q, (bsz, heads, tgt_len, head_dim))
    k = F.reshape(k, (bsz, heads, src_len, head_dim))
    v = F.reshape(v, (bsz, heads, src_len, head_dim))
    scale = Tensor(math.sqrt(math.sqrt(head_dim)), q.dtype)
    q = q / scale
    scores = F.matmul(q, F.swapaxes(k, -2, -1) / scale)
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = F.softmax(scores, -1)
    if mha.training and mha.dropout > 0:
        weights = F.dropout(weights, p=mha.dropout, training=True)
    out = F.matmul(weights, v)                                     # (N, heads, L, head_dim)
    out = F.reshape(F.transpose(out, (2, 0, 1, 3)), (bsz * tgt_len, embed_dim))
    out = _linear(out, mha.out_proj.weight, mha.out_proj.bias)
    out = F.reshape(out, (tgt_len, bsz, out.shape[1]))
    weights = F.reshape(weights, (bsz, heads, tgt_len, src_len))
    if average_attn_weights:
        weights = F.reduce_sum(weights, 1) / heads
    if not batched:
        out = F.squeeze(out, 1)
        weights = F.squeeze(weights, 0)
    return out, weights


class MultiheadAttention(Cell):
    """`MultiheadAttention(embed_dim, num_heads, dropout=0.0, has_bias=True, add_bias_kv=False,
    add_zero_attn=False, kdim=None, vdim=None, batch_first=False, dtype=float32)`.

    `mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True)` returns `(output, weights)`, or the 1-tuple `(output,)` with
    need_weights=False (as MindSpore 2.10 does). `weights` is (N, L, S) averaged over heads, or
    (N, num_heads, L, S) with average_attn_weights=False."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, has_bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, dtype=mstype.float32):
        super().__init__()
        who = "MultiheadAttention"
        self.embed_dim = _checks.positive_int(who, "embed_dim", embed_dim)
        self.num_heads = _checks.positive_int(who, "num_heads", num_heads)
        self.kdim = _checks.positive_int(who, "kdim", kdim) if kdim is not None else embed_dim
        self.vdim = _checks.positive_int(who, "vdim", vdim) if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        if not isinstance(dropout, numbers.Real) or isinstance(dropout, bool) or not 0 <= dropout < 1:
            raise OpValueError(who, "'dropout' in [0, 1)", repr(dropout))
        self.dropout = float(dropout)
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise OpValueError(who, "'embed_dim' divisible by 'num_heads'", f"embed_dim={embed_dim}, "
                               f"num_heads={num_heads}")
        dtype = mstype.float32 if dtype is None else dtype
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(initializer(XavierUniform(), (embed_dim, embed_dim), dtype), "q_proj_weight")
            self.k_proj_weight = Parameter(initializer(XavierUniform(), (embed_dim, self.kdim), dtype), "k_proj_weight")
            self.v_proj_weight = Parameter(initializer(XavierUniform(), (embed_dim, self.vdim), dtype), "v_proj_weight")
            self.in_proj_weight = None
        else:
            self.in_proj_weight = Parameter(initializer(XavierUniform(), (3 * embed_dim, embed_dim), dtype),
                                            "in_proj_weight")
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        self.in_proj_bias = Parameter(initializer("zeros", (3 * embed_dim,), dtype), "in_proj_bias") if has_bias else None
        bound = 1 / math.sqrt(embed_dim)
        self.out_proj = Dense(embed_dim, embed_dim, has_bias=has_bias, weight_init=HeUniform(math.sqrt(5)),
                              bias_init=Uniform(bound), dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(initializer(XavierNormal(), (1, 1, embed_dim), dtype), "bias_k")
            self.bias_v = Parameter(initializer(XavierNormal(), (1, 1, embed_dim), dtype), "bias_v")
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.dtype = dtype

    def construct(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                  average_attn_weights=True):
        batched = isinstance(query, Tensor) and query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (F.swapaxes(t, 0, 1) for t in (query, key, value))
        out, weights = multi_head_attention_forward(self, query, key, value, key_padding_mask, attn_mask,
                                                    average_attn_weights)
        if self.batch_first and batched:
            out = F.swapaxes(out, 0, 1)
        return (out, weights) if need_weights else (out,)

    def extend_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


# -- Transformer layers ---------------------------------------------------------------------------------

def _activation_fn(cell, activation):
    """MindSpore accepts 'relu' / 'gelu' (ops.relu / ops.gelu), or those two functions themselves.
    (Its checks also refuse nn.ReLU()/nn.GELU() instances: a Cell is callable and is neither
    function, so the "callable" check rejects it.)"""
    if isinstance(activation, str):
        if activation == "relu":
            return _ops.relu
        if activation == "gelu":
            return _ops.gelu
        raise OpValueError(cell, "'activation' 'relu' or 'gelu'", repr(activation))
    if isinstance(activation, Cell) and not isinstance(activation, (ReLU, GELU)):
        raise OpValueError(cell, "'activation' as nn.ReLU or nn.GELU", type(activation).__name__)
    if callable(activation) and activation is not _ops.relu and activation is not _ops.gelu:
        raise OpValueError(cell, "'activation' as 'relu', 'gelu', ops.relu or ops.gelu", repr(activation))
    if not callable(activation):
        raise OpValueError(cell, "'activation' as a str, a callable or a Cell", repr(activation))
    return activation


def _check_kpm(cell, mask):
    if mask is not None and mask.dtype != mstype.bool_ and not _is_float(mask):
        raise OpTypeError(cell, "a bool or floating key padding mask", str(mask.dtype))


class _LayerBase(Cell):
    """The feed-forward block and the config both layer kinds keep (the Encoder/Decoder rebuild
    their layers from it)."""

    def _setup(self, who, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
               norm_first, dtype):
        d_model = _checks.positive_int(who, "d_model", d_model)
        dim_feedforward = _checks.positive_int(who, "dim_feedforward", dim_feedforward)
        self.dense1 = Dense(d_model, dim_feedforward, weight_init=HeUniform(math.sqrt(5)),
                            bias_init=Uniform(1 / math.sqrt(d_model)), dtype=dtype)
        self.dropout = Dropout(p=dropout)
        self.dense2 = Dense(dim_feedforward, d_model, weight_init=HeUniform(math.sqrt(5)),
                            bias_init=Uniform(1 / math.sqrt(dim_feedforward)), dtype=dtype)
        self.norm1 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(p=dropout)
        self.dropout2 = Dropout(p=dropout)
        self.activation1 = activation
        self.activation = _activation_fn(who, activation)
        self.d_model, self.nhead, self.dim_feedforward = d_model, nhead, dim_feedforward
        self.dropout_num, self.layernorm_eps = dropout, layer_norm_eps
        self.batch_first, self.norm_first, self.dtype = batch_first, norm_first, dtype

    def _config(self):
        return (self.d_model, self.nhead, self.dim_feedforward, self.dropout_num, self.activation1,
                self.layernorm_eps, self.batch_first, self.norm_first)

    def _ff_block(self, x, last_dropout):
        return last_dropout(self.dense2(self.dropout(self.activation(self.dense1(x)))))


class TransformerEncoderLayer(_LayerBase):
    """`TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1, activation='relu',
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, dtype=float32)`: self-attention and a
    feed-forward block, each with a residual and a LayerNorm (after it; before it with norm_first).
    `layer(src, src_mask=None, src_key_padding_mask=None)`."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, dtype=mstype.float32):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, dtype=dtype)
        self._setup("TransformerEncoderLayer", d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, dtype)

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False)[0]
        return self.dropout1(x)

    def construct(self, src, src_mask=None, src_key_padding_mask=None):
        _check_kpm("TransformerEncoderLayer", src_key_padding_mask)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask)
            x = x + self._ff_block(self.norm2(x), self.dropout2)
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask))
            x = self.norm2(x + self._ff_block(x, self.dropout2))
        return x


class TransformerDecoderLayer(_LayerBase):
    """`TransformerDecoderLayer(d_model, nhead, ...)` (same arguments as the encoder layer):
    self-attention, attention over the encoder's `memory`, feed-forward. `layer(tgt, memory,
    tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None)`."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, dtype=mstype.float32):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, dtype=dtype)
        self._setup("TransformerDecoderLayer", d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, dtype)
        self.norm3 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.dropout3 = Dropout(p=dropout)

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False)[0]
        return self.dropout2(x)

    def construct(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask)
            x = x + self._ff_block(self.norm3(x), self.dropout3)
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask))
            x = self.norm3(x + self._ff_block(x, self.dropout3))
        return x


def _clones(layer_cls, layer, num_layers, who):
    """MindSpore builds ONE fresh layer from `layer`'s configuration (not `layer` itself, whose
    weights are ignored) and deep-copies it: every layer starts with the same weights."""
    if not isinstance(layer, layer_cls):
        raise OpTypeError(who, f"a {layer_cls.__name__}", type(layer).__name__)
    num_layers = _checks.positive_int(who, "num_layers", num_layers)
    fresh = layer_cls(*layer._config(), dtype=layer.dtype)
    return CellList([copy.deepcopy(fresh) for _ in range(num_layers)]), num_layers


class TransformerEncoder(Cell):
    """`TransformerEncoder(encoder_layer, num_layers, norm=None)`: num_layers copies of the layer,
    then `norm`. `encoder(src, src_mask=None, src_key_padding_mask=None)`."""

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers, self.num_layers = _clones(TransformerEncoderLayer, encoder_layer, num_layers, "TransformerEncoder")
        self.norm = norm

    def construct(self, src, src_mask=None, src_key_padding_mask=None):
        _check_kpm("TransformerEncoder", src_key_padding_mask)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
        return self.norm(out) if self.norm is not None else out


class TransformerDecoder(Cell):
    """`TransformerDecoder(decoder_layer, num_layers, norm=None)`. `decoder(tgt, memory, tgt_mask=None,
    memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None)`."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers, self.num_layers = _clones(TransformerDecoderLayer, decoder_layer, num_layers, "TransformerDecoder")
        self.norm = norm

    def construct(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None):
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask)
        return self.norm(out) if self.norm is not None else out


class Transformer(Cell):
    """`Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
    dim_feedforward=2048, dropout=0.1, activation='relu', custom_encoder=None, custom_decoder=None,
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, dtype=float32)`: an encoder and a
    decoder, each ending in a LayerNorm; every weight with more than one dim is re-initialised
    Xavier-uniform. `model(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None)`."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, dtype=mstype.float32):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype))
        for _, p in self.parameters_and_names():
            if p.ndim > 1:
                p.set_data(initializer("xavier_uniform", p.shape, p.dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def construct(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                  tgt_key_padding_mask=None, memory_key_padding_mask=None):
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise OpValueError("Transformer", f"src and tgt with d_model={self.d_model} features",
                               f"{src.shape[-1]} and {tgt.shape[-1]}")
        memory = self.encoder(src, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask)


__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]
