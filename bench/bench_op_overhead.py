"""Per-op eager overhead: an 8x8 float32 add, in a chain of N adds, inside a gradient computation.

At 8x8 the arithmetic itself costs well under a microsecond, so what this measures is the framework's
bookkeeping per op: inference, the kernel call, wrapping the result in a Tensor, and (inside a
gradient) recording the tape and later running the backward rule. Rows:

  numpy                        plain `a + b` on ndarrays (the floor: one ufunc call)
  minispore fwd (no grad)      `y = y + b` on Tensors, no gradient requested (no tape)
  minispore fwd (in grad)      the same loop inside `ms.grad(fn)`: the tape is recorded
  minispore fwd+bwd (grad)     the whole `ms.grad(fn)(x)` call divided by N (forward + backward)
  torch fwd (requires_grad)    PyTorch eager, x.requires_grad=True (autograd graph built)
  torch fwd+bwd                forward loop + `y.sum().backward()`, divided by N

Each number is the median over --repeats runs of N ops, in microseconds per op; the ratio columns
compare with the matching PyTorch row. Run: `python bench/bench_op_overhead.py`.

A second table compares the two ways MindSpore code calls an op - functional (`ops.add(x, y)`)
and class-style (`ops.Add()(x, y)`, the primitive built once, outside the loop) - on the same
small inputs: both reach the same registry primitive, so the difference is the class's own
`__call__` (target: <= 0.3 µs per op). `--class-only` prints just that table.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import minispore as ms


def median_us(fns, n, repeats):
    """{name: fn(n) -> seconds for n ops}: median µs per op for each, measured round-robin (each
    repeat runs every fn once) so that load drift on a shared machine hits all rows alike."""
    for fn in fns.values():
        fn(n)                               # warm-up (first-call imports, caches)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(fn(n))
    return {name: statistics.median(ts) / n * 1e6 for name, ts in times.items()}


def numpy_add(n):
    a = np.ones((8, 8), np.float32)
    b = np.full((8, 8), 0.5, np.float32)
    t0 = time.perf_counter()
    y = a
    for _ in range(n):
        y = y + b
    return time.perf_counter() - t0


def ms_forward(n):
    x = ms.Tensor(np.ones((8, 8), np.float32))
    b = ms.Tensor(np.full((8, 8), 0.5, np.float32))
    t0 = time.perf_counter()
    y = x
    for _ in range(n):
        y = y + b
    return time.perf_counter() - t0


def _ms_chain(n, timing):
    b = ms.Tensor(np.full((8, 8), 0.5, np.float32))

    def f(x):
        t0 = time.perf_counter()
        y = x
        for _ in range(n):
            y = y + b
        timing.append(time.perf_counter() - t0)
        return y.sum()
    return f


def ms_forward_in_grad(n):
    timing = []
    ms.grad(_ms_chain(n, timing))(ms.Tensor(np.ones((8, 8), np.float32)))
    return timing[0]


def ms_forward_backward(n):
    g = ms.grad(_ms_chain(n, []))
    x = ms.Tensor(np.ones((8, 8), np.float32))
    t0 = time.perf_counter()
    g(x)
    return time.perf_counter() - t0


def torch_rows():
    try:
        import torch
    except ImportError:
        return None

    def fwd(n, backward=False):
        x = torch.ones(8, 8, requires_grad=True)
        b = torch.full((8, 8), 0.5)
        t0 = time.perf_counter()
        y = x
        for _ in range(n):
            y = y + b
        if backward:
            y.sum().backward()
        return time.perf_counter() - t0

    return torch, fwd, (lambda n: fwd(n, backward=True))


def _loop(call, args):
    """fn(n) -> seconds for n calls of `call(*args)` (the loop is the same for every row)."""
    def run(n):
        t0 = time.perf_counter()
        for _ in range(n):
            call(*args)
        return time.perf_counter() - t0
    return run


def class_vs_functional_rows():
    """(label, functional call, class-style call, args): the same op both ways. Where the op takes
    a per-call argument besides the tensors, both columns wrap the call in the same kind of lambda."""
    from minispore import ops
    x = ms.Tensor(np.ones((8, 8), np.float32))
    y = ms.Tensor(np.full((8, 8), 0.5, np.float32))
    reduce_sum, concat, softmax = ops.ReduceSum(), ops.Concat(0), ops.Softmax()
    return [
        ("add", ops.add, ops.Add(), (x, y)),
        ("mul", ops.mul, ops.Mul(), (x, y)),
        ("exp", ops.exp, ops.Exp(), (x,)),
        ("relu", ops.relu, ops.ReLU(), (x,)),
        ("matmul", ops.matmul, ops.MatMul(), (x, y)),
        ("softmax", ops.softmax, softmax, (x,)),
        ("transpose(x, (1, 0))", ops.transpose, ops.Transpose(), (x, (1, 0))),
        ("reshape(x, (64,))", ops.reshape, ops.Reshape(), (x, (64,))),
        ("reduce_sum(x, 1)", lambda a: ops.reduce_sum(a, 1), lambda a: reduce_sum(a, 1), (x,)),
        ("concat((x, y), 0)", lambda a, b: ops.concat((a, b), 0), lambda a, b: concat((a, b)), (x, y)),
    ]


def class_section(n, r):
    """Functional vs class-style, measured in back-to-back pairs: each repeat times n functional
    calls and then n class-style calls of the same op, and the difference column is the median of
    the per-pair differences (a shared machine's load drifts slowly, so a pair sees the same load;
    separate medians of the two columns are noisier than their difference)."""
    rows = class_vs_functional_rows()
    n_pair, r_pair = max(n // 10, 50), max(r * 10, 100)          # many short pairs
    out = []
    print(f"\nfunctional vs class-style, 8x8 float32, {r_pair} back-to-back pairs of {n_pair} calls, medians")
    print(f"| {'op':<22} | {'functional µs':>13} | {'class µs':>9} | {'class - functional':>18} |")
    print(f"|{'-' * 24}|{'-' * 15}|{'-' * 11}|{'-' * 20}|")
    for label, fn, prim, args in rows:
        f_run, c_run = _loop(fn, args), _loop(prim, args)
        f_run(n_pair)
        c_run(n_pair)
        fs, cs, ds = [], [], []
        for i in range(r_pair):
            if i % 2:                                  # alternate which goes first
                c, f = c_run(n_pair), f_run(n_pair)
            else:
                f, c = f_run(n_pair), c_run(n_pair)
            fs.append(f / n_pair * 1e6)
            cs.append(c / n_pair * 1e6)
            ds.append((c - f) / n_pair * 1e6)
        f, c, d = statistics.median(fs), statistics.median(cs), statistics.median(ds)
        out.append((label, f, c, d))
        print(f"| {label:<22} | {f:13.2f} | {c:9.2f} | {d:+18.2f} |")
    print("target (issue 11): class - functional <= 0.3 µs per op")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=2000, help="adds per timed run (N)")
    p.add_argument("--repeats", type=int, default=15, help="timed runs; the median is reported")
    p.add_argument("--class-only", action="store_true", help="only the functional vs class-style table")
    args = p.parse_args(argv)
    n, r = args.ops, args.repeats
    if args.class_only:
        return class_section(n, r)

    fns = {"numpy a+b": numpy_add,
           "minispore fwd (no grad)": ms_forward,
           "minispore fwd (in grad)": ms_forward_in_grad,
           "minispore fwd+bwd (grad)": ms_forward_backward}
    kinds = {"minispore fwd (in grad)": "fwd", "minispore fwd+bwd (grad)": "fwdbwd"}
    t = torch_rows()
    if t is not None:
        torch, tfwd, tfwdbwd = t
        torch.set_num_threads(1)          # 8x8 ops never use threads; fixed for repeatability
        fns[f"torch {torch.__version__} fwd (requires_grad)"] = tfwd
        fns[f"torch {torch.__version__} fwd+bwd"] = tfwdbwd
        kinds[f"torch {torch.__version__} fwd (requires_grad)"] = "fwd"
        kinds[f"torch {torch.__version__} fwd+bwd"] = "fwdbwd"
    us = median_us(fns, n, r)
    ref = {kinds[name]: v for name, v in us.items() if name.startswith("torch")}
    rows = [(name, v, kinds.get(name)) for name, v in us.items()]

    print(f"8x8 float32 add, chain of {n} ops, median of {r} runs (numpy {np.__version__})")
    print(f"| {'row':<36} | {'µs/op':>7} | {'vs torch':>8} |")
    print(f"|{'-' * 38}|{'-' * 9}|{'-' * 10}|")
    for name, us, kind in rows:
        ratio = f"{us / ref[kind]:.2f}x" if kind in ref else "-"
        print(f"| {name:<36} | {us:7.2f} | {ratio:>8} |")
    print("target (issue 2): minispore fwd (in grad) <= 3 µs/op")
    class_section(n, r)
    return rows


if __name__ == "__main__":
    main()
