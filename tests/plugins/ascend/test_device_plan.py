"""The device-plan API (minispore.backend.device_plan, built by graph/run/device_plan_builder.py)
and the Ascend plugin on it: the plan's regions, lifetimes and streams against independent
oracles, a ten-line host executor that only binds and launches (poisoning every buffer the plan
says is dead), the backend hook at every jit level, and flash_attention_score on the device."""
import warnings

import numpy as np
import pytest

import minispore as ms
from minispore import ops
from minispore.backend import CPUBackend, DevicePlan, PlannedBuffer, registry
from minispore.backend.base import DeviceTensor
from minispore.common import dtype as mstype
from minispore.graph import GraphBuilder, O0Executor
from minispore.graph.ir import HOST_CALL, OPAQUE, Slot, Value
from minispore.graph.run import O1Executor
from minispore.graph.run.device_plan_builder import build_device_plan
from minispore.ops.primitive import AbstractTensor, get_primitive
from minispore.testing.opdb.fused_attention import _fa_grad_ref, flash_ref
from minispore_ascend import backend as ascend_backend
from minispore_ascend.kbk import KBKExecutor

F32 = mstype.float32


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def add_prim(b, name, inputs, **attrs):
    prim = get_primitive(name)
    avals = prim.infer(*[x.aval if isinstance(x, Value) else x for x in inputs], **attrs)
    node = b.add_node(prim, inputs, attrs, avals)
    return node.outputs if node.multi else node.outputs[0]


def traced(fn, *args):
    """The graph `jit(fn, capture_mode="trace")` compiles for `args` (on the current backend)."""
    return ms.jit(fn, capture_mode="trace").compile(*args).graph


def mlp(x, w1, w2, g):
    h = ops.silu(ops.matmul(x, w1))
    h = h * g
    s = ops.softmax(ops.matmul(h, w2), -1)
    return ops.sum(ops.transpose(s, (1, 0)) * 2.0 + 1.0, 1), ops.reshape(s, (-1,))


def mlp_args(seed=0):
    r = np.random.default_rng(seed)
    return [ms.Tensor(rand(r, *s)) for s in ((4, 8), (8, 16), (16, 5))] + [ms.Tensor(np.ones(16, np.float32))]


def fan(x, w1, w2, w3):
    """Three branches read x (produced on one stream, read on the others); pairwise joins."""
    h = ops.exp(ops.mul(x, 0.1))
    a = ops.silu(ops.matmul(h, w1))
    b = ops.softmax(ops.matmul(h, w2), -1)
    c = ops.exp(ops.mul(ops.matmul(h, w3), 0.1))
    a = ops.matmul(a, w1)
    return ops.add(ops.add(a, b), c), ops.mul(b, c)


def fan_args(seed=4):
    r = np.random.default_rng(seed)
    return [ms.Tensor(rand(r, *s)) for s in ((64, 256), (256, 256), (256, 256), (256, 256))]


# -- a host executor over a DevicePlan: what a plugin does, nothing more ----------------------------------
class HostPlanExecutor:
    """Binds a DevicePlan to host "device" memory and launches it in order. After each launch it
    fills every arena buffer whose lifetime ended there with NaN, so a plan that let a tensor die
    before its last reader gives wrong results."""

    def __init__(self, plan, backend):
        self.plan, self.b = plan, backend
        regions = {r: backend.alloc(n) for r, n in plan.region_bytes.items()}
        self.t = [DeviceTensor(regions[buf.region], buf.shape, buf.dtype, buf.offset) for buf in plan.buffers]
        for buf, array in plan.constants:
            backend.copy_h2d(regions["constants"], array, offset=buf.offset)
        self.steps = [(backend.device_kernel_for(L.op), [self.t[x.id] if isinstance(x, PlannedBuffer) else x
                                                          for x in L.inputs], [self.t[o.id] for o in L.outputs],
                       dict(L.attrs)) for L in plan.launches]
        self.dies_after = {}
        for buf in plan.buffers:
            if buf.region == "arena" and buf.dtype.is_floating:
                self.dies_after.setdefault(buf.end, []).append(buf)

    def run(self, *arrays):
        for buf, a in zip(self.plan.inputs, self.plan.input_arrays(arrays)):
            self.b.copy_h2d(self.t[buf.id].buffer, a, offset=buf.offset)
        for k, (kernel, ins, outs, attrs) in enumerate(self.steps):
            kernel(ins, outs, attrs, None)
            for buf in self.dies_after.get(k, ()):
                if buf.end < len(self.steps) - 1:                 # (graph outputs live to the end)
                    self.b.as_array(self.t[buf.id])[...] = np.nan
        return [self.b.to_host(self.t[o.id]) if isinstance(o, PlannedBuffer) else o for o in self.plan.outputs]


