"""Run by tests/communication/test_collectives.py on 2 and 4 MPI ranks (mpiexec): every collective's
forward and backward against NumPy on the gathered data, in PyNative and under ms.jit (ast O0,
trace O1, ast O2, and a whole gradient compiled as one graph), async handles, a 2-rank subgroup,
send/recv, and the traffic counters against the cost facts.

Oracle: every rank's input is X[k] = a known function of k, so each rank computes what every other
rank holds with NumPy (float64) and derives the expected outputs and gradients independently of
minispore. Each rank's loss is sum(out * W[rank]); the gradient MPI-autodiff gives rank r is the
gradient of the *global* loss sum_k loss_k with respect to x_r (the bprops communicate).
Prints "OK <rank> <checks>" at the end; any failed assertion raises, and the job exits non-zero.
"""
import sys

import numpy as np

import minispore as ms
from minispore import communication as comm
from minispore import ops
from minispore.common.errors import OpValueError
from minispore.communication import comm_func as cf
from minispore.ops.primitive import get_primitive
from minispore.ops.prims import comm as prims

comm.init()
R, P = comm.get_rank(), comm.get_group_size()
CHECKS = [0]


def data(k, shape, salt=0):
    """Rank k's input: distinct values (ties only where a test wants them)."""
    rng = np.random.default_rng(1000 * salt + k)
    return rng.uniform(0.5, 2.0, shape)


def close(got, want, what, tol=1e-5):
    got = got.asnumpy() if hasattr(got, "asnumpy") else np.asarray(got)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol, err_msg=f"rank {R}: {what}")
    CHECKS[0] += 1


def t32(a):
    return ms.Tensor(np.asarray(a, np.float32))


MODES = {
    "pynative": lambda f: f,
    "jit-ast-O0": lambda f: ms.jit(f, capture_mode="ast", jit_level="O0"),
    "jit-trace-O1": lambda f: ms.jit(f, capture_mode="trace", jit_level="O1"),
    "jit-ast-O2": lambda f: ms.jit(f, capture_mode="ast", jit_level="O2"),
}


def check_case(name, fn, x, want_out, w, want_grad):
    """fn's forward and gradient (loss = sum(fn(x) * w)) in every mode, plus the gradient compiled
    as one graph (jit of grad)."""
    xt, wt = t32(x), t32(w)
    for mode, wrap in MODES.items():
        f = wrap(fn)
        close(f(xt), want_out, f"{name} forward [{mode}]")

        def loss(t, f=f):
            return (f(t) * wt).sum()
        close(ms.grad(loss)(xt), want_grad, f"{name} backward [{mode}]", tol=1e-4)

    def plain_loss(t):
        return (fn(t) * wt).sum()
    close(ms.jit(ms.grad(plain_loss), jit_level="O1")(xt), want_grad, f"{name} backward [jit(grad) O1]", tol=1e-4)


# -------------------------------------------------------------------------------------------------
shape = (2 * P, 3)
X = [data(k, shape) for k in range(P)]
W = [data(k, shape, salt=1) for k in range(P)]
Wsum = sum(W)

# all_reduce: sum, max, min, prod (MindSpore's rules for the gradient)
allred = ops.AllReduce()
check_case("all_reduce sum", lambda t: allred(t), X[R], sum(X), W[R], Wsum)
for op, reduce in (("max", np.maximum.reduce), ("min", np.minimum.reduce)):
    prim = ops.AllReduce(op)
    out = reduce(X)
    check_case(f"all_reduce {op}", lambda t, prim=prim: prim(t), X[R], out, W[R], Wsum * (X[R] == out))
prod = np.prod(X, axis=0)
check_case("all_reduce prod", lambda t: ops.AllReduce("prod")(t), X[R], prod, W[R],
           sum(W[k] * prod for k in range(P)) / X[R])

# all_gather (axis 0, rank order); gradient = reduce-scatter of the cotangents
gather_w = [data(k, (P * shape[0], 3), salt=2) for k in range(P)]
n0 = shape[0]
check_case("all_gather", lambda t: ops.AllGather()(t), X[R], np.concatenate(X, axis=0), gather_w[R],
           sum(gather_w)[R * n0:(R + 1) * n0])

# reduce_scatter (sum): rank r keeps block r; gradient = all-gather of the cotangents
blk = shape[0] // P
rs_w = [data(k, (blk, 3), salt=3) for k in range(P)]
check_case("reduce_scatter", lambda t: ops.ReduceScatter()(t), X[R], sum(X)[R * blk:(R + 1) * blk],
           rs_w[R], np.concatenate(rs_w, axis=0))

# all_to_all: split along dim 1 of a (3, 2P, 2) tensor, concat along dim 0
a2a_shape = (3, 2 * P, 2)
A = [data(k, a2a_shape, salt=4) for k in range(P)]


def a2a_reference(blocks_of, split_dim, concat_dim, r):
    return np.concatenate([np.split(blocks_of[k], P, axis=split_dim)[r] for k in range(P)], axis=concat_dim)


