"""The benchmark suite's models, written once against the MindSpore API (bench/suite.py).

Three models live here — nanoGPT's GPT, a small ResNet and a 3-layer MLP; the fourth, the LLaMA
preset, is `minispore.llm.Llama` itself. Each model is a Cell whose `construct(x, y)` returns the
training loss, so one `value_and_grad(model, None, weights)` gives the whole backward pass.

The same text runs on minispore (the default) and on real MindSpore (`SUITE_FRAMEWORK=mindspore`,
set by bench/suite_mindspore.py in a separate venv): only the import at the top differs. That is
the point of the suite — the models were not written for minispore, they are what a MindSpore
user writes.

* `GPT`    nanoGPT's model.py (karpathy/nanoGPT) for the shakespeare_char config: token + learned
           position embedding, pre-LayerNorm blocks (LayerNorm with bias), causal self-attention
           with one fused qkv Dense (with bias), scores `q k^T / sqrt(head_dim)` plus an additive
           -inf mask above the diagonal, softmax, `@ v`; a 4x MLP with the exact (erf) GELU;
           a final LayerNorm and the head tied to the token embedding; cross-entropy.
           Init as nanoGPT: normal(0.02), the residual projections normal(0.02 / sqrt(2 n_layer)),
           biases zero. Dropout 0 (the benchmark times the arithmetic, not the dropout mask).
* `ResNet` BasicBlock ResNet for 32x32 images: a 3x3 stem conv, four stages of `blocks` BasicBlocks
           (3x3 conv, BatchNorm, ReLU, 3x3 conv, BatchNorm, + shortcut, ReLU; a 1x1 conv + BatchNorm
           shortcut where the shape changes), stride 2 from the second stage on, global average
           pooling, a Dense classifier; cross-entropy. BatchNorm in training mode (batch statistics,
           running statistics updated).
* `MLP`    784-1024-1024-10 with ReLU, Dense with bias; cross-entropy.
"""
from __future__ import annotations

import math
import os

import numpy as np

if os.environ.get("SUITE_FRAMEWORK") == "mindspore":
    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.common.initializer import Normal
else:
    import minispore as ms
    from minispore import nn, ops
    from minispore.common.initializer import Normal


# ---------------------------------------------------------------------------------------------
# (a) nanoGPT's GPT
class CausalSelfAttention(nn.Cell):
    def __init__(self, n_embd, n_head, block_size, n_layer):
        super().__init__()
        self.n_head, self.head_dim = n_head, n_embd // n_head
        self.c_attn = nn.Dense(n_embd, 3 * n_embd, weight_init=Normal(0.02), bias_init="zeros")
        self.c_proj = nn.Dense(n_embd, n_embd, weight_init=Normal(0.02 / math.sqrt(2 * n_layer)), bias_init="zeros")
        self.scale = 1.0 / math.sqrt(self.head_dim)
        # additive causal mask: 0 on and below the diagonal, -inf above (nanoGPT's masked_fill)
        self.mask = ms.Tensor(np.triu(np.full((block_size, block_size), -np.inf, np.float32), 1))

    def construct(self, x):
        b, t, c = x.shape
        q, k, v = ops.split(self.c_attn(x), c, axis=2)
        q = ops.transpose(ops.reshape(q, (b, t, self.n_head, self.head_dim)), (0, 2, 1, 3))
        k = ops.transpose(ops.reshape(k, (b, t, self.n_head, self.head_dim)), (0, 2, 3, 1))   # k^T
        v = ops.transpose(ops.reshape(v, (b, t, self.n_head, self.head_dim)), (0, 2, 1, 3))
        att = ops.matmul(q, k) * self.scale + self.mask[:t, :t]
        y = ops.matmul(ops.softmax(att, axis=-1), v)                                           # (b, h, t, hd)
        y = ops.reshape(ops.transpose(y, (0, 2, 1, 3)), (b, t, c))
        return self.c_proj(y)