class PlanToy(CPUBackend):
    """A backend whose graph executor is HostPlanExecutor; it records what the hook receives."""

    name = "PlanToy"

    def __init__(self, decline=False):
        super().__init__()
        self.calls, self.decline = [], decline

    def graph_executor(self, plan, jit_level="O0"):
        self.calls.append((plan, jit_level))
        return None if self.decline else HostPlanExecutor(plan, self)


@pytest.fixture
def toy():
    b = PlanToy()
    registry.use_backend(b)
    try:
        yield b
    finally:
        registry.use_backend("CPU")


# -- the plan: regions, constants, literals ----------------------------------------------------------------
def test_regions_hold_inputs_constants_and_the_arena():
    w = ms.Parameter(ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32)), name="w")
    c = np.array([0.5, -1.0, 4.0], np.float32)
    ct = ms.Tensor(c)                               # a constant Tensor input (not a capture)
    b = GraphBuilder("regions")
    x = b.param(AbstractTensor((3,), F32))
    cw = b.capture(w)
    a = add_prim(b, "add", [x, cw])
    m = add_prim(b, "mul", [a, ct])                 # the same constant twice: one device copy
    d = add_prim(b, "add", [m, ct])
    e = add_prim(b, "mul", [d, 2.0])                # a Python scalar: passed to the kernel as is
    plan = build_device_plan(b.finish([e, x, 7]))
    assert isinstance(plan, DevicePlan) and plan.n_params == 1 and plan.n_streams == 1
    assert [(i.region, i.offset, i.shape) for i in plan.inputs] == [("inputs", 0, (3,)), ("inputs", 512, (3,))]
    ((cbuf, carr),) = plan.constants
    assert cbuf.region == "constants" and cbuf.offset == 0 and cbuf.nbytes == 12 and cbuf.size == 512
    np.testing.assert_array_equal(carr, c)
    assert [L.primitive for L in plan.launches] == ["add", "mul", "add", "mul"]
    assert plan.launches[1].inputs[1] is cbuf and plan.launches[2].inputs[1] is cbuf
    assert plan.launches[3].inputs[1] == 2.0
    assert plan.outputs[1] is plan.inputs[0] and plan.outputs[2] == 7
    assert dict(plan.region_bytes) == {"arena": plan.arena_bytes, "inputs": 1024, "constants": 512}
    assert all(buf.offset % 512 == 0 and buf.size % 512 == 0 for buf in plan.buffers)
    assert [buf.id for buf in plan.buffers] == list(range(len(plan.buffers)))
    x0 = np.array([1.0, -2.0, 0.25], np.float32)
    cpu = registry.get_backend("CPU")
    out, same_x, seven = HostPlanExecutor(plan, cpu).run(x0)
    np.testing.assert_allclose(out, ((x0 + w.asnumpy()) * c + c) * 2.0, rtol=1e-6)
    np.testing.assert_array_equal(same_x, x0)
    assert seven == 7
    w.set_data(ms.Tensor(np.zeros(3, np.float32)))       # captures are read at every run
    np.testing.assert_allclose(HostPlanExecutor(plan, cpu).run(x0)[0], (x0 * c + c) * 2.0, rtol=1e-6)


