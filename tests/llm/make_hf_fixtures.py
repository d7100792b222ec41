"""Write the HuggingFace-parity fixtures of tests/llm/test_hf_parity.py (run once; the output is committed).

    .venv/bin/pip install transformers          # torch==2.13.0 is already in the 'torch' extra
    .venv/bin/python tests/llm/make_hf_fixtures.py

It builds a small random-init `transformers.LlamaForCausalLM` with grouped-query attention
(4 query heads, 2 key/value heads; the oracle recipe of the LLM-serving reference notes), saves it
with HF's own `save_pretrained` into tests/fixtures/hf_llama/, and records what HF computes:

* `logits_f32`: the full-sequence logits of two 20-token rows (eager attention, float32);
* `greedy_ids`: `generate(do_sample=False, max_new_tokens=32)` from an 8-token prompt;
* `ragged_ids`: greedy 16 tokens for two prompts of lengths 5 and 11, left-padded with an
  attention mask (HF's batched generation);
* `min_margin`: the smallest gap between the top two logits along the greedy paths — a float32
  comparison of greedy tokens is only meaningful if this is far above float32 noise.

The weights are drawn with initializer_range 0.25 (HF's default 0.02 gives a nearly uniform
next-token distribution, where greedy tokens would hinge on 1e-7 differences); the seed is fixed,
so rerunning the script reproduces the files. The tests need neither torch nor transformers.

There is no float64 oracle here: HF's LLaMA computes RMSNorm, the rotary tables and the softmax in
float32 even when the model is float64, so its "float64" logits are only float32-accurate.
tests/llm/test_model.py checks minispore against a hand-written float64 PyTorch LLaMA instead.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf_llama")
CONFIG = dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=10000.0,
              tie_word_embeddings=False, initializer_range=0.25, bos_token_id=1, eos_token_id=2)


def greedy_margins(model, torch, ids, n):
    """Top-1 minus top-2 logit at each greedy step (recomputed with full forwards)."""
    seq = ids.clone()
    gaps = []
    for _ in range(n):
        logits = model(seq).logits[0, -1].double()
        top2 = torch.topk(logits, 2).values
        gaps.append(float(top2[0] - top2[1]))
        seq = torch.cat([seq, logits.argmax().view(1, 1)], dim=1)
    return gaps


def main():
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG, attn_implementation="eager")).eval().float()
    # RMSNorm weights start at exactly 1: make them generic so a wrong norm layout cannot hide
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    os.makedirs(OUT, exist_ok=True)
    model.save_pretrained(OUT, safe_serialization=True)

    rng = np.random.default_rng(0)
    input_ids = rng.integers(3, CONFIG["vocab_size"], (2, 20)).astype(np.int64)     # ids >= 3: no bos/eos
    prompt = rng.integers(3, CONFIG["vocab_size"], (1, 8)).astype(np.int64)
    short, long = rng.integers(3, 256, 5), rng.integers(3, 256, 11)
    ragged = np.zeros((2, 11), np.int64)
    ragged[0, 6:], ragged[1] = short, long
    ragged_mask = np.zeros((2, 11), np.int64)
    ragged_mask[0, 6:], ragged_mask[1] = 1, 1

    with torch.no_grad():
        logits_f32 = model(torch.tensor(input_ids)).logits.numpy()
        greedy = model.generate(torch.tensor(prompt), do_sample=False, max_new_tokens=32, min_new_tokens=32,
                                pad_token_id=0)[0, 8:].numpy()
        ragged_out = model.generate(torch.tensor(ragged), attention_mask=torch.tensor(ragged_mask), do_sample=False,
                                    max_new_tokens=16, min_new_tokens=16, pad_token_id=0)[:, 11:].numpy()
        gaps = greedy_margins(model, torch, torch.tensor(prompt), 32)
        for row in (short, long):
            gaps += greedy_margins(model, torch, torch.tensor(row[None]), 16)

    np.savez(os.path.join(OUT, "expected.npz"), input_ids=input_ids, logits_f32=logits_f32,
             prompt=prompt, greedy_ids=greedy, ragged_ids=ragged, ragged_mask=ragged_mask, ragged_out=ragged_out,
             min_margin=np.float64(min(gaps)))
    with open(os.path.join(OUT, "versions.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "numpy": np.__version__}, f, indent=2)
        f.write("\n")
    sizes = {n: os.path.getsize(os.path.join(OUT, n)) for n in sorted(os.listdir(OUT))}
    print(f"wrote {OUT}: {sizes} ({sum(sizes.values()) / 1e3:.0f} kB); smallest greedy margin {min(gaps):.4f}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
