"""PyTorch mirrors of the suite's models (bench/suite_models.py), op for op.

Same layers, same attribute names and the same arithmetic as the MindSpore-API versions, so that
`load_minispore_weights` can copy minispore's initial weights in by name and both frameworks
report the same first loss. The LLaMA preset's mirror is `TorchLlama` in bench/torch_models.py.

Attention is written out (two batched matmuls, an additive -inf mask, softmax) instead of
`scaled_dot_product_attention`, because that is what the minispore model computes.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head, self.head_dim = n_head, n_embd // n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.register_buffer("mask", torch.triu(torch.full((block_size, block_size), float("-inf")), 1),
                             persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.n_head, self.head_dim).permute(0, 2, 3, 1)
        v = v.view(b, t, self.n_head, self.head_dim).transpose(1, 2)
        att = (q @ k) * self.scale + self.mask[:t, :t]
        y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class GPTMLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="none"))


class GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = GPTMLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([GPTBlock(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x).reshape(b * t, -1) @ self.wte.weight.t()
        return F.cross_entropy(logits, targets.reshape(-1))


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv3x3(cin, cout, stride)
        self.bn1 = nn.BatchNorm2d(cout, momentum=0.1)     # = MindSpore's momentum 0.9 (weight of the old value)
        self.conv2 = conv3x3(cout, cout)
        self.bn2 = nn.BatchNorm2d(cout, momentum=0.1)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, widths=(16, 32, 64, 128), blocks=1, num_classes=10):
        super().__init__()
        self.stem = conv3x3(3, widths[0])
        self.bn = nn.BatchNorm2d(widths[0])
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            for j in range(blocks):
                layers.append(BasicBlock(cin, w, 2 if (i > 0 and j == 0) else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x, labels):
        x = self.layers(F.relu(self.bn(self.stem(x))))
        return F.cross_entropy(self.fc(x.mean(dim=(2, 3))), labels)


class MLP(nn.Module):
    def __init__(self, sizes=(784, 1024, 1024, 10)):
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.fc2 = nn.Linear(sizes[1], sizes[2])
        self.fc3 = nn.Linear(sizes[2], sizes[3])

    def forward(self, x, labels):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return F.cross_entropy(self.fc3(x), labels)


# MindSpore parameter names end in these; PyTorch's in these (LayerNorm and BatchNorm gamma/beta,
# Embedding's table, BatchNorm's running statistics — which a standalone MindSpore BatchNorm calls
# 'mean'/'variance').
_LEAF_NAMES = {"gamma": "weight", "beta": "bias", "embedding_table": "weight", "moving_mean": "running_mean",
               "moving_variance": "running_var", "mean": "running_mean", "variance": "running_var"}


def torch_name(ms_name: str) -> str:
    head, _, leaf = ms_name.rpartition(".")
    leaf = _LEAF_NAMES.get(leaf, leaf)
    return f"{head}.{leaf}" if head else leaf


def load_minispore_weights(torch_model: nn.Module, ms_params) -> None:
    """Copy `ms_params` ({minispore name: ndarray}, trainable and not: BatchNorm's running
    statistics too) into `torch_model` by name. Every torch parameter and buffer must be covered
    (except BatchNorm's step counter and non-persistent buffers such as the causal mask), with
    the same shape: a model that does not match fails here, not as a wrong loss later."""
    state = {torch_name(k): torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in ms_params.items()}
    own = torch_model.state_dict()
    unexpected = sorted(set(state) - set(own))
    missing = sorted(k for k in set(own) - set(state) if not k.endswith("num_batches_tracked"))
    if unexpected or missing:
        raise ValueError(f"minispore -> torch weights do not match: unexpected {unexpected}, missing {missing}")
    for k, v in state.items():
        if tuple(own[k].shape) != tuple(v.shape):
            raise ValueError(f"{k}: minispore shape {tuple(v.shape)} vs torch {tuple(own[k].shape)}")
    torch_model.load_state_dict(state, strict=False)
