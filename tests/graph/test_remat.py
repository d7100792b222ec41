"""memory/remat.py: residuals that are cheap to recompute move from the forward graph F to the
backward graph B. Oracle: the gradients B returns before and after rematerialization (and NumPy
float64 for the function itself); structure checks count the residuals F still saves."""
import numpy as np

import minispore as ms
from minispore.graph import O0Executor
from minispore.graph.autodiff import build_split
from minispore.graph.memory.remat import rematerialize
from minispore.ops import functional as F


def split_of(fn, *arrays):
    jf = ms.jit(fn, capture_mode="trace")
    graph = jf.compile(*[ms.Tensor(a) for a in arrays]).graph
    return build_split(graph, tuple(True for _ in graph.params), tuple(False for _ in graph.captures))


def run_split(forward, backward, n_out, sources, arrays, dout):
    fo = O0Executor(forward).run(*arrays)
    saved = [arrays[i] if where == "in" else fo[n_out + i] for where, i in sources]
    return fo[:n_out], O0Executor(backward).run(*saved, dout)


def three_heads(x, w1, w2, w3):
    h = F.tanh(x)
    return (F.matmul(h, w1) + F.matmul(h, w2) * F.matmul(h, w3)).sum()


def test_views_of_one_unsaved_value_are_saved_as_that_value_once():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(6, 4), (4, 5), (4, 5), (4, 5)]]
    split = split_of(three_heads, *arrays)
    residuals = split.forward.outputs[split.n_out:]
    transposes = [r for r in residuals if r.kind == "node" and r.producer[0].op.name == "transpose"]
    assert len(transposes) >= 2              # autodiff saved h.T for each weight gradient
    forward, backward, sources = rematerialize(split.forward, split.backward, split.n_out)
    kept = forward.outputs[split.n_out:]
    assert len(kept) < len(residuals)
    assert not [r for r in kept if r.kind == "node" and r.producer[0].op.name == "transpose"]

    dout = np.float32(1.0)
    # the un-rematerialized split, run the plain way: F's residuals straight into B
    fo = O0Executor(split.forward).run(*arrays)
    ref_grads = O0Executor(split.backward).run(*fo[split.n_out:], dout)
    out, grads = run_split(forward, backward, split.n_out, sources, arrays, dout)
    np.testing.assert_allclose(out[0], fo[0], rtol=1e-6)
    assert len(grads) == len(ref_grads) == 4
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # and the function itself against NumPy float64
    x, w1, w2, w3 = (a.astype(np.float64) for a in arrays)
    h = np.tanh(x)
    np.testing.assert_allclose(out[0], (h @ w1 + (h @ w2) * (h @ w3)).sum(), rtol=1e-5)


def test_zeros_like_residuals_are_made_from_their_shape_in_b():
    def fn(x, r, g):
        # add_rms_norm has three outputs; rstd gets no cotangent, so autodiff saves zeros_like(rstd)
        y, _rstd, x_sum = F.add_rms_norm(x, r, g, 1e-5)
        return (y * x_sum).sum()

    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (3, 4), (4,)]]
    split = split_of(fn, *arrays)
    names = [r.producer[0].op.name for r in split.forward.outputs[split.n_out:] if r.kind == "node"]
    assert "zeros_like" in names
    forward, backward, sources = rematerialize(split.forward, split.backward, split.n_out)
    names = [r.producer[0].op.name for r in forward.outputs[split.n_out:] if r.kind == "node"]
    assert "zeros_like" not in names
    assert "zeros" in [n.op.name for n in backward.nodes if n.is_primitive]
    fo = O0Executor(split.forward).run(*arrays)
    ref = O0Executor(split.backward).run(*fo[split.n_out:], np.float32(1.0))
    _, grads = run_split(forward, backward, split.n_out, sources, arrays, np.float32(1.0))
    assert len(grads) == len(ref) == 3
    for a, b in zip(grads, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
