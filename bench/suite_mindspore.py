"""Real MindSpore's rows of the benchmark suite: run by bench/suite.py --mindspore in its own venv.

    /work/msvenv/bin/python bench/suite_mindspore.py --spec spec.json --inputs inputs.npz --json out.json

MindSpore 2.10 (CPU) needs `numpy<2`, so it cannot share minispore's venv: bench/suite.py writes
the models' sizes (`--spec`, JSON) and minispore's initial weights and the batches (`--inputs`,
.npz: `<model>/w/<parameter name>`, `<model>/x/<i>`, `<model>/y/<i>`) and runs this script with
SUITE_FRAMEWORK=mindspore, which makes bench/suite_models.py — the same model text minispore
runs — import `mindspore`. Rows, timed round-robin with each other (not with the parent's rows):

* PyNative  `value_and_grad(model, None, opt.parameters)` then `opt(grads)`, eagerly;
* graph     the same step function under `ms.jit` (MindSpore's usual training step: forward,
            backward and the optimizer compiled together).

Writes {"version", "threads", <model>: {"rows": {row: median ms}, "first_loss": {row: loss}}}.
The LLaMA preset is minispore.llm's model and has no MindSpore version here.
With `--framework minispore` (SUITE_FRAMEWORK unset) the same script runs on minispore, which is
how its plumbing is checked where MindSpore is not installed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import suite_models as M                # noqa: E402  (imports mindspore when SUITE_FRAMEWORK=mindspore)

ms, nn = M.ms, M.nn


def build(name, s):
    """(model, optimizer) with the hyper-parameters bench/suite.py uses."""
    if name == "gpt":
        model = M.GPT(s["vocab"], s["block"], s["n_layer"], s["n_head"], s["n_embd"])
        opt = nn.AdamWeightDecay(model.trainable_params(), learning_rate=1e-3, beta1=0.9, beta2=0.99, eps=1e-8,
                                 weight_decay=0.1)
    elif name == "resnet":
        model = M.ResNet(tuple(s["widths"]), s["blocks"])
        opt = nn.Momentum(model.trainable_params(), learning_rate=0.05, momentum=0.9)
    elif name == "mlp":
        model = M.MLP(tuple(s["sizes"]))
        opt = nn.Adam(model.trainable_params(), learning_rate=1e-3)
    else:
        raise SystemExit(f"suite_mindspore.py: no MindSpore version of model {name!r}")
    return model, opt


def load_weights(model, data, name):
    """Set every parameter from the parent's minispore weights, by name (fails on any mismatch)."""
    prefix = f"{name}/w/"
    given = {k[len(prefix):] for k in data.files if k.startswith(prefix)}
    params = list(model.get_parameters())
    have = {p.name for p in params}
    if have != given:
        raise SystemExit(f"{name}: parameter names differ from minispore's: only here {sorted(have - given)[:5]}, "
                         f"only in minispore {sorted(given - have)[:5]}")
    for p in params:
        p.set_data(ms.Tensor(np.asarray(data[prefix + p.name], np.float32)))


def make_steps(model, opt):
    grad_fn = ms.value_and_grad(model, None, opt.parameters)

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss
    return {"PyNative": train_step, "graph (ms.jit)": ms.jit(train_step)}


def set_threads(n):
    """Best effort: the parent set OMP_NUM_THREADS/OPENBLAS_NUM_THREADS; MindSpore's own runtime
    thread pool is sized by `runtime_num_threads` (names vary across versions)."""
    for kwargs in ({"runtime_num_threads": n}, {"inter_op_parallel_num": n}):
        try:
            ms.set_context(**kwargs)
        except Exception:       # noqa: BLE001  (an unknown context key in this version: skip it)
            pass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", required=True, help="JSON {model: size keyword arguments}")
    p.add_argument("--inputs", required=True, help=".npz with weights and batches")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    with open(args.spec) as f:
        spec = json.load(f)
    data = np.load(args.inputs)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    set_threads(args.threads)
    version = getattr(ms, "__version__", "?")
    out = {"version": version, "framework": ms.__name__, "threads": args.threads}
    for name, size in spec.items():
        try:
            ms.set_seed(0)
            batches = [(ms.Tensor(data[f"{name}/x/{i}"]), ms.Tensor(data[f"{name}/y/{i}"]))
                       for i in range(sum(1 for k in data.files if k.startswith(f"{name}/x/")))]
            # each row needs its own model (steps update weights): one build per row
            steps, first = {}, {}
            for row in ("PyNative", "graph (ms.jit)"):
                fn = make_steps(*_loaded(name, size, data))[row]
                t0 = time.perf_counter()
                first[row] = float(fn(*batches[0]).asnumpy())
                steps[row] = (fn, time.perf_counter() - t0)
            times = {row: [] for row in steps}
            for i in range(args.warmup + args.iters):
                x, y = batches[i % len(batches)]
                for row, (fn, _) in steps.items():
                    t0 = time.perf_counter()
                    fn(x, y).asnumpy()
                    if i >= args.warmup:
                        times[row].append(time.perf_counter() - t0)
            out[name] = {"rows": {row: statistics.median(t) * 1e3 for row, t in times.items()},
                         "first_loss": first, "first_s": {row: s for row, (_, s) in steps.items()}}
        except SystemExit:
            raise
        except Exception as e:      # noqa: BLE001  (reported in the parent's table)
            out[name] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"}
        print(f"{name}: {out[name]}", flush=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


def _loaded(name, size, data):
    model, opt = build(name, size)
    model.set_train(True)
    load_weights(model, data, name)
    return model, opt


if __name__ == "__main__":
    main()