def test_one_stream_lifetimes_end_at_the_last_reader_and_live_buffers_never_share_bytes():
    graph = traced(mlp, *mlp_args())
    plan = build_device_plan(graph)
    last_reader = {}                                      # the oracle, from the graph itself
    for i, node in enumerate(graph.nodes):
        for x in node.inputs:
            if isinstance(x, Value):
                last_reader[x.id] = i
    outputs = {o.id for o in graph.outputs if isinstance(o, Value)}
    n = len(graph.nodes)
    arena = {}
    for L in plan.launches:
        assert L.index == L.node and L.stream == 0 and not L.waits and not L.signals
        for o, v in zip(L.outputs, graph.nodes[L.node].outputs):
            assert o.region == "arena" and o.start == L.index and o.shape == v.aval.shape
            assert o.end == (n - 1 if v.id in outputs else last_reader.get(v.id, L.index))
            arena[o.id] = o
    bufs = list(arena.values())
    for p in bufs:
        for q in bufs:
            if p.id < q.id and p.start <= q.end and q.start <= p.end:
                assert p.offset + p.size <= q.offset or q.offset + q.size <= p.offset, (p, q)
    assert plan.arena_bytes < plan.no_reuse_bytes


@pytest.mark.parametrize("n_streams", [1, 2, 3])
def test_binding_and_launching_the_plan_gives_the_cpu_results(n_streams):
    """Dead buffers are poisoned after their last launch: the results only come out right if no
    launch reads a tensor the plan let die (on several streams too, launched in the plan's order)."""
    for fn, args in ((mlp, mlp_args()), (fan, fan_args())):
        want = [t.asnumpy() for t in fn(*args)]
        plan = build_device_plan(traced(fn, *args), n_streams=n_streams)
        got = HostPlanExecutor(plan, registry.get_backend("CPU")).run(*[t.asnumpy() for t in args])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# -- several streams ---------------------------------------------------------------------------------------
def _device_order(plan):
    """The oracle for 'finished before' on the device, from the plan's launches alone: a path in the
    graph of stream-order edges (consecutive launches of one stream) and event edges (awaited ->
    waiter). after[a] = the launches certainly ordered after launch a."""
    n = len(plan.launches)
    succ = [set() for _ in range(n)]
    last_on = {}
    for L in plan.launches:
        if L.stream in last_on:
            succ[last_on[L.stream]].add(L.index)
        last_on[L.stream] = L.index
        for j in L.waits:
            succ[j].add(L.index)
    after = []
    for a in range(n):
        seen, todo = set(), list(succ[a])
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(succ[x])
        after.append(seen)
    return after


def _unsafe_pairs(buffers, producer, touchers, after):
    """Pairs of buffers sharing bytes where the later one's producer may run on the device before
    the earlier one's producer and readers are done."""
    bad = []
    for p in buffers:
        for q in buffers:
            if p is q or max(p.offset, q.offset) >= min(p.offset + p.size, q.offset + q.size):
                continue
            first, second = (p, q) if p.start < q.start else (q, p)
            if not all(producer[second.id] in after[a] for a in touchers[first.id]):
                bad.append((first.id, second.id))
    return bad


