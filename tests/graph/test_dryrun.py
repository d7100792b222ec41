"""DryRun: memory predicted = memory measured, FLOPs = the analytic count, no kernel and no weight memory.

Oracles: the arena executor's measured high-water mark (graph/run/arena.py) on graphs that
run here; a naive liveness count written in this file; the closed-form matmul FLOPs of a LLaMA
training step (6N'T + 12 L h s T) and Meta's published 6.7B parameter count; PyNative + mint AdamW
for the optimizer node's arithmetic.
"""
import json
import re
import tracemalloc

import numpy as np
import pytest

import minispore as ms
from minispore import nn, ops
from minispore.common.errors import OpTypeError, OpValueError
from minispore.graph.dryrun import (ASCEND_910B, H100, DeviceProfile, abstract_parameters, dryrun, is_abstract,
                                    node_cost)
from minispore.graph.dryrun import devices as dev
from minispore.graph.run import O0Executor
from minispore.llm.config import LlamaConfig, get_preset
from minispore.llm.model import Llama
from minispore.ops.primitive import AbstractTensor, get_primitive


def tiny_llama(attention="auto", **kw):
    ms.set_seed(0)
    cfg = LlamaConfig(**{**dict(vocab_size=65, dim=32, n_layers=2, n_heads=4, max_seq_len=16), **kw})
    return Llama(cfg, attention=attention), cfg


class MLP(nn.Cell):
    """Weights stored (in, out): the graph has no view ops, so the naive liveness oracle is exact."""

    def __init__(self):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(np.ones((16, 64), np.float32)), name="w1")
        self.b1 = ms.Parameter(ms.Tensor(np.zeros(64, np.float32)), name="b1")
        self.w2 = ms.Parameter(ms.Tensor(np.ones((64, 8), np.float32)), name="w2")
        self.b2 = ms.Parameter(ms.Tensor(np.zeros(8, np.float32)), name="b2")

    def construct(self, x):
        return ops.matmul(ops.relu(ops.matmul(x, self.w1) + self.b1), self.w2) + self.b2


# -- predicted memory == measured memory ---------------------------------------------------------------

@pytest.mark.parametrize("train", [False, True])
def test_predicted_arena_peak_equals_measured_on_tiny_llama(train):
    model, _ = tiny_llama()
    spec = ((2, 16), ms.int64)
    r = dryrun(model.loss, spec, spec, train=train, device="h100")
    ex = O0Executor(r.graph, arena=True)
    toks = np.random.default_rng(0).integers(0, 65, (2, 16))
    ex.run(toks, toks)
    assert ex.arena.high_water == r.arena_bytes
    assert r.actual_peak_bytes == r.static_bytes + ex.arena.high_water
    assert r.lower_bound_bytes <= r.arena_bytes


def test_lower_bound_equals_naive_liveness_on_an_mlp():
    net = MLP()
    r = dryrun(net, ((32, 16), ms.float32), device="h100", alignment=1)
    g = r.graph
    # naive oracle: a value lives from its producing node to its last reader (graph outputs: to
    # the end); the bytes live at step i are the sum over values whose interval contains i
    last = {}
    for i, node in enumerate(g.nodes):
        for x in node.inputs:
            if hasattr(x, "kind") and x.kind == "node":
                last[x.id] = i
    for o in g.outputs:
        last[o.id] = len(g.nodes) - 1
    live = [0] * len(g.nodes)
    for i, node in enumerate(g.nodes):
        for o in node.outputs:
            nb = o.aval.size * o.aval.dtype.np.itemsize
            for k in range(i, last.get(o.id, i) + 1):
                live[k] += nb
    assert r.lower_bound_bytes == max(live)
    assert [t - r.static_bytes for t in r.timeline] == live
    # static: the input and the four parameters, exactly
    assert r.static["input"] == 32 * 16 * 4
    assert r.static["parameter"] == (16 * 64 + 64 + 64 * 8 + 8) * 4