out_shape = a2a_reference(A, 1, 0, 0).shape
A_w = [data(k, out_shape, salt=5) for k in range(P)]
# rank r's block j (along dim 1) became rank j's output block r (along dim 0)
a2a_grad = np.concatenate([np.split(A_w[j], P, axis=0)[R] for j in range(P)], axis=1)
check_case("all_to_all", lambda t: ops.AlltoAll(P, 1, 0)(t), A[R], a2a_reference(A, 1, 0, R), A_w[R], a2a_grad)

# broadcast from the last rank: the root's gradient is the sum of every rank's cotangent
root = P - 1
check_case("broadcast", lambda t: ops.Broadcast(root)((t,))[0], X[R], X[root], W[R],
           Wsum if R == root else np.zeros(shape))

# all_to_all_v with uneven rows: rank k sends (j + k) % 2 + 1 rows to rank j
send_rows = tuple((j + R) % 2 + 1 for j in range(P))
recv_rows = tuple((R + k) % 2 + 1 for k in range(P))
V = [data(k, (sum((j + k) % 2 + 1 for j in range(P)), 2), salt=6) for k in range(P)]


def v_rows(k, j):
    """Rows of rank k's input that go to rank j."""
    sizes = [(i + k) % 2 + 1 for i in range(P)]
    start = sum(sizes[:j])
    return V[k][start:start + sizes[j]]


v_out = np.concatenate([v_rows(k, R) for k in range(P)], axis=0)
Vw = [data(k, (sum((k + i) % 2 + 1 for i in range(P)), 2), salt=7) for k in range(P)]


def v_w_rows(j, k):
    """Rows of rank j's cotangent that came from rank k."""
    sizes = [(j + i) % 2 + 1 for i in range(P)]
    start = sum(sizes[:k])
    return Vw[j][start:start + sizes[k]]


v_grad = np.concatenate([v_w_rows(j, R) for j in range(P)], axis=0)
v_fn = lambda t: cf.all_to_all_single_with_output_shape(v_out.shape, t, recv_rows, send_rows)[0]  # noqa: E731
check_case("all_to_all_single", v_fn, V[R], v_out, Vw[R], v_grad)

# bad input is refused by inference on every rank before anything is sent (no rank hangs)
for bad in (lambda: ops.ReduceScatter()(t32(np.ones((2 * P + 1, 3)))),
            lambda: ops.AlltoAll(P, 0, 1)(t32(np.ones((P + 1, 2))))):
    try:
        bad()
    except OpValueError as e:
        assert "divisible" in str(e), str(e)
        CHECKS[0] += 1
    else:
        raise AssertionError("an indivisible first dimension was accepted")

# -------------------------------------------------------------------------------------------------
# comm_func: synchronous results, async handles, in-place forms
out, handle = cf.all_reduce(t32(X[R]))
assert handle is None
close(out, sum(X), "comm_func.all_reduce")
out, handle = cf.all_reduce(t32(X[R]), op="max", async_op=True)
other = t32(X[R]) * 2                       # work while the Iallreduce is in flight
handle.wait()
close(out, np.maximum.reduce(X), "async all_reduce max")
close(other, 2 * X[R], "work overlapped with the async all_reduce")
out, handle = cf.all_gather_into_tensor(t32(X[R]), async_op=True)
handle.wait()
close(out, np.concatenate(X), "async all_gather_into_tensor")
buf = ms.Tensor(np.zeros((P * shape[0], 3), np.float32))
assert cf.all_gather_into_tensor(buf, t32(X[R])) is None
close(buf, np.concatenate(X), "in-place all_gather_into_tensor")
rs_out = ms.Tensor(np.zeros((blk, 3), np.float32))
h = cf.reduce_scatter_tensor(rs_out, t32(X[R]), async_op=True)
h.wait()
close(rs_out, sum(X)[R * blk:(R + 1) * blk], "async in-place reduce_scatter_tensor")
out, h = cf.reduce_scatter_tensor(t32(X[R]), "min")
close(out, np.minimum.reduce(X)[R * blk:(R + 1) * blk], "reduce_scatter_tensor min")
b, h = cf.broadcast(t32(X[R]), src=0, async_op=True)
h.wait()
close(b, X[0], "async broadcast")
close(cf.broadcast(t32(X[R]), 1), X[1], "broadcast from rank 1")
out, h = cf.all_to_all_single_with_output_shape(v_out.shape, t32(V[R]), recv_rows, send_rows, async_op=True)
h.wait()
close(out, v_out, "async all_to_all_single")
cf.barrier()

# -------------------------------------------------------------------------------------------------
# send / recv: ranks pair up (0->1, 2->3); the receiver's loss gradient travels back to the sender
peer = R ^ 1
xs = data(R, (2, 3), salt=8)
ws = data(R, (2, 3), salt=9)
if R % 2 == 0:
    sender = ops.Send(sr_tag=3, dest_rank=peer)
    for mode, wrap in MODES.items():
        f = wrap(lambda t: sender(t * 2.0))
        close(ms.grad(lambda t, f=f: f(t))(t32(xs)), 2 * data(peer, (2, 3), salt=9), f"send backward [{mode}]")
    cf.send(t32(xs), dst=peer, tag=5)
    h = cf.isend(t32(xs) + 1, dst=peer, tag=6)
    h.wait()