def test_multi_stream_arena_reuses_bytes_only_after_every_reader_on_every_stream():
    """For every two tensors that share arena bytes, the later one's producer is ordered ON THE
    DEVICE (stream order + events) after the earlier one's producer and all its readers. The plan
    made from the issue order alone (the scheduler's hold_until) breaks this for this graph: a
    kernel issued later on another stream may run earlier."""
    from minispore.graph import memory
    from minispore.graph.streams import schedule_streams
    graph = traced(fan, *fan_args())
    for n in (2, 3):
        plan = build_device_plan(graph, n_streams=n)
        after = _device_order(plan)
        producer, touchers = {}, {}
        for L in plan.launches:
            for o in L.outputs:
                producer[o.id], touchers[o.id] = L.index, {L.index}
        for L in plan.launches:
            for x in L.inputs:
                if isinstance(x, PlannedBuffer) and x.region == "arena":
                    touchers[x.id].add(L.index)
        arena = [b for b in plan.buffers if b.region == "arena"]
        assert len({L.stream for L in plan.launches}) > 1 and plan.num_events > 0
        assert _unsafe_pairs(arena, producer, touchers, after) == []
        assert plan.arena_bytes < plan.no_reuse_bytes             # it still reuses memory
        if n == 2:        # the contrast: lifetimes over the issue order, extended only by hold_until
            order, hold = schedule_streams(graph, n).memory_constraints()
            assert order == [L.node for L in plan.launches]
            by_value = {}
            for L in plan.launches:
                for o, v in zip(L.outputs, graph.nodes[L.node].outputs):
                    by_value[v.id] = o
            end = {}
            for L in plan.launches:
                for x in graph.nodes[L.node].inputs:
                    if isinstance(x, Value) and x.id in by_value:
                        end[x.id] = max(end.get(x.id, 0), L.index)
            outs = {o.id for o in graph.outputs if isinstance(o, Value)}
            naive_bufs = [memory.Buffer(v, o.nbytes, o.size, o.start, len(order) - 1 if v in outs else
                                        max(end.get(v, o.start), hold.get(v, 0))) for v, o in by_value.items()]
            naive = memory.plan_buffers(naive_bufs, n_steps=len(order))
            moved = [PlannedBuffer(o.id, "arena", naive.offsets[v], o.nbytes, o.size, o.shape, o.dtype, o.start,
                                   o.end) for v, o in by_value.items()]
            assert _unsafe_pairs(moved, producer, touchers, after) != []


def test_plans_for_other_stream_counts_share_inputs_and_constants():
    graph = traced(fan, *fan_args())
    one = build_device_plan(graph)
    two = one.for_streams(2)
    assert one.for_streams(2) is two and two.for_streams(1) is one and one.for_streams(1) is one
    assert two.inputs == one.inputs and two.constants == one.constants
    assert two.region_bytes["inputs"] == one.region_bytes["inputs"]
    assert sorted(L.node for L in two.launches) == list(range(len(graph.nodes)))
    waited = set()
    for L in two.launches:
        for j in L.waits:                                        # an event of an EARLIER launch, other stream
            assert j < L.index and two.launches[j].stream != L.stream
            waited.add(j)
    assert {L.index for L in two.launches if L.signals} == waited
    assert "launches on 2 stream(s)" in two.describe()


# -- the hook: jit levels, declines, graphs a plan cannot express -----------------------------------------
@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_the_hook_gets_the_plan_of_the_captured_graph_with_the_jit_level(toy, level):
    args = mlp_args()
    jf = ms.jit(mlp, capture_mode="trace", jit_level=level)
    got = [t.asnumpy() for t in jf(*args)]
    ((plan, lvl),) = toy.calls
    assert lvl == level and isinstance(plan, DevicePlan)
    assert [L.primitive for L in plan.launches] == [n.op.name for n in jf.compile(*args).graph.nodes]
    registry.use_backend("CPU")
    for g, w in zip(got, mlp(*args)):
        np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-5, atol=1e-6)


def test_a_backend_that_declines_gets_the_cores_executor_for_the_level():
    b = PlanToy(decline=True)
    registry.use_backend(b)
    try:
        args = mlp_args()
        entry = ms.jit(mlp, capture_mode="trace", jit_level="O1").compile(*args)
    finally:
        registry.use_backend("CPU")
    assert [lvl for _, lvl in b.calls] == ["O1"]
    assert isinstance(entry.executor, O1Executor)


def test_graphs_with_host_calls_never_reach_the_hook(toy):
    from minispore.jit import make_executor
    b = GraphBuilder("with_host_call")
    x = b.param(AbstractTensor((3,), F32))
    y = add_prim(b, "add", [x, 1.0])
    node = b.add_structural(HOST_CALL, [y], {"fn": lambda t: "seen", "template": ((Slot(0),), {}), "name": "note"},
                            [OPAQUE])
    graph = b.finish([y, node.outputs[0]])
    with pytest.warns(RuntimeWarning, match="PlanToy: graph 'with_host_call' has control flow or host calls"):
        ex = make_executor(graph, "O0")
    assert isinstance(ex, O0Executor) and toy.calls == []
    out, token = ex.run(np.ones(3, np.float32))
    np.testing.assert_array_equal(out, np.full(3, 2.0, np.float32))
    assert token == "seen"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                          # said once per graph and level
        make_executor(graph, "O0")
    with pytest.raises(ms.OpValueError, match="a graph of primitives on tensors"):
        build_device_plan(graph)


