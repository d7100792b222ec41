"""PyTorch mirrors of the models the training-step benchmark times (bench/bench_train_step.py).

* `TorchLlama` is the same network as `minispore.llm.Llama` (see minispore/llm/model.py), op for op:
  tied token embedding, pre-norm blocks with RMSNorm, rotary embeddings (half-split convention,
  tables of shape (T, 1, head_dim), the 1/sqrt(head_dim) score scale folded into q's tables), causal
  attention as two batched matmuls with an additive -inf mask and a softmax, a SwiGLU MLP
  w2(silu(w1 x) * w3 x), no biases, activations kept 2-D (batch*seq, dim) between blocks.
  Same sizes and the same parameter count, so the two frameworks do the same arithmetic.
* `TorchGPT` is nanoGPT's GPT (karpathy/nanoGPT model.py, bias=False, dropout 0): learned position
  embeddings, LayerNorm, fused qkv projection, `scaled_dot_product_attention`, a 4x GELU MLP, tied
  head. It is here only to connect with the PyTorch number the project's notes quote for
  nanoGPT's CPU config (about 52 ms/iter single-threaded on these machines).

Only PyTorch is imported here; the benchmark copies minispore's initial weights into TorchLlama so
both start from identical values (and their first losses can be compared).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_tables(head_dim, seq_len, theta=10000.0):
    """cos/sin of shape (seq_len, head_dim), half-split (both halves share the angles), float64."""
    freqs = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq_len, dtype=np.float64), freqs)
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles), np.sin(angles)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, batch, rope_q, rope_k, mask):
        n = x.shape[0]
        seq = n // batch
        q = self.wq(x).view(batch, seq, self.n_heads, self.head_dim)
        k = self.wk(x).view(batch, seq, self.n_heads, self.head_dim)
        v = self.wv(x).view(batch, seq, self.n_heads, self.head_dim)
        q = q * rope_q[0] + rotate_half(q) * rope_q[1]
        k = k * rope_k[0] + rotate_half(k) * rope_k[1]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = q @ k.transpose(-2, -1) + mask
        out = torch.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(n, self.n_heads * self.head_dim))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, n_heads, hidden, eps):
        super().__init__()
        self.attention_norm = RMSNorm(dim, eps)
        self.attention = Attention(dim, n_heads)
        self.ffn_norm = RMSNorm(dim, eps)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x, batch, rope_q, rope_k, mask):
        h = x + self.attention(self.attention_norm(x), batch, rope_q, rope_k, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class TorchLlama(nn.Module):
    """minispore.llm.Llama in PyTorch (multi-head attention: n_kv_heads == n_heads, tied head)."""

    def __init__(self, vocab_size, dim, n_layers, n_heads, hidden_dim, max_seq_len, norm_eps=1e-5,
                 rope_theta=10000.0):
        super().__init__()
        self.dim = dim
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList([Block(dim, n_heads, hidden_dim, norm_eps) for _ in range(n_layers)])
        self.norm = RMSNorm(dim, norm_eps)
        head_dim = dim // n_heads
        cos, sin = rope_tables(head_dim, max_seq_len, rope_theta)
        scale = 1.0 / math.sqrt(head_dim)
        as_t = lambda a: torch.tensor(a[:, None, :], dtype=torch.float32)     # (T, 1, hd)
        self.rope_k = (as_t(cos), as_t(sin))
        self.rope_q = (as_t(cos * scale), as_t(sin * scale))
        self.mask = torch.triu(torch.full((max_seq_len, max_seq_len), float("-inf")), diagonal=1)

    def loss(self, tokens, targets):
        batch, seq = tokens.shape
        h = self.tok_embeddings(tokens).reshape(batch * seq, self.dim)
        rope_q = tuple(t[:seq] for t in self.rope_q)
        rope_k = tuple(t[:seq] for t in self.rope_k)
        mask = self.mask[:seq, :seq]
        for layer in self.layers:
            h = layer(h, batch, rope_q, rope_k, mask)
        logits = self.norm(h) @ self.tok_embeddings.weight.t()
        return F.cross_entropy(logits, targets.reshape(-1))


# ---------------------------------------------------------------------------------------------
# nanoGPT's GPT (bias=False, dropout=0), for the quoted reference number only
class _GPTBlock(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1 = nn.LayerNorm(dim, bias=False)
        self.c_attn = nn.Linear(dim, 3 * dim, bias=False)
        self.c_proj = nn.Linear(dim, dim, bias=False)
        self.ln_2 = nn.LayerNorm(dim, bias=False)
        self.c_fc = nn.Linear(dim, 4 * dim, bias=False)
        self.mlp_proj = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class TorchGPT(nn.Module):
    def __init__(self, vocab_size, dim, n_layers, n_heads, block_size):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, dim)
        self.wpe = nn.Embedding(block_size, dim)
        self.h = nn.ModuleList([_GPTBlock(dim, n_heads) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(dim, bias=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def loss(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