def test_train_step_graph_runs_and_matches_pynative_adamw():
    """The optimizer node is a real AdamW: running the DryRun graph updates the weights exactly as
    PyNative value_and_grad + mint.optim.AdamW does."""
    from minispore.mint.optim import AdamW
    spec = ((2, 16), ms.int64)
    toks = np.random.default_rng(1).integers(0, 65, (2, 16))
    model_a, _ = tiny_llama()
    r = dryrun(model_a.loss, spec, spec, train=True, device="h100", learning_rate=1e-2)
    loss_graph = O0Executor(r.graph).run(toks, toks)[0]
    model_b, _ = tiny_llama()
    opt = AdamW(model_b.trainable_params(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    t = ms.Tensor(toks)
    loss, grads = ms.value_and_grad(model_b.loss, None, model_b.trainable_params())(t, t)
    opt(grads)
    np.testing.assert_allclose(loss_graph, loss.asnumpy(), rtol=1e-6)
    # float32 weights after AdamW steps: Adam divides by sqrt(v), so an element whose gradient is mostly
    # cancellation carries the gradient's last-bit differences into its update, and graph and PyNative
    # may hand BLAS the same product with other operand layouts (rounded differently on some CPUs);
    # hence 1e-6 absolute. The float64 equality is tests/graph/test_suite_models_equal.py
    for pa, pb in zip(model_a.trainable_params(), model_b.trainable_params()):
        np.testing.assert_allclose(pa.asnumpy(), pb.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=pa.name)


# -- FLOPs ----------------------------------------------------------------------------------------------

def _matmul_params(cfg):
    d, h, kv = cfg.dim, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    per_layer = d * h + 2 * d * kv + h * d + 3 * d * cfg.hidden_dim
    return cfg.n_layers * per_layer + cfg.vocab_size * d          # + the output head


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("attention", ["naive", "flash"])
def test_matmul_flops_equal_the_closed_form(tie, attention):
    """Projections: 2N'T forward, twice that backward. Attention (full s x s): QK^T and PV are
    4 L h s T forward; the naive backward is twice that, flash attention's 2.5x (it recomputes
    QK^T from the saved log-sum-exp instead of storing the probabilities)."""
    model, cfg = tiny_llama(attention=attention, tie_embeddings=tie, n_kv_heads=2)
    b, s = 2, 16
    spec = ((b, s), ms.int64)
    tokens = b * s
    attn = 4 * cfg.n_layers * cfg.dim * s * tokens            # QK^T and PV, full s x s, forward
    fwd = dryrun(model.loss, spec, spec, device="h100")
    assert fwd.matmul_flops == 2 * _matmul_params(cfg) * tokens + attn
    step = dryrun(model.loss, spec, spec, train=True, device="h100")
    backward_attn = 2 * attn if attention == "naive" else 5 * attn // 2
    assert step.matmul_flops == 6 * _matmul_params(cfg) * tokens + attn + backward_attn


def test_llama_7b_training_step_parameters_flops_and_memory():
    cfg = get_preset("llama-7b").model
    with abstract_parameters():
        model = Llama(cfg, attention="naive")              # the s x s probabilities are stored
    assert all(is_abstract(p._data) for p in model.trainable_params())
    spec = ((1, 2048), ms.int64)
    r = dryrun(model.loss, spec, spec, train=True, device="ascend910b")
    n = r.num_params
    assert n == 6_738_415_616 == cfg.num_params()
    tokens, s, L, h = 2048, 2048, cfg.n_layers, cfg.dim
    assert r.matmul_flops == 6 * _matmul_params(cfg) * tokens + 12 * L * h * s * tokens
    # PaLM's count (6N per token with N = all parameters, + 12 L h s): within 2% (embedding lookups
    # and norms are not matmuls; elementwise ops add ~0.2%)
    palm = 6 * n * tokens + 12 * L * h * s * tokens
    assert abs(r.total_flops - palm) / palm < 0.02
    # static memory: fp32 weights 4N, AdamW moments 8N (the stated convention)
    assert r.static["parameter"] == 4 * n
    assert r.static["optimizer state"] == 8 * n
    assert not r.fits
    labels = [d[0] for d in r.dominant]
    assert labels[0].startswith("optimizer state") and r.dominant[0][1] == 8 * n
    assert labels[1] == "parameters" and r.dominant[1][1] == 4 * n
    assert "Does NOT fit on Huawei Ascend 910B" in r.fit_message()
    assert "saved activation: softmax" in r.fit_message()        # the s x s attention probabilities
    # with flash attention only the log-sum-exp is saved: the peak moves to the end of the backward
    # pass, where weights, gradients and moments are 16 bytes per parameter
    model.set_attention("flash")
    f = dryrun(model.loss, spec, spec, train=True, device="ascend910b")
    assert f.actual_peak_bytes < r.actual_peak_bytes
    assert ("gradients", 4 * n, 291) in f.dominant


# -- no kernels, no weight memory --------------------------------------------------------------------

def test_dryrun_runs_no_kernel(monkeypatch):
    model, _ = tiny_llama()
    called = []
    for name in ("matmul", "add", "softmax", "rms_norm", "embedding"):
        p = get_primitive(name)

        def boom(*a, _n=name, **k):
            called.append(_n)
            raise AssertionError("a kernel ran")
        monkeypatch.setattr(p, "kernel", boom)
    r = dryrun(model.loss, ((2, 16), ms.int64), ((2, 16), ms.int64), train=True, device="h100")
    assert called == [] and r.total_flops > 0


def test_abstract_parameters_take_no_memory():
    cfg = LlamaConfig(vocab_size=32000, dim=2048, n_layers=8, n_heads=16, max_seq_len=128, tie_embeddings=False)
    tracemalloc.start()
    with abstract_parameters():
        model = Llama(cfg)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert cfg.num_params() * 4 > 1.8e9                     # 1.8 GB if it were real ...
    assert peak < 20e6                                      # ... under 20 MB allocated
    assert all(is_abstract(p._data) for p in model.trainable_params())
    with abstract_parameters(dtype=ms.bfloat16):
        d = nn.Dense(64, 64)
    assert d.weight.dtype == ms.bfloat16 and is_abstract(d.weight._data)
    real = nn.Dense(64, 64)                                 # outside the block: real weights again
    assert not is_abstract(real.weight._data) and real.weight.asnumpy().std() > 0


# -- devices and the roofline ---------------------------------------------------------------------------

def test_roofline_node_time_by_hand():
    from minispore.graph.ir import GraphBuilder
    b = GraphBuilder("g")
    x = b.param(AbstractTensor((1024, 1024), ms.float16))
    mm = b.add_node(get_primitive("matmul"), (x, x), {}, AbstractTensor((1024, 1024), ms.float16))
    add = b.add_node(get_primitive("add"), (x, x), {}, AbstractTensor((1024, 1024), ms.float16))
    c_mm, c_add = node_cost(mm), node_cost(add)
    assert c_mm.flops == 2 * 1024 ** 3 and c_mm.kind == "matmul"
    assert c_add.flops == 1024 ** 2 and c_add.bytes == 3 * 1024 ** 2 * 2
    # matmul: compute-bound on an H100 (2.1 GFLOP / 989.4 TFLOP/s > 6 MiB / 3.35 TB/s)
    assert H100.node_time(c_mm, "float16") == pytest.approx(2 * 1024 ** 3 / 989.4e12 + H100.launch_s)
    # add: memory-bound
    assert H100.node_time(c_add, "float16") == pytest.approx(3 * 2 * 1024 ** 2 / 3.35e12 + H100.launch_s)
    assert ASCEND_910B.usable_bytes == 59392 * 2 ** 20


def test_cpu_profile_is_measured_once_then_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISPORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(dev, "_cpu_cached", {})
    p1 = dev.cpu_profile()
    assert p1.calibrated and p1.matmul_flops["float32"] > 0 and p1.mem_bw > 0 and p1.launch_s > 0
    table = json.loads((tmp_path / "device_profiles.json").read_text())
    assert dev.cpu_fingerprint() in table
    monkeypatch.setattr(dev, "_cpu_cached", {})
    monkeypatch.setattr(dev, "measure_cpu", lambda: (_ for _ in ()).throw(AssertionError("measured again")))
    p2 = dev.cpu_profile()                                  # read from the file
    assert p2 == p1


def test_device_lookup_and_custom_profile(tmp_path):
    assert dev.get_device("Ascend910B") is ASCEND_910B and dev.get_device("910b") is ASCEND_910B
    with pytest.raises(OpValueError, match="dryrun"):
        dev.get_device("tpu-v9")
    custom = DeviceProfile(name="toy", display_name="Toy", memory_bytes=2 ** 20, usable_bytes=2 ** 20, mem_bw=1e9,
                           matmul_flops={"float32": 1e9}, vector_flops={"float32": 1e9}, launch_s=0.0)
    with pytest.raises(OpValueError, match="DeviceProfile"):
        DeviceProfile(name="bad", display_name="Bad", memory_bytes=1, usable_bytes=1, mem_bw=1e9,
                      matmul_flops={}, vector_flops={"float32": 1e9}, launch_s=0.0)
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(custom.to_dict()))
    assert dev.load_profile(path) == custom
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(OpValueError, match="load_profile"):
        dev.load_profile(tmp_path / "broken.json")
    with pytest.raises(OpValueError, match="load_profile"):
        dev.load_profile(tmp_path / "missing.json")
    net = MLP()
    r = dryrun(net, ((4096, 16), ms.float32), device=custom)
    assert not r.fits and "Does NOT fit on Toy" in r.fit_message()
    assert r.step_time_s == pytest.approx(sum(n.time_s for n in r.nodes))


# -- the report -----------------------------------------------------------------------------------------

def test_report_lines_json_and_plot(tmp_path):
    model, _ = tiny_llama()
    spec = ((2, 16), ms.int64)
    r = dryrun(model.loss, spec, spec, train=True, device="ascend910b")
    text = str(r)
    used = re.search(r"Used peak memory usage \(without fragments\): (\d+)M", text)
    actual = re.search(r"Actual peak memory usage \(with fragments\): (\d+)M", text)
    assert used and actual
    assert int(used.group(1)) == -(-r.used_peak_bytes // 2 ** 20)
    assert max(r.timeline) == r.used_peak_bytes
    d = json.loads(r.to_json())
    assert d["actual_peak_bytes"] == r.actual_peak_bytes and d["num_params"] == r.num_params
    assert sum(o["calls"] for o in d["ops"]) == len(r.graph.nodes)
    assert sum(o["flops"] for o in d["ops"]) == r.total_flops
    assert {n.phase for n in r.nodes} == {"forward", "backward", "optimizer"}
    assert sum(1 for n in r.nodes if n.op == "adamw_update") == len(model.trainable_params())
    r.plot(tmp_path / "mem.png")
    assert (tmp_path / "mem.png").stat().st_size > 1000


def test_cli_dryrun(tmp_path, capsys):
    from minispore.cli import main
    js = tmp_path / "r.json"
    rc = main(["dryrun", "--model", "shakespeare-char", "--batch", "2", "--seq", "32", "--train",
               "--device", "h100", "--json", str(js), "--plot", str(tmp_path / "m.png"), "--top", "5"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Used peak memory usage (without fragments)" in out and "adamw_update" in out
    d = json.loads(js.read_text())
    assert d["train"] and d["num_params"] == get_preset("shakespeare-char").model.num_params()
    assert len(d["nodes"]) == d["num_nodes"] and max(n["live_bytes"] for n in d["nodes"]) == d["used_peak_bytes"]
    assert (tmp_path / "m.png").exists()
    assert main(["dryrun", "--model", "shakespeare-char", "--batch", "0"]) == 1
    assert "dryrun" in capsys.readouterr().err


# -- bad input -------------------------------------------------------------------------------------------

def test_bad_input_is_reported():
    net = MLP()
    with pytest.raises(OpValueError, match="dryrun"):
        dryrun(net, ((32, -1), ms.float32), device="h100")
    with pytest.raises(OpTypeError, match="dryrun"):
        dryrun(net, ((32, 16), "float99"), device="h100")
    with pytest.raises(OpTypeError, match="dryrun"):
        dryrun(net, np.zeros((32, 16), np.float32), device="h100")
    with pytest.raises(OpValueError, match="matmul"):             # a shape error: caught at capture
        dryrun(net, ((32, 15), ms.float32), device="h100")
    with pytest.raises(OpValueError, match="scalar loss"):
        dryrun(net, ((32, 16), ms.float32), train=True, device="h100")
    with pytest.raises(OpValueError, match="weights"):
        dryrun(lambda x: ops.sum(x), ((3,), ms.float32), train=True, device="h100")
    with pytest.raises(OpTypeError, match="dryrun"):
        dryrun(42, device="h100")


def test_o1_fusion_keeps_flops_cuts_bytes_and_its_peak_is_measured():
    model, _ = tiny_llama()
    spec = ((2, 16), ms.int64)
    o0 = dryrun(model.loss, spec, spec, train=True, device="h100")
    o1 = dryrun(model.loss, spec, spec, train=True, device="h100", jit_level="O1")
    if not any(n.op.startswith("fused_") for n in o1.nodes):
        pytest.skip("no C compiler: O1 runs unfused")
    assert len(o1.graph.nodes) < len(o0.graph.nodes)
    assert o1.total_flops == o0.total_flops                 # fused kernels count their members' FLOPs
    assert o1.bytes_moved < o0.bytes_moved                  # ... but read/write each value once
    ex = O0Executor(o1.graph, arena=True)
    toks = np.random.default_rng(0).integers(0, 65, (2, 16))
    ex.run(toks, toks)
    assert ex.arena.high_water == o1.arena_bytes
    with pytest.raises(OpValueError, match="jit_level"):
        dryrun(model.loss, spec, spec, device="h100", jit_level="O2")


def test_lazy_inline_calls_are_costed_and_planned_like_the_inlined_model():
    """A @lazy_inline block is one CALL node per layer: its FLOPs are its callee's, and the callee's
    arena is a workspace of the call, exactly as the arena executor runs it."""
    from minispore.llm import model as llama_model

    class LazyBlock(llama_model.TransformerBlock):
        @ms.lazy_inline
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

    cfg = LlamaConfig(vocab_size=65, dim=32, n_layers=3, n_heads=4, max_seq_len=16)
    saved = llama_model.TransformerBlock
    llama_model.TransformerBlock = LazyBlock
    try:
        ms.set_seed(0)
        lazy = Llama(cfg)
    finally:
        llama_model.TransformerBlock = saved
    ms.set_seed(0)
    plain = Llama(cfg)
    spec = ((2, 16), ms.int64)
    r_lazy = dryrun(lazy.loss, spec, spec, train=True, optimizer=None, device="h100")
    r_plain = dryrun(plain.loss, spec, spec, train=True, optimizer=None, device="h100")
    assert sum(1 for n in r_lazy.graph.nodes if n.op.name == "Call") >= cfg.n_layers
    assert r_lazy.total_flops == r_plain.total_flops and r_lazy.matmul_flops == r_plain.matmul_flops
    ex = O0Executor(r_lazy.graph, arena=True)
    toks = np.random.default_rng(0).integers(0, 65, (2, 16))
    ex.run(toks, toks)
    assert ex.arena.high_water == r_lazy.arena_bytes