# -- the Ascend plugin at O1 / O2 ----------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_ascend_runs_o1_and_o2_on_the_device_as_o0_and_says_so_once(on_ascend, monkeypatch, level):
    monkeypatch.setattr(ascend_backend, "_LEVEL_WARNED", set())
    args = mlp_args(5)
    o0 = [t.asnumpy() for t in ms.jit(mlp, capture_mode="trace")(*args)]
    jf = ms.jit(mlp, capture_mode="trace", jit_level=level)
    launches = on_ascend.launches
    with pytest.warns(UserWarning, match=f"Ascend: jit_level '{level}' runs kernel by kernel on the device, as O0"):
        got = [t.asnumpy() for t in jf(*args)]
    ex = jf.compile(*args).executor
    assert isinstance(ex, KBKExecutor) and ex.jit_level == level
    aclnn = [on_ascend.device_kernels[L.primitive].aclnn for L in ex.plan.launches]
    assert on_ascend.launches - launches == sum(a.startswith("aclnn") for a in aclnn)   # every aclnn kernel ran
    assert not on_ascend.fallbacks and len(aclnn) == ex.launches_per_run == 10
    for g, w in zip(got, o0):
        np.testing.assert_array_equal(g, w)                                   # the same kernels as O0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ms.jit(lambda x: ops.exp(x), capture_mode="trace", jit_level=level)(args[0])
    ms.set_context(device_target="CPU")
    for g, w in zip(got, mlp(*args)):
        np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-5, atol=1e-6)


# -- flash_attention_score on the device ---------------------------------------------------------------------
FA_ATTRS = dict(keep_prob=1.0, scale_value=1.0, pre_tokens=2147483647, next_tokens=2147483647, inner_precise=0,
                input_layout="BSH", sparse_mode=0, prefix=None, block_q=128, block_kv=128)
TOLS = {mstype.float32: 1e-5, mstype.float16: 2e-3, mstype.bfloat16: 1.6e-2}


def layout_shape(layout, b, n, s, d):
    return {"BNSD": (b, n, s, d), "BSND": (b, s, n, d), "BSH": (b, s, n * d)}[layout]


# layout, B, N1, N2, S1, S2, D, attrs, mask ("none" | "dense": random, one fully masked row)
FA_CASES = [
    ("BSH", 2, 4, 2, 7, 7, 2, dict(sparse_mode=2, scale_value=0.7), "none"),       # causal, GQA 4/2
    ("BNSD", 1, 2, 2, 5, 9, 3, dict(sparse_mode=3), "none"),                        # cached prefix
    ("BSH", 2, 2, 1, 6, 6, 2, dict(pre_tokens=3, next_tokens=1), "dense"),         # mask + band, empty row
    ("BSND", 1, 2, 1, 70, 70, 4, dict(sparse_mode=1, scale_value=0.5), "dense"),   # all-mask, two key tiles
    ("BNSD", 1, 3, 3, 4, 5, 8, dict(), "none"),                                    # no mask at all
]


def fa_case(case, dtype, seed=0, empty_row=True):
    layout, b, n1, n2, s1, s2, d, extra, mask_kind = case
    r = np.random.default_rng(seed)
    npdt = dtype.np
    q = r.standard_normal(layout_shape(layout, b, n1, s1, d)).astype(npdt)
    k = r.standard_normal(layout_shape(layout, b, n2, s2, d)).astype(npdt)
    v = r.standard_normal(layout_shape(layout, b, n2, s2, d)).astype(npdt)
    mask = None
    if mask_kind == "dense":
        mask = r.random((b, 1, s1, s2)) < 0.3
        mask[..., 0] = False
        if empty_row:
            mask[0, 0, 1] = True                                    # a row that sees nothing: out 0, lse -inf
    attrs = dict(FA_ATTRS, head_num=n1, input_layout=layout, **extra)
    return q, k, v, mask, attrs