class GPTMLP(nn.Cell):
    def __init__(self, n_embd, n_layer):
        super().__init__()
        self.c_fc = nn.Dense(n_embd, 4 * n_embd, weight_init=Normal(0.02), bias_init="zeros")
        self.c_proj = nn.Dense(4 * n_embd, n_embd, weight_init=Normal(0.02 / math.sqrt(2 * n_layer)),
                               bias_init="zeros")

    def construct(self, x):
        return self.c_proj(ops.gelu(self.c_fc(x), approximate="none"))


class GPTBlock(nn.Cell):
    def __init__(self, n_embd, n_head, block_size, n_layer):
        super().__init__()
        self.ln_1 = nn.LayerNorm((n_embd,), epsilon=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, n_layer)
        self.ln_2 = nn.LayerNorm((n_embd,), epsilon=1e-5)
        self.mlp = GPTMLP(n_embd, n_layer)

    def construct(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Cell):
    """`GPT(vocab_size, block_size, n_layer, n_head, n_embd)`; `construct(idx, targets)` -> mean
    cross-entropy of the next-token logits. idx, targets: (batch, t) int64, t <= block_size."""

    def __init__(self, vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128):
        super().__init__()
        self.n_embd = n_embd
        self.wte = nn.Embedding(vocab_size, n_embd, embedding_table=Normal(0.02))
        self.wpe = nn.Embedding(block_size, n_embd, embedding_table=Normal(0.02))
        self.h = nn.CellList([GPTBlock(n_embd, n_head, block_size, n_layer) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm((n_embd,), epsilon=1e-5)
        self.pos = ms.Tensor(np.arange(block_size, dtype=np.int64))

    def construct(self, idx, targets):
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(self.pos[:t])
        for block in self.h:
            x = block(x)
        x = ops.reshape(self.ln_f(x), (b * t, self.n_embd))
        logits = ops.matmul(x, ops.transpose(self.wte.embedding_table, (1, 0)))      # tied head
        return ops.cross_entropy(logits, ops.reshape(targets, (b * t,)))


# ---------------------------------------------------------------------------------------------
# (c) ResNet
def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, pad_mode="pad", padding=1, has_bias=False)


class BasicBlock(nn.Cell):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv3x3(cin, cout, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = conv3x3(cout, cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.has_downsample = stride != 1 or cin != cout
        if self.has_downsample:
            self.downsample = nn.SequentialCell([
                nn.Conv2d(cin, cout, 1, stride=stride, pad_mode="valid", has_bias=False), nn.BatchNorm2d(cout)])

    def construct(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = self.downsample(x) if self.has_downsample else x
        return self.relu(out + shortcut)


class ResNet(nn.Cell):
    """`ResNet(widths=(16, 32, 64, 128), blocks=1, num_classes=10)`; `construct(x, labels)` ->
    mean cross-entropy. x: (batch, 3, 32, 32) float32, labels: (batch,) int64."""

    def __init__(self, widths=(16, 32, 64, 128), blocks=1, num_classes=10):
        super().__init__()
        self.stem = conv3x3(3, widths[0])
        self.bn = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU()
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            for j in range(blocks):
                layers.append(BasicBlock(cin, w, 2 if (i > 0 and j == 0) else 1))
                cin = w
        self.layers = nn.SequentialCell(layers)
        self.fc = nn.Dense(cin, num_classes)

    def construct(self, x, labels):
        x = self.layers(self.relu(self.bn(self.stem(x))))
        return ops.cross_entropy(self.fc(ops.mean(x, (2, 3))), labels)


# ---------------------------------------------------------------------------------------------
# (d) MLP
class MLP(nn.Cell):
    """`MLP(sizes=(784, 1024, 1024, 10))`: Dense + ReLU between layers; `construct(x, labels)` ->
    mean cross-entropy. x: (batch, 784) float32, labels: (batch,) int64."""

    def __init__(self, sizes=(784, 1024, 1024, 10)):
        super().__init__()
        self.fc1 = nn.Dense(sizes[0], sizes[1])
        self.fc2 = nn.Dense(sizes[1], sizes[2])
        self.fc3 = nn.Dense(sizes[2], sizes[3])
        self.relu = nn.ReLU()

    def construct(self, x, labels):
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return ops.cross_entropy(self.fc3(x), labels)
