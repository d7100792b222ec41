"""Cost facts: every primitive's FLOPs and bytes live on the primitive (`Primitive.cost`, built
from ops/costs.py), and DryRun reads only those facts.

Oracles: closed-form counts written here (2*M*N*K for a GEMM, the formula's arithmetic per element,
FlashAttention-2's 4 vs 10 matmul terms per score and head), byte counts from shapes and dtypes,
and DryRun totals recorded from the name-table implementation these facts replaced (the numbers
must not move).
"""
import ast
import inspect

import pytest

import minispore as ms
from minispore import nn, ops
from minispore.graph import costs as dryrun_costs
from minispore.graph.dryrun import dryrun, graph_costs
from minispore.llm.config import LlamaConfig
from minispore.llm.model import Llama
from minispore.ops import costs
from minispore.ops.primitive import PRIMITIVES, AbstractTensor, get_primitive

F32, I32 = ms.float32, ms.int32


def at(*shape, dtype=F32):
    return AbstractTensor(shape, dtype)


def cost_of(name, ins, outs, **attrs):
    return get_primitive(name).cost(ins, outs, attrs)


# -- the facts, by hand ---------------------------------------------------------------------------------

def test_bmm_is_2mnk_on_the_matrix_unit_and_reads_transposed_operands():
    b, m, k, n = 3, 5, 7, 11
    c = cost_of("bmm", [at(b, m, k), at(b, k, n)], [at(b, m, n)])
    assert c["flops"] == 2 * b * m * n * k
    assert c["matmul_flops"] == c["flops"] and c["kind"] == "matmul"
    assert c["bytes_read"] == 4 * (b * m * k + b * k * n) and c["bytes_written"] == 4 * b * m * n
    assert c["takes_transposed"] is True
    # conv2d is matrix-unit work too, but it does not read a transposed operand in place
    assert "takes_transposed" not in costs.matrix_unit(costs.ELEMENTWISE)([at(2)], [at(2)], {})


def test_softmax_counts_five_flops_per_element_and_a_reduction_counts_its_input():
    c = cost_of("softmax", [at(4, 9)], [at(4, 9)], axis=-1)
    assert (c["flops"], c["kind"], c["bytes_read"], c["bytes_written"]) == (5 * 36, "vector", 144, 144)
    c = cost_of("reduce_var", [at(6, 10, dtype=ms.float64)], [at(6, dtype=ms.float64)], axis=(1,), keep_dims=False)
    assert c["flops"] == 3 * 60 and c["bytes_read"] == 8 * 60 and c["bytes_written"] == 8 * 6


def test_views_are_free_and_data_movement_costs_only_bytes():
    for name in ("reshape", "expand_dims", "squeeze", "broadcast_to", "stop_gradient"):
        c = get_primitive(name).cost([at(2, 3)], [at(3, 2)], {})
        assert (c["flops"], c["bytes_read"], c["bytes_written"], c["kind"]) == (0, 0, 0, "view"), name
    c = cost_of("concat", [at(2, 3), at(4, 3)], [at(6, 3)], axis=0)
    assert (c["flops"], c["bytes_read"], c["bytes_written"]) == (0, 24 + 48, 72)


def test_a_gather_reads_its_indices_and_the_rows_it_returns():
    table, idx, out = at(1000, 64), at(5, dtype=I32), at(5, 64)
    c = cost_of("gather", [table, idx], [out], axis=0, batch_dims=0)
    assert c["flops"] == 0
    assert c["bytes_read"] == 5 * 4 + 5 * 64 * 4          # not the 256 KB table
    assert c["bytes_written"] == 5 * 64 * 4


def test_flash_attention_backward_is_two_and_a_half_forwards_on_the_matrix_unit():
    b, s, n, d = 2, 16, 4, 8
    q = k = v = at(b, s, n * d)
    attrs = dict(head_num=n, input_layout="BSH")
    fwd = cost_of("flash_attention_score", [q, k, v, None, None, None], [], **attrs)
    bwd = cost_of("flash_attention_score_grad", [at(b, s, n * d), at(b, n, s, 8), q, k, v], [], **attrs)
    scores = b * n * s * s
    assert fwd["matmul_flops"] == 2 * (2 * scores * d)               # QK^T and PV
    assert bwd["matmul_flops"] == 5 * (2 * scores * d)               # recompute QK^T; dV, dP, dQ, dK
    assert bwd["matmul_flops"] / fwd["matmul_flops"] == 2.5
    assert fwd["flops"] - fwd["matmul_flops"] == 5 * scores and bwd["flops"] - bwd["matmul_flops"] == 8 * scores
    assert fwd["kind"] == bwd["kind"] == "matmul"


def test_sort_is_n_log_n_and_a_transpose_says_when_it_is_a_matrix_transpose():
    c = cost_of("sort", [at(3, 16)], [at(3, 16), at(3, 16, dtype=I32)], axis=-1, descending=False)
    assert c["flops"] == 3 * 16 * 4
    t = get_primitive("transpose").cost
    assert t([at(2, 3, 4)], [at(2, 4, 3)], {"perm": (0, 2, 1)}).get("transposed_operand") is True
    assert "transposed_operand" not in t([at(2, 3, 4)], [at(3, 2, 4)], {"perm": (1, 0, 2)})
    assert t([at(2, 3, 4)], [at(2, 4, 3)], {"perm": (0, 2, 1)})["bytes_read"] == 96


