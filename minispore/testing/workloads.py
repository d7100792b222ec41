"""Small reference workloads for parity tests: the same computation run two ways (PyNative vs a
graph mode, CPU vs a plugin backend) must give the same numbers.

`tiny_llama_train_step` is a 2-layer grouped-query LLaMA with an AdamWeightDecay step: every op
family a real training step touches (embedding, RMSNorm, RoPE, attention, SwiGLU, cross-entropy,
the backward of each, the optimizer update), in a few milliseconds.
"""
from __future__ import annotations


def tiny_llama_train_step(seed: int = 0):
    """(model, step) where `step(x, y)` runs forward + backward + optimizer update and returns the
    loss. `x`, `y`: int token ids of shape (batch, <= 8), vocabulary 17. Seeded, so two calls with
    the same seed build identical models."""
    from .. import nn                           # late imports: the parity kit itself needs neither
    from ..autograd import value_and_grad
    from ..common.context import set_seed
    from ..llm import Llama, LlamaConfig
    set_seed(seed)
    cfg = LlamaConfig(vocab_size=17, dim=16, n_layers=2, n_heads=2, n_kv_heads=1, max_seq_len=8, ffn_dim=32)
    model = Llama(cfg)
    opt = nn.AdamWeightDecay(model.trainable_params(), learning_rate=1e-2, beta1=0.9, beta2=0.99, eps=1e-8,
                             weight_decay=0.1)
    grad_fn = value_and_grad(model.loss, None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    return model, step