else:
    receiver = ops.Receive(sr_tag=3, src_rank=peer, shape=(2, 3), dtype=ms.float32)
    for mode, wrap in MODES.items():
        f = wrap(lambda v: receiver(v))
        seen = []

        def loss(v, f=f):
            y = f(v)
            seen.append(y)
            return (y * t32(ws)).sum()
        g = ms.grad(loss)(ms.Tensor(np.zeros((), np.float32)))
        close(g, 0.0, f"receive's virtual input gets zero [{mode}]")
        close(seen[0], 2 * data(peer, (2, 3), salt=8), f"received 2x [{mode}]")
    close(cf.recv(t32(np.zeros((2, 3))), src=peer, tag=5), data(peer, (2, 3), salt=8), "comm_func.recv")
    got, h = cf.irecv(t32(np.zeros((2, 3))), src=peer, tag=6)
    h.wait()
    close(got, data(peer, (2, 3), salt=8) + 1, "irecv")

# a ring exchange posted at once (would deadlock with blocking sends of large buffers)
nxt, prv = (R + 1) % P, (R - 1) % P
res = cf.batch_isend_irecv([cf.P2POp("isend", t32(np.full(4, R)), nxt),
                            cf.P2POp(cf.irecv, t32(np.zeros(4)), prv)])
close(res[1], np.full(4, prv), "batch_isend_irecv ring")

# -------------------------------------------------------------------------------------------------
# a 2-rank subgroup (world ranks 0 and the last one) inside the world
members = (0, P - 1)
comm.create_group("pair", list(members))
if R in members:
    pair_sum = X[0] + X[P - 1]
    check_case("all_reduce in a subgroup", lambda t: ops.AllReduce(group="pair")(t), X[R], pair_sum, W[R],
               W[0] + W[P - 1])
    out, _ = cf.all_gather_into_tensor(t32(X[R]), group="pair")
    close(out, np.concatenate([X[0], X[P - 1]]), "all_gather in a subgroup")
    close(cf.broadcast(t32(X[R]), src=P - 1, group="pair"), X[P - 1], "broadcast in a subgroup (world rank src)")
else:
    try:
        ops.AllReduce(group="pair")
    except OpValueError as e:
        assert "AllReduce" in str(e) and "belongs to" in str(e), str(e)
        CHECKS[0] += 1
    else:
        raise AssertionError("a non-member built AllReduce(group='pair')")
cf.barrier()

# -------------------------------------------------------------------------------------------------
# the traffic counters: ring bytes per rank, summed over the ranks, equal the cost facts' totals
prims.reset_comm_bytes()
x = t32(X[R])                                             # (2P, 3) float32: n bytes
n = x.nbytes if hasattr(x, "nbytes") else X[R].size * 4
ops.AllReduce()(x)
ops.AllGather()(x)
ops.ReduceScatter()(x)
ops.AlltoAll(P, 0, 1)(x)
ops.Broadcast(0)((x,))
counted = prims.comm_bytes()
from mpi4py import MPI                                     # noqa: E402  (the test reads the sums)
from minispore.ops.primitive import AbstractTensor          # noqa: E402

aval = AbstractTensor(X[R].shape, ms.float32)
world = "hccl_world_group"
outs = {"all_reduce": [aval], "all_gather": [AbstractTensor((P * shape[0], 3), ms.float32)],
        "reduce_scatter": [AbstractTensor((blk, 3), ms.float32)],
        "all_to_all": [AbstractTensor((shape[0] // P, 3 * P), ms.float32)], "broadcast": [aval]}
attrs = {"all_reduce": {"op": "sum", "group": world}, "all_gather": {"group": world},
         "reduce_scatter": {"op": "sum", "group": world},
         "all_to_all": {"split_count": P, "split_dim": 0, "concat_dim": 1, "group": world},
         "broadcast": {"root_rank": 0, "group": world}}
nbytes = X[R].size * 4
formula = {"all_reduce": 2 * (P - 1) * nbytes, "all_gather": P * (P - 1) * nbytes,
           "reduce_scatter": (P - 1) * nbytes, "all_to_all": (P - 1) * nbytes, "broadcast": (P - 1) * nbytes}
for name, c in counted.items():
    assert c["calls"] == 1, (name, c)
    total = MPI.COMM_WORLD.allreduce(c["ring"])
    fact = get_primitive(name).cost([aval], outs[name], attrs[name])
    assert total == fact["comm_bytes_total"] == formula[name], (name, total, fact, formula[name])
    assert fact["comm_bytes"] == formula[name] / P
    CHECKS[0] += 1
assert set(counted) == set(formula), counted

sys.stdout.write(f"OK {R} {CHECKS[0]}\n")      # one write: ranks' lines may interleave, not split
sys.stdout.flush()