def test_the_default_rule_is_one_flop_per_output_element():
    c = costs.ELEMENTWISE([at(3, 4), 2.0], [at(3, 4, dtype=ms.float16)], {})
    assert (c["flops"], c["bytes_read"], c["bytes_written"], c["kind"]) == (12, 48, 24, "vector")


# -- DryRun reads only the facts ------------------------------------------------------------------------

def test_dryrun_costs_name_no_primitive():
    src = inspect.getsource(dryrun_costs)
    names = {n.value for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    kinds = {"matmul", "vector", "view", "host"}          # NodeCost kinds (one of them is also an op's name)
    assert not (names - kinds) & set(PRIMITIVES)
    for table in ("FLOPS_PER_ELEMENT", "FLOPS_PER_INPUT_ELEMENT", "VIEW_OPS", "MOVE_OPS", "GATHER_OPS",
                  "MATMUL_OPS", "COST_RULES", "register_cost"):
        assert not hasattr(dryrun_costs, table)


def test_a_transpose_is_free_only_when_every_consumer_takes_transposed_operands():
    def both(a, b):
        bt = ops.transpose(b, (1, 0))
        return ops.matmul(a, bt), ops.matmul(a, bt)

    def mixed(a, b):
        bt = ops.transpose(b, (1, 0))
        return ops.matmul(a, bt), bt + 1.0

    spec = (((4, 6), F32), ((5, 6), F32))
    for fn, free in ((both, True), (mixed, False)):
        r = dryrun(fn, *spec, device="h100")
        (c,) = [c for n, c in zip(r.graph.nodes, graph_costs(r.graph)) if n.op.name == "transpose"]
        assert (c.kind, c.bytes) == (("view", 0) if free else ("vector", 2 * 5 * 6 * 4))


def _tiny_llama(attention):
    ms.set_seed(0)
    return Llama(LlamaConfig(vocab_size=65, dim=32, n_layers=2, n_heads=4, max_seq_len=16), attention=attention)


class _ConvNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, pad_mode="pad", padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Dense(8 * 4 * 4, 10)

    def construct(self, x):
        y = ops.max_pool2d(ops.relu(self.bn(self.c(x))), 2)
        return ops.sum(self.fc(y.reshape(y.shape[0], -1)) ** 2)


# (total FLOPs, matrix-unit FLOPs, bytes moved, H100 step time) recorded from the name-table costs
RECORDED = {
    ("flash", False): (2050208, 1968128, 658452, 0.00016819655283582086),
    ("flash", True): (6620064, 5969920, 3266384, 0.0007289750399999998),
    ("naive", False): (2054304, 1968128, 757764, 0.00019222619820895515),
    ("naive", True): (6542240, 5904384, 3509008, 0.0007850474650746269),
    ("conv", False): (63804, 60416, 36844, 3.2010998208955225e-05),
    ("conv", True): (497888, 463872, 202900, 0.00014806450572786299),
}


@pytest.mark.parametrize("model, train", list(RECORDED))
def test_dryrun_totals_are_the_recorded_ones(model, train):
    if model == "conv":
        r = dryrun(_ConvNet(), ((2, 3, 8, 8), F32), train=train, device="h100")
    else:
        spec = ((2, 16), ms.int64)
        r = dryrun(_tiny_llama(model).loss, spec, spec, train=train, device="h100")
    flops, mm, moved, t = RECORDED[(model, train)]
    assert (r.total_flops, r.matmul_flops, r.bytes_moved) == (flops, mm, moved)
    assert r.step_time_s == pytest.approx(t, rel=1e-12)


def test_o1_fusion_keeps_the_recorded_flops():
    spec = ((2, 16), ms.int64)
    r = dryrun(_tiny_llama("flash").loss, spec, spec, train=True, device="h100", jit_level="O1")
    assert (r.total_flops, r.matmul_flops) == RECORDED[("flash", True)][:2]
    assert r.bytes_moved < RECORDED[("flash", True)][2]


def _one_node_cost(cost):
    from minispore.graph.ir import GraphBuilder
    from minispore.ops.primitive import Primitive
    prim = Primitive("toy_op", lambda x: AbstractTensor(x.shape, x.dtype), lambda x: x * 2, None, cost)
    g = GraphBuilder("toy")
    x = g.param(at(4, 5))
    y = g.add_node(prim, (x,), {}, at(4, 5)).outputs[0]
    (c,) = graph_costs(g.finish([y]))
    return c


def test_dryrun_reports_a_primitives_own_cost_fact_or_the_default():
    c = _one_node_cost(lambda ins, outs, attrs: {"flops": 7, "matmul_flops": 3, "bytes_read": 11,
                                                 "bytes_written": 13, "kind": "matmul"})
    assert (c.flops, c.matmul_flops, c.bytes_read, c.bytes_written, c.kind, c.bytes) == (7, 3, 11, 13, "matmul", 24)
    c = _one_node_cost(lambda ins, outs, attrs: {"flops": 9})           # bytes default to inputs + outputs
    assert (c.flops, c.matmul_flops, c.bytes_read, c.bytes_written, c.kind) == (9, 0, 80, 80, "vector")
    c = _one_node_cost(None)                                              # no fact: 1 FLOP per output element
    assert (c.flops, c.bytes_read, c.bytes_written, c.kind) == (20, 80, 80, "vector")
