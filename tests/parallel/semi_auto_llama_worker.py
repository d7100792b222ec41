"""One rank of tests/parallel/test_semi_auto_llama.py, run under `mpiexec -n N`:
`python semi_auto_llama_worker.py CASE[,CASE...] OUT_DIR` writes OUT_DIR/rank_<r>.json.

A case names a TransformerOpParallelConfig: "dp2mp2sp_vdp" is data_parallel=2, model_parallel=2,
use_seq_parallel=True, vocab_emb_dp=True ("_vp": the vocabulary split, vocab_emb_dp=False); a
"_tied" suffix ties the head to the embedding table (one split table for lookup and logits).

Every rank first trains the single-process reference (stand_alone, PyNative, the whole global
batch) once per head kind (untied, tied); then, per case, the same tiny 2-layer LLaMA (GQA: 8 query heads, 4 key/value heads;
untied head; float64) annotated by `shard_llama(model, parallel_config)` trains the same steps
under `parallel_mode="semi_auto_parallel"` in GRAPH_MODE (TrainOneStepCell compiled: the pass
partitions forward, backward and Adam). The losses and every parameter (gathered from its
shards, tests/parallel/semi_auto_worker.gathered) are compared with the reference's.
"""
import json
import os
import re
import sys

import numpy as np

import minispore as ms
from minispore import nn
from minispore.common import auto_parallel_context as apc
from minispore.communication import get_group_size, get_rank, init
from minispore.llm.config import LlamaConfig, TransformerOpParallelConfig
from minispore.llm.model import Llama
from minispore.llm.shard_strategies import shard_llama

from semi_auto_worker import gathered

STEPS = 10
F64 = ms.float64
CONFIG = dict(vocab_size=16, dim=32, n_layers=2, n_heads=8, n_kv_heads=4, max_seq_len=8, ffn_dim=64,
              tie_embeddings=False)


def parallel_config(case):
    m = re.fullmatch(r"(?:dp(\d+))?mp(\d+)(sp)?_(vp|vdp)(?:_tied)?", case)
    return TransformerOpParallelConfig(data_parallel=int(m.group(1) or 1), model_parallel=int(m.group(2)),
                                       use_seq_parallel=bool(m.group(3)), vocab_emb_dp=m.group(4) == "vdp")


class LlamaLoss(nn.Cell):
    def __init__(self, pc=None, tied=False):
        super().__init__()
        ms.set_seed(5)
        self.model = Llama(LlamaConfig(**{**CONFIG, "tie_embeddings": tied}), attention="naive")
        for p in self.model.trainable_params():
            p.set_dtype(F64)
        if pc is not None:
            shard_llama(self.model, pc)

    def construct(self, tokens, targets):
        return self.model.loss(tokens, targets)


def train(net, tokens):
    opt = nn.Adam(net.trainable_params(), learning_rate=0.01)
    step = nn.TrainOneStepCell(net, opt)
    return [float(step(ms.Tensor(t[:, :-1]), ms.Tensor(t[:, 1:])).asnumpy()) for t in tokens]


def main():
    init()
    rank, n = get_rank(), get_group_size()
    comm = ms.common.process_groups.world().comm
    tokens = np.random.default_rng(6).integers(0, 16, (STEPS, 4, 9)).astype(np.int32)
    refs = {}

    def reference(tied):
        if tied not in refs:
            apc.set_auto_parallel_context(parallel_mode="stand_alone")
            ms.set_context(mode=ms.PYNATIVE_MODE)
            ref = LlamaLoss(tied=tied)
            refs[tied] = (train(ref, tokens), {p.name: p.asnumpy() for p in ref.trainable_params()})
        return refs[tied]

    out = {"rank": rank, "size": n}
    for case in sys.argv[1].split(","):
        tied = case.endswith("_tied")
        ref_losses, ref_params = reference(tied)
        out["ref_losses" + ("_tied" if tied else "")] = ref_losses
        pc = parallel_config(case)
        apc.set_auto_parallel_context(parallel_mode="semi_auto_parallel", full_batch=True)
        ms.set_context(mode=ms.GRAPH_MODE)
        net = LlamaLoss(pc, tied)
        losses = train(net, tokens)
        out[case] = {
            "losses": losses,
            "loss_diff": float(max(abs(a - b) for a, b in zip(losses, ref_losses))),
            "param_err": {p.name: float(np.max(np.abs(gathered(comm, p) - ref_params[p.name])))
                          for p in net.trainable_params()},
            "local_shapes": {p.name: list(p.shape) for p in net.trainable_params()},
        }
        ms.set_context(mode=ms.PYNATIVE_MODE)
        apc.set_auto_parallel_context(parallel_mode="stand_alone")
    with open(os.path.join(sys.argv[2], f"rank_{rank}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
