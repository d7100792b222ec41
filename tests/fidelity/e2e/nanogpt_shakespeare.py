"""nanoGPT's GPT (LayerNorm, GELU, biased Dense, masked softmax attention) on Tiny Shakespeare
characters, trained with `value_and_grad` + `AdamWeightDecay` — in PyNative, or with the training
step compiled by `@ms.jit` (--jit). Written as a MindSpore user would port Karpathy's model; runs
unchanged on real MindSpore and on minispore.

    --data PATH        the Tiny Shakespeare text
    --init-ckpt PATH   load the initial weights from PATH if it exists, else save them there
    --record PATH      write the per-step losses as JSON
"""
import argparse
import json
import math
import os

import numpy as np

import mindspore as ms
from mindspore import nn, ops


class GPTConfig:
    def __init__(self, vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=32):
        self.vocab_size, self.block_size = vocab_size, block_size
        self.n_layer, self.n_head, self.n_embd = n_layer, n_head, n_embd


class CausalSelfAttention(nn.Cell):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Dense(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Dense(config.n_embd, config.n_embd)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        mask = np.tril(np.ones((config.block_size, config.block_size), dtype=np.bool_))
        self.mask = ms.Tensor(mask.reshape(1, 1, config.block_size, config.block_size))

    def construct(self, x):
        B, T, C = x.shape
        q, k, v = ops.split(self.c_attn(x), self.n_embd, axis=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(0, 2, 1, 3)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(0, 2, 1, 3)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(0, 2, 1, 3)
        att = ops.matmul(q, k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // self.n_head))
        att = ops.masked_fill(att, ops.logical_not(self.mask[:, :, :T, :T]), float("-inf"))
        att = ops.softmax(att, axis=-1)
        y = ops.matmul(att, v)
        y = y.transpose(0, 2, 1, 3).view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Cell):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Dense(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU(approximate=False)
        self.c_proj = nn.Dense(4 * config.n_embd, config.n_embd)

    def construct(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Cell):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm((config.n_embd,))
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm((config.n_embd,))
        self.mlp = MLP(config)

    def construct(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Cell):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.CellList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm((config.n_embd,))
        self.lm_head = nn.Dense(config.n_embd, config.vocab_size, has_bias=False)

    def construct(self, idx):
        _, t = idx.shape
        pos = ops.arange(0, t, dtype=ms.int32)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def get_batches(data, steps, batch_size, block_size, seed=1337):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        ix = rng.integers(0, len(data) - block_size - 1, size=batch_size)
        x = np.stack([data[i:i + block_size] for i in ix]).astype(np.int32)
        y = np.stack([data[i + 1:i + 1 + block_size] for i in ix]).astype(np.int32)
        yield ms.Tensor(x), ms.Tensor(y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--init-ckpt", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--jit", action="store_true")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = np.array([stoi[c] for c in text[:200000]], dtype=np.int32)

    config = GPTConfig(vocab_size=len(chars))
    model = GPT(config)
    if os.path.exists(args.init_ckpt):
        ms.load_param_into_net(model, ms.load_checkpoint(args.init_ckpt))
    else:
        ms.save_checkpoint(model, args.init_ckpt)
    optimizer = nn.AdamWeightDecay(model.trainable_params(), learning_rate=1e-3, weight_decay=0.1)

    def forward_fn(idx, targets):
        logits = model(idx)
        return ops.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters)

    def train_step(idx, targets):
        loss, grads = grad_fn(idx, targets)
        optimizer(grads)
        return loss

    if args.jit:
        train_step = ms.jit(train_step)
    model.set_train()
    losses = []
    for step, (x, y) in enumerate(get_batches(data, args.steps, batch_size=8, block_size=config.block_size)):
        loss = train_step(x, y)
        losses.append(float(loss.asnumpy()))
        print(f"step {step + 1}: loss {losses[-1]:.6f}")
    with open(args.record, "w") as f:
        json.dump({"losses": losses}, f, indent=1)


if __name__ == "__main__":
    main()