def fa_prim(q, k, v, mask, attrs):
    T = lambda a: None if a is None else ms.Tensor(a)       # noqa: E731
    return [t.asnumpy() for t in get_primitive("flash_attention_score")(T(q), T(k), T(v), None, None, T(mask),
                                                                          **attrs)]


def reference(q, k, v, mask, attrs):
    """The naive float64 attention of the op table (the whole score matrix, a plain softmax)."""
    a = {k_: attrs[k_] for k_ in ("keep_prob", "pre_tokens", "next_tokens", "input_layout", "sparse_mode")}
    f64 = lambda t: t.astype(np.float64)                    # noqa: E731
    return flash_ref(f64(q), f64(k), f64(v), attrs["head_num"], attn_mask=mask, scalar_value=attrs["scale_value"],
                     with_lse=True, **a)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(b)
    assert (np.isfinite(a) == finite).all() and (a[~finite] == b[~finite]).all()
    return float(np.abs(a[finite] - b[finite]).max(initial=0.0) / max(np.abs(b[finite]).max(initial=0.0), 1.0))


@pytest.mark.parametrize("dtype", [mstype.float32, mstype.float16, mstype.bfloat16], ids=str)
@pytest.mark.parametrize("case", FA_CASES, ids=lambda c: f"{c[0]}-{c[7].get('sparse_mode', 0)}-{c[8]}")
def test_flash_attention_score_runs_the_aclnn_kernel_and_matches_naive_attention(on_ascend, case, dtype):
    q, k, v, mask, attrs = fa_case(case, dtype)
    launches = on_ascend.launches
    out, lse, seed = fa_prim(q, k, v, mask, attrs)
    assert on_ascend.launches - launches == 1                          # one aclnnFlashAttentionScore
    assert not on_ascend.fallbacks                                     # ... and no CPU fallback at all
    ref_out, ref_lse = reference(q, k, v, mask, attrs)
    assert out.dtype == dtype.np and lse.dtype == np.float32 and seed == 0
    assert rel(out, ref_out) < TOLS[dtype]
    assert rel(lse, ref_lse) < 1e-5 if dtype is mstype.float32 else rel(lse, ref_lse) < TOLS[dtype]
    ms.set_context(device_target="CPU")
    cpu_out, cpu_lse, _ = fa_prim(q, k, v, mask, attrs)                # and the CPU reference kernel
    assert rel(out, cpu_out) < TOLS[dtype] and rel(lse, cpu_lse) < TOLS[dtype]


@pytest.mark.parametrize("case", FA_CASES[:4], ids=lambda c: f"{c[0]}-{c[7].get('sparse_mode', 0)}-{c[8]}")
def test_flash_attention_gradient_runs_the_aclnn_kernel_and_matches_complex_step(on_ascend, case):
    q, k, v, mask, attrs = fa_case(case, mstype.float32, seed=1, empty_row=False)   # (log 0 in the reference)
    w = np.random.default_rng(2).standard_normal(q.shape).astype(np.float32)
    kw = {a: attrs[a] for a in ("input_layout", "sparse_mode", "pre_tokens", "next_tokens")}
    m = None if mask is None else ms.Tensor(mask)

    def loss(q_, k_, v_):
        out = ops.flash_attention_score(q_, k_, v_, attrs["head_num"], attn_mask=m,
                                        scalar_value=attrs["scale_value"], **kw)
        return (out * ms.Tensor(w)).sum()

    launches = on_ascend.launches
    grads = [g.asnumpy() for g in ms.grad(loss, grad_position=(0, 1, 2))(ms.Tensor(q), ms.Tensor(k), ms.Tensor(v))]
    assert on_ascend.launches - launches >= 2                          # forward + backward on aclnn
    assert "flash_attention_score" not in on_ascend.fallbacks
    assert "flash_attention_score_grad" not in on_ascend.fallbacks
    out, lse = reference(q, k, v, mask, attrs)
    f64 = [t.astype(np.float64) for t in (w, q, k, v)]
    want = _fa_grad_ref(f64[0], np.zeros_like(lse), *f64[1:], out, lse, np.int64(0), None, None, mask,
                        **{a: attrs[a] for a in FA_ATTRS}, head_num=attrs["head_num"])
    for g, r in zip(grads, want):
        assert g.shape == r.shape and rel(g, r) < 1e-5


def test_flash_attention_in_a_graph_runs_on_the_device_forward_and_backward(on_ascend):
    q, k, v, mask, attrs = fa_case(FA_CASES[0], mstype.float32, seed=3)

    def loss(q_, k_, v_):
        out = ops.flash_attention_score(q_, k_, v_, 4, sparse_mode=2, scalar_value=0.7)
        return (out * out).sum()

    step = ms.jit(ms.value_and_grad(loss, grad_position=(0, 1, 2)), capture_mode="trace")
    args = [ms.Tensor(t) for t in (q, k, v)]
    value, grads = step(*args)
    ex = step.compile(*args).executor
    assert isinstance(ex, KBKExecutor)
    prims = [L.primitive for L in ex.plan.launches]
    assert "flash_attention_score" in prims and "flash_attention_score_grad" in prims
    assert "flash_attention_score" not in on_ascend.fallbacks
    assert "flash_attention_score_grad" not in on_ascend.fallbacks
    ms.set_context(device_target="CPU")
    cpu_value, cpu_grads = ms.value_and_grad(loss, grad_position=(0, 1, 2))(*args)
    np.testing.assert_allclose(value.asnumpy(), cpu_value.asnumpy(), rtol=1e-5)
    for g, c in zip(grads, cpu_grads):
        assert rel(g.asnumpy(), c.asnumpy()) < 1e-5


def test_calls_aclnn_cannot_make_fall_back_one_by_one_counted(on_ascend):
    """float64, sparse_mode 4 and a nonzero lse cotangent run the CPU reference, counted - and right."""
    q, k, v, mask, attrs = fa_case(FA_CASES[4], mstype.float32, seed=4)
    band = dict(attrs, sparse_mode=4, pre_tokens=1, next_tokens=0)
    wide = [t.astype(np.float64) for t in (q, k, v)]
    got = [fa_prim(*wide, None, attrs), fa_prim(q, k, v, None, band)]
    assert on_ascend.fallbacks["flash_attention_score"] == 2
    out, lse = reference(q, k, v, None, attrs)
    dout = np.random.default_rng(5).standard_normal(q.shape).astype(np.float32)
    dlse = np.random.default_rng(6).standard_normal(lse.shape).astype(np.float32)
    grad_prim = get_primitive("flash_attention_score_grad")
    grad_args = [ms.Tensor(t.astype(np.float32)) for t in (dout, dlse, q, k, v, out, lse)] + \
        [ms.Tensor(np.array(0, np.int64)), None, None, None]
    dq = grad_prim(*grad_args, **attrs)[0].asnumpy()
    assert on_ascend.fallbacks["flash_attention_score_grad"] == 1
    ms.set_context(device_target="CPU")
    want = [fa_prim(*wide, None, attrs), fa_prim(q, k, v, None, band)]
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g[0], w_[0])                     # the CPU kernel itself ran
    np.testing.assert_array_equal(dq, grad_prim(*grad_args, **attrs)[0].asnumpy())
    ref = _fa_grad_ref(dout.astype(np.float64), dlse.astype(np.float64), *(t.astype(np.float64) for t in (q, k, v)),
                       out, lse, np.int64(0), None, None, None, **{a: attrs[a] for a in FA_ATTRS},
                       head_num=attrs["head_num"])
    assert rel(dq, ref[0]) < 1e-4                                      # and it is right (dlse included)
