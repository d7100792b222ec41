"""The benchmark suite (issue 14): training steps of four models, minispore beside PyTorch.

One command, one table, JSON out:

    .venv/bin/python bench/suite.py                       # all four models, one thread
    .venv/bin/python bench/suite.py --threads 2           # the second table
    .venv/bin/python bench/suite.py --models gpt,mlp --iters 30 --json out.json
    .venv/bin/python bench/suite.py --mindspore           # + real MindSpore 2.10 (venv /work/msvenv)
    .venv/bin/python bench/suite.py --quick               # tiny models, 3 steps: does it all run?

Default JSON: out/bench_suite.json (--json PATH). Options: --models, --iters, --warmup, --threads,
--no-torch, --no-compile, --mindspore, --quick.

The models (bench/suite_models.py, written once against the MindSpore API; PyTorch mirrors in
bench/suite_torch_models.py and bench/torch_models.py):

* gpt     nanoGPT's GPT, shakespeare_char config: 4 layers, 4 heads, n_embd 128, block 64,
          batch 12, LayerNorm, erf GELU, Dense with bias, additive causal mask; AdamW
          (lr 1e-3, betas 0.9/0.99, eps 1e-8, weight decay 0.1). Data: windows of the bundled
          Tiny Shakespeare corpus (the one `minispore train` uses), character ids.
* llama   minispore's LLaMA preset `shakespeare-char` (RMSNorm, RoPE, SwiGLU, tied head; the
          model bench/bench_train_step.py times), same optimizer and data.
* resnet  BasicBlock ResNet, four stages of two blocks (ResNet-18's layout) at widths
          16/32/64/128, BatchNorm (training mode), 32x32x3 inputs, batch 32, 10 classes;
          SGD with momentum 0.9 (nn.Momentum / torch.optim.SGD), lr 0.05. Random images.
* mlp     784-1024-1024-10, ReLU, batch 256; Adam lr 1e-3. Random inputs.

Rows per model: minispore PyNative, jit O0 / O1 / O2 (`ms.jit(value_and_grad(...),
capture_mode="trace", jit_level=...)`: forward + backward in one graph, the optimizer eager),
PyTorch eager, torch.compile (Inductor; `torch.compile(model)`: forward + backward compiled, the
optimizer eager — the same split as the jit rows). Every row of a model starts from the same
weights (minispore's initial weights are copied into torch by name), and the suite stops with an
error unless every row's first loss agrees with PyNative's (relative 1e-4 for PyTorch, 1e-5 for
the jit levels).

Timing: after each row's first (checked, compiling) step and --warmup round-robin steps, --iters
repetitions; each repetition runs one step of every row of every model in turn, so machine noise
hits all rows alike. Reported: median ms/iter, the ratio to PyTorch eager and to torch.compile,
and the step's achieved matmul GFLOP/s — the matmul/conv FLOPs of one step, counted analytically
(forward 2*M*N*K per product; backward twice that, minus the input gradient of a layer fed by
data; attention's products included; no recomputation counted) divided by the step time —
against this machine's sgemm peak, measured here (a 2048^2 float32 np.matmul with the same thread
count, best of 7). tests/bench/test_suite_smoke.py checks the analytic counts against the products
a PyNative step really runs. Load average at start and end.

Threads: --threads 1 (default) limits NumPy's BLAS with threadpoolctl and calls
torch.set_num_threads(1); --threads 2 sets both to 2.

Real MindSpore (--mindspore, if /work/msvenv/bin/python exists: `python3.11 -m venv /work/msvenv
&& /work/msvenv/bin/pip install mindspore==2.10.0 "numpy<2"`) runs bench/suite_mindspore.py in a
subprocess after the round-robin: the same model text (bench/suite_models.py importing mindspore),
minispore's initial weights and the same batches (passed in an .npz), a PyNative row and an ms.jit
graph row (forward, backward and optimizer compiled together, MindSpore's usual step). Its first
losses must equal minispore's too. Being another process, those two rows are round-robin with each
other only. The LLaMA preset has no MindSpore version (it is minispore.llm's model).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import minispore as ms                          # noqa: E402
from minispore import nn                        # noqa: E402
from minispore.graph.dryrun.devices import cpu_model  # noqa: E402
import suite_models as M                        # noqa: E402

try:
    import threadpoolctl
except ImportError:          # optional: without it NumPy's BLAS threads follow OPENBLAS_NUM_THREADS
    threadpoolctl = None

SEED = 0
LEVELS = ("O0", "O1", "O2")
MINISPORE_ROWS = ("minispore PyNative",) + tuple(f"minispore jit {lv}" for lv in LEVELS)
TORCH_ROWS = ("PyTorch eager", "torch.compile")
TORCH_TOL = 1e-4          # first loss, PyTorch vs minispore PyNative (float32, different kernels)
JIT_TOL = 1e-5            # first loss, jit levels vs PyNative
MSVENV_PYTHON = "/work/msvenv/bin/python"


class SuiteError(RuntimeError):
    """A check the suite's numbers depend on failed (losses disagree, weights do not map)."""


# ---------------------------------------------------------------------------------------------
# the four models: how to build each in both frameworks, its data and its matmul FLOPs
@dataclasses.dataclass
class ModelSpec:
    name: str
    title: str
    sizes: dict                  # "full" / "tiny" -> keyword arguments
    build_minispore: object      # (size) -> (cell, loss_fn, optimizer), after ms.set_seed
    build_torch: object          # (size) -> torch.nn.Module whose forward(x, y) is the loss
    torch_optimizer: object      # (parameters) -> torch optimizer, the same hyper-parameters
    make_batches: object         # (size, n, rng) -> [(x ndarray, y ndarray)]
    matmul_flops: object         # (size) -> matmul/conv FLOPs of one training step (analytic)


def _adamw_ms(params):
    return nn.AdamWeightDecay(params, learning_rate=1e-3, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1)


def _adamw_torch(params):
    import torch
    return torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)


_TEXT_IDS = None


def shakespeare_ids():
    """Character ids of the bundled Tiny Shakespeare corpus (minispore.llm's prepare_data: the
    tokenizer over the whole text, the first 90% as training ids) — vocabulary 65."""
    global _TEXT_IDS
    if _TEXT_IDS is None:
        from minispore.llm.trainer import prepare_data
        tok, train_ids, _ = prepare_data()
        _TEXT_IDS = (tok.vocab_size, np.asarray(train_ids))
    return _TEXT_IDS


def text_batches(batch, block, n, rng):
    """nanoGPT's get_batch: `batch` random windows of `block + 1` characters -> (x, y)."""
    _, ids = shakespeare_ids()
    out = []
    for _ in range(n):
        starts = rng.integers(0, len(ids) - block - 1, batch)
        x = np.stack([ids[s:s + block] for s in starts]).astype(np.int64)
        y = np.stack([ids[s + 1:s + 1 + block] for s in starts]).astype(np.int64)
        out.append((x, y))
    return out


# (a) nanoGPT's GPT ----------------------------------------------------------------------------
def _gpt_ms(s):
    model = M.GPT(s["vocab"], s["block"], s["n_layer"], s["n_head"], s["n_embd"])
    return model, model, _adamw_ms(model.trainable_params())


def _gpt_torch(s):
    import suite_torch_models as T
    return T.GPT(s["vocab"], s["block"], s["n_layer"], s["n_head"], s["n_embd"])


def _gpt_flops(s):
    b, t, c, v, L = s["batch"], s["block"], s["n_embd"], s["vocab"], s["n_layer"]
    n = b * t
    fwd = L * (2 * n * c * (3 * c + c + 4 * c + 4 * c) + 2 * 2 * b * t * t * c) + 2 * n * c * v
    return 3 * fwd           # every product's both operands need gradients (embeddings are gathers)


# (b) the LLaMA preset ----------------------------------------------------------------------------
def _llama_cfg(s):
    from minispore.llm.config import get_preset
    cfg = get_preset("shakespeare-char").model
    return dataclasses.replace(cfg, **s["overrides"]) if s["overrides"] else cfg


def _llama_ms(s):
    from minispore.llm.model import Llama
    model = Llama(_llama_cfg(s))
    return model, model.loss, _adamw_ms(model.trainable_params())


def _llama_torch(s):
    from torch_models import TorchLlama
    cfg = _llama_cfg(s)

    class LlamaLoss(TorchLlama):       # forward(x, y) = the loss, so torch.compile(model) compiles it
        def forward(self, x, y):
            return self.loss(x, y)
    return LlamaLoss(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads, cfg.hidden_dim, cfg.max_seq_len,
                     cfg.norm_eps, cfg.rope_theta)


def _llama_flops(s):
    cfg = _llama_cfg(s)
    b, t, c, v, f = s["batch"], cfg.max_seq_len, cfg.dim, cfg.vocab_size, cfg.hidden_dim
    kv = (cfg.n_kv_heads or cfg.n_heads) * (c // cfg.n_heads)      # k and v projection width
    n = b * t
    fwd = cfg.n_layers * (2 * n * c * (2 * c + 2 * kv) + 2 * n * c * 3 * f + 2 * 2 * b * t * t * c) + 2 * n * c * v
    return 3 * fwd


# (c) ResNet ----------------------------------------------------------------------------
def _resnet_ms(s):
    model = M.ResNet(s["widths"], s["blocks"])
    return model, model, nn.Momentum(model.trainable_params(), learning_rate=0.05, momentum=0.9)


def _resnet_torch(s):
    import suite_torch_models as T
    return T.ResNet(s["widths"], s["blocks"])


def _resnet_opt(params):
    import torch
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def _image_batches(s, n, rng):
    shape = (s["batch"], 3, s["image"], s["image"])
    return [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, s["batch"]).astype(np.int64))
            for _ in range(n)]


def _resnet_flops(s):
    b, hw = s["batch"], s["image"]

    def conv(cin, cout, k, out_hw):
        return 2 * b * cout * out_hw * out_hw * cin * k * k

    stem = conv(3, s["widths"][0], 3, hw)
    fwd, cin = stem, s["widths"][0]
    for i, w in enumerate(s["widths"]):
        for j in range(s["blocks"]):
            stride = 2 if (i > 0 and j == 0) else 1
            hw //= stride
            fwd += conv(cin, w, 3, hw) + conv(w, w, 3, hw)
            if stride != 1 or cin != w:
                fwd += conv(cin, w, 1, hw)
            cin = w
    fwd += 2 * b * cin * 10
    return 3 * fwd - stem    # the stem's input is data: no input gradient


# (d) MLP ----------------------------------------------------------------------------
def _mlp_ms(s):
    model = M.MLP(s["sizes"])
    return model, model, nn.Adam(model.trainable_params(), learning_rate=1e-3)


def _mlp_torch(s):
    import suite_torch_models as T
    return T.MLP(s["sizes"])


def _mlp_opt(params):
    import torch
    return torch.optim.Adam(params, lr=1e-3)


def _mlp_batches(s, n, rng):
    return [(rng.standard_normal((s["batch"], s["sizes"][0])).astype(np.float32),
             rng.integers(0, s["sizes"][-1], s["batch"]).astype(np.int64)) for _ in range(n)]


def _mlp_flops(s):
    d, b = s["sizes"], s["batch"]
    fwd = sum(2 * b * d[i] * d[i + 1] for i in range(len(d) - 1))
    return 3 * fwd - 2 * b * d[0] * d[1]     # the first layer's input is data


MODELS = {
    "gpt": ModelSpec(
        "gpt", "nanoGPT GPT (shakespeare_char)",
        {"full": dict(vocab=65, block=64, n_layer=4, n_head=4, n_embd=128, batch=12),
         "tiny": dict(vocab=65, block=16, n_layer=1, n_head=2, n_embd=32, batch=2)},
        _gpt_ms, _gpt_torch, _adamw_torch,
        lambda s, n, rng: text_batches(s["batch"], s["block"], n, rng), _gpt_flops),
    "llama": ModelSpec(
        "llama", "LLaMA preset shakespeare-char",
        {"full": dict(overrides={}, batch=12),
         "tiny": dict(overrides=dict(dim=32, n_layers=1, n_heads=2, n_kv_heads=2, max_seq_len=16), batch=2)},
        _llama_ms, _llama_torch, _adamw_torch,
        lambda s, n, rng: text_batches(s["batch"], _llama_cfg(s).max_seq_len, n, rng), _llama_flops),
    "resnet": ModelSpec(
        "resnet", "ResNet (BasicBlock 2-2-2-2, 16-128 wide)",
        {"full": dict(widths=(16, 32, 64, 128), blocks=2, batch=32, image=32),
         "tiny": dict(widths=(4, 8, 8, 8), blocks=1, batch=4, image=16)},
        _resnet_ms, _resnet_torch, _resnet_opt, _image_batches, _resnet_flops),
    "mlp": ModelSpec(
        "mlp", "MLP 784-1024-1024-10",
        {"full": dict(sizes=(784, 1024, 1024, 10), batch=256),
         "tiny": dict(sizes=(20, 32, 32, 10), batch=8)},
        _mlp_ms, _mlp_torch, _mlp_opt, _mlp_batches, _mlp_flops),
}


# ---------------------------------------------------------------------------------------------
# steps: a function (x, y) -> float loss that runs one forward + backward + optimizer update
def minispore_params(cell) -> dict:
    """{name: ndarray copy} of every parameter (BatchNorm's running statistics included)."""
    return {p.name: np.array(p.asnumpy()) for p in cell.get_parameters()}


def build_minispore(spec, size, level=None):
    """A fresh minispore model (seeded: every row starts from the same weights) and its step;
    level None = PyNative, else jit at that level (value_and_grad jitted, optimizer eager)."""
    ms.set_seed(SEED)
    cell, loss_fn, opt = spec.build_minispore(size)
    cell.set_train(True)
    grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)
    if level is not None:
        grad_fn = ms.jit(grad_fn, capture_mode="trace", jit_level=level)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return float(loss.asnumpy())
    return cell, step


def build_torch(spec, size, ms_weights, compiled=False):
    """The PyTorch mirror with minispore's initial weights; `compiled`: torch.compile(model)
    (compiles lazily, at the first step)."""
    import torch
    from suite_torch_models import load_minispore_weights
    torch.manual_seed(SEED)
    model = spec.build_torch(size)
    load_minispore_weights(model, ms_weights)
    model.train()
    opt = spec.torch_optimizer(model.parameters())
    fwd = torch.compile(model) if compiled else model

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = fwd(x, y)
        loss.backward()
        opt.step()
        return loss.item()
    return model, step


@dataclasses.dataclass
class Row:
    model: str
    name: str
    step: object = None
    inputs: list = None          # per batch: the (x, y) this framework takes
    first_loss: float = None
    first_s: float = None        # the first step (compiles for jit / torch.compile rows)
    times: list = dataclasses.field(default_factory=list)
    error: str = None

    @property
    def median_ms(self):
        return statistics.median(self.times) * 1e3 if self.times else None


def _short_error(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    msg = lines[0] if lines else ""
    for ln in lines:                     # Inductor wraps the real cause: prefer a line naming it
        if "Error" in ln or "error:" in ln:
            msg = ln
            break
    return f"{type(e).__name__}: {msg.strip()[:200]}"


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def build_rows(spec, size, batches, with_torch, with_compile, levels=LEVELS):
    """Every row of one model, each after its first (checked) step on batch 0."""
    rows = []
    ms_inputs = [(ms.Tensor(x), ms.Tensor(y)) for x, y in batches]
    ref_weights = None
    for level in (None,) + tuple(levels):
        name = "minispore PyNative" if level is None else f"minispore jit {level}"
        row = Row(spec.name, name, inputs=ms_inputs)
        try:
            cell, row.step = build_minispore(spec, size, level)
            if ref_weights is None:
                ref_weights = minispore_params(cell)
            else:
                same = minispore_params(cell)
                bad = [k for k in ref_weights if not np.array_equal(ref_weights[k], same.get(k))]
                if bad or set(same) != set(ref_weights):
                    raise SuiteError(f"{spec.name} {name}: initial weights differ from PyNative's ({bad[:3]})")
            t0 = time.perf_counter()
            row.first_loss = row.step(*ms_inputs[0])
            row.first_s = time.perf_counter() - t0
        except SuiteError:
            raise
        except Exception as e:                    # a failing jit level is reported, not fatal
            if level is None:
                raise
            row.error = _short_error(e)
            row.step = None
        rows.append(row)
    if with_torch:
        import torch
        t_inputs = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
        for compiled in ((False, True) if with_compile else (False,)):
            row = Row(spec.name, TORCH_ROWS[compiled], inputs=t_inputs)
            try:
                _, row.step = build_torch(spec, size, ref_weights, compiled)
                t0 = time.perf_counter()
                row.first_loss = row.step(*t_inputs[0])
                row.first_s = time.perf_counter() - t0
            except Exception as e:
                if not compiled:
                    raise
                row.error = _short_error(e)
                row.step = None
            rows.append(row)
    return rows, ref_weights


def check_first_losses(rows):
    """Every row's first loss equals PyNative's: jit levels to JIT_TOL, PyTorch to TORCH_TOL."""
    ref = next(r for r in rows if r.name == "minispore PyNative").first_loss
    bad = []
    for r in rows:
        if r.first_loss is None:
            continue
        tol = JIT_TOL if r.name.startswith("minispore") else TORCH_TOL
        if not np.isfinite(r.first_loss) or rel(r.first_loss, ref) > tol:
            bad.append(f"{r.name} {r.first_loss!r} (relative {rel(r.first_loss, ref):.1e} > {tol:g})")
    if bad:
        raise SuiteError(f"{rows[0].model}: first losses disagree with minispore PyNative's {ref!r}: "
                         + "; ".join(bad))
    return ref


def round_robin(rows, iters, warmup):
    """`warmup + iters` repetitions; each runs one step of every live row in turn (batches cycle)."""
    for i in range(warmup + iters):
        for r in rows:
            if r.step is None:
                continue
            x, y = r.inputs[i % len(r.inputs)]
            t0 = time.perf_counter()
            try:
                r.step(x, y)
            except Exception as e:
                r.error, r.step = f"failed at step {i + 2}: {_short_error(e)}", None
                continue
            if i >= warmup:
                r.times.append(time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# machine
def set_threads(n):
    """n threads for NumPy's BLAS (threadpoolctl) and PyTorch; returns the BLAS limiter to keep."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    if threadpoolctl is None:
        return None
    return threadpoolctl.threadpool_limits(limits=n, user_api="blas")


def sgemm_peak(n=2048, repeats=5):
    """This machine's float32 matmul rate at the current BLAS thread count: best of `repeats`
    n x n @ n x n products (2 n^3 FLOPs each), in GFLOP/s."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    np.matmul(a, b, out=c)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def blas_description():
    if threadpoolctl is None:
        return ("NumPy BLAS: threadpoolctl not installed, threads from OPENBLAS_NUM_THREADS="
                f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    parts = [f"{i.get('internal_api')} {i.get('version')} kernel={i.get('architecture')} threads={i.get('num_threads')}"
             for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
    return "NumPy BLAS: " + "; ".join(parts)




# ---------------------------------------------------------------------------------------------
# real MindSpore (optional): a subprocess in its own venv
def run_mindspore(models, size_name, weights, batches, iters, warmup, threads, python=MSVENV_PYTHON,
                  framework="mindspore"):
    """Real MindSpore's rows from bench/suite_mindspore.py, run by `python` (its own venv), from the
    same weights and batches: {"version", <model>: {"rows": {row: ms}, "first_loss": {row: loss}}}
    or {"error": why}. `framework="minispore"` runs that script on minispore (a plumbing check)."""
    with tempfile.TemporaryDirectory() as tmp:
        npz = {}
        for m in models:
            for k, v in weights[m].items():
                npz[f"{m}/w/{k}"] = v
            for i, (x, y) in enumerate(batches[m]):
                npz[f"{m}/x/{i}"], npz[f"{m}/y/{i}"] = x, y
        data, spec, out = (os.path.join(tmp, f) for f in ("inputs.npz", "spec.json", "out.json"))
        np.savez(data, **npz)
        with open(spec, "w") as f:
            json.dump({m: MODELS[m].sizes[size_name] for m in models}, f)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
        env.pop("SUITE_FRAMEWORK", None)
        if framework == "mindspore":
            env["SUITE_FRAMEWORK"] = "mindspore"
        cmd = [python, os.path.join(HERE, "suite_mindspore.py"), "--spec", spec, "--inputs", data,
               "--iters", str(iters), "--warmup", str(warmup), "--threads", str(threads), "--json", out]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.exists(out):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return {"error": f"suite_mindspore.py exited {proc.returncode}: " + " | ".join(tail)}
        with open(out) as f:
            return json.load(f)


def merge_mindspore(results, got):
    """Add MindSpore's rows to each model's rows; its first losses must equal minispore's."""
    for m in results:
        r = got.get(m["name"])
        if r is None:
            continue
        if "error" in r:
            m["rows"]["MindSpore"] = {"ms": None, "error": r["error"]}
            continue
        for row, t in r["rows"].items():
            fl = r["first_loss"][row]
            if not np.isfinite(fl) or rel(fl, m["first_loss"]) > TORCH_TOL:
                raise SuiteError(f"{m['name']}: {got['framework']} {row} first loss {fl!r} != minispore's "
                                 f"{m['first_loss']!r}")
            label = "MindSpore" if got["framework"] == "mindspore" else got["framework"]
            m["rows"][f"{label} {got['version']} {row}"] = {
                "ms": t, "first_loss": fl, "first_s": r["first_s"][row], "error": None}


# ---------------------------------------------------------------------------------------------
def fmt(v, spec=".1f", suffix=""):
    return "–" if v is None else f"{v:{spec}}{suffix}"


def table(results, peak):
    lines = [f"| model | row | ms/iter | vs PyTorch eager | vs torch.compile | matmul GFLOP/s | % of sgemm peak ({peak:.0f}) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for m in results:
        flops = m["matmul_flops"]
        eager = m["rows"].get("PyTorch eager", {}).get("ms")
        comp = m["rows"].get("torch.compile", {}).get("ms")
        for name, r in m["rows"].items():
            t = r.get("ms")
            if t is None:
                lines.append(f"| {m['title']} | {name} | {r.get('error') or 'not run'} | | | | |")
                continue
            gf = flops / (t * 1e-3) / 1e9
            bold = "**" if name.startswith("minispore") else ""
            lines.append(f"| {m['title']} | {name} | {bold}{t:.1f}{bold} | {fmt(eager and t / eager, '.2f', 'x')} | "
                         f"{fmt(comp and t / comp, '.2f', 'x')} | {gf:.1f} | {100 * gf / peak:.0f}% |")
    return "\n".join(lines)


def facts_table(results):
    lines = ["| model | parameters | batch | matmul GFLOP / step | first loss (PyNative / PyTorch) | "
             "first step s: O0 / O1 / O2 / torch.compile (compile) |", "|---|---:|---|---:|---|---|"]
    for m in results:
        fs = [m["rows"].get(k, {}).get("first_s") for k in ("minispore jit O0", "minispore jit O1", "minispore jit O2",
                                                               "torch.compile")]
        lines.append(f"| {m['title']} | {m['params']:,} | {m['batch']} | {m['matmul_flops'] / 1e9:.3f} | "
                     f"{fmt(m['first_loss'], '.6f')} / {fmt(m['rows'].get('PyTorch eager', {}).get('first_loss'), '.6f')} | "
                     + " / ".join(fmt(v, ".1f") for v in fs) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt,llama,resnet,mlp", help="comma-separated, from " + ",".join(MODELS))
    p.add_argument("--iters", type=int, default=20, help="timed repetitions (each: one step of every row)")
    p.add_argument("--warmup", type=int, default=3, help="untimed repetitions after the first step")
    p.add_argument("--threads", type=int, default=1, help="threads for NumPy's BLAS and PyTorch (default 1)")
    p.add_argument("--json", default=None, help="write the results here (default out/bench_suite.json)")
    p.add_argument("--quick", action="store_true", help="tiny models, 3 timed steps: a smoke run")
    p.add_argument("--no-torch", action="store_true", help="minispore rows only")
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile row")
    p.add_argument("--mindspore", action="store_true", help=f"+ real MindSpore rows ({MSVENV_PYTHON})")
    args = p.parse_args(argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        p.error(f"unknown models {unknown}; choose from {list(MODELS)}")
    size_name = "tiny" if args.quick else "full"
    iters, warmup = (3, 1) if args.quick else (args.iters, args.warmup)
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            print("PyTorch not installed: minispore rows only")
    load_start = os.getloadavg()
    limiter = set_threads(args.threads)      # noqa: F841  (kept alive for the whole run)

    print(f"# minispore benchmark suite — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()}, NumPy {np.__version__}"
          + (f", PyTorch {torch.__version__}" if torch else "") + f"; threads {args.threads}")
    print(blas_description())
    env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                                      "OMP_NUM_THREADS") if k in os.environ}
    print(f"env: {env or '(no OPENBLAS_*/OMP_* set)'}; load average at start {load_start[0]:.2f} "
          f"{load_start[1]:.2f} {load_start[2]:.2f}")
    peak = sgemm_peak(1024 if args.quick else 2048, 3 if args.quick else 7)
    print(f"sgemm peak ({args.threads} thread{'s' if args.threads > 1 else ''}, np.matmul float32, best of N): "
          f"{peak:.1f} GFLOP/s")

    rng = np.random.default_rng(1234)
    all_rows, info, weights, batches = [], {}, {}, {}
    for name in names:
        spec = MODELS[name]
        size = spec.sizes[size_name]
        batches[name] = spec.make_batches(size, 4, rng)
        print(f"building {name}: first steps (jit and torch.compile compile here) ...", flush=True)
        rows, weights[name] = build_rows(spec, size, batches[name], torch is not None, not args.no_compile)
        ref = check_first_losses(rows)
        print("  first loss: " + ", ".join(f"{r.name} {r.first_loss:.6f}" if r.error is None else
                                           f"{r.name} FAILED ({r.error})" for r in rows), flush=True)
        n_params = sum(v.size for k, v in weights[name].items()
                       if not k.endswith(("moving_mean", "moving_variance", ".mean", ".variance")))
        info[name] = {"title": spec.title + (" [tiny]" if args.quick else ""), "params": int(n_params), "batch": size["batch"],
                      "size": {k: list(v) if isinstance(v, tuple) else v for k, v in size.items()},
                      "matmul_flops": int(spec.matmul_flops(size)), "first_loss": ref}
        all_rows += rows
    print(f"timing: {warmup} warm-up + {iters} timed repetitions, round-robin over {len(all_rows)} rows ...",
          flush=True)
    round_robin(all_rows, iters, warmup)

    results = []
    for name in names:
        m = dict(info[name], name=name, rows={})
        for r in (r for r in all_rows if r.model == name):
            m["rows"][r.name] = {"ms": r.median_ms, "first_loss": r.first_loss, "first_s": r.first_s,
                                 "error": r.error, "times_ms": [t * 1e3 for t in r.times]}
        results.append(m)

    mindspore = None
    if args.mindspore:
        ms_models = [m for m in names if m != "llama"]
        if not os.path.exists(MSVENV_PYTHON):
            mindspore = {"error": f"{MSVENV_PYTHON} not found: no real MindSpore rows"}
        elif ms_models:
            print("real MindSpore: running bench/suite_mindspore.py (its rows are round-robin among themselves) ...",
                  flush=True)
            mindspore = run_mindspore(ms_models, size_name, weights, batches, iters, warmup, args.threads)
        if mindspore and "error" not in mindspore:
            merge_mindspore(results, mindspore)

    load_end = os.getloadavg()
    print()
    print(f"Training step (forward + backward + optimizer), median of {iters} round-robin repetitions, "
          f"{args.threads} thread{'s' if args.threads > 1 else ''}; load average {load_start[0]:.2f} at start, "
          f"{load_end[0]:.2f} at end; matmul FLOPs counted analytically")
    print()
    print(table(results, peak))
    print()
    print(facts_table(results))
    if mindspore and "error" in mindspore:
        print(f"\nreal MindSpore: {mindspore['error']}")

    out = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join([os.path.relpath(sys.executable)] + sys.argv) if argv is None else f"main({argv})",
           "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "python": platform.python_version(),
                       "numpy": np.__version__, "torch": torch.__version__ if torch else None,
                       "blas": blas_description(), "env": env},
           "threads": args.threads, "iters": iters, "warmup": warmup, "size": size_name,
           "load_average": {"start": list(load_start), "end": list(load_end)},
           "sgemm_peak_gflops": peak, "flops_method": "analytic (matmul/conv products, forward x3 minus data-input "
                                                      "gradients)",
           "models": {n: m for n, m in zip(names, results)}, "mindspore": mindspore}
    path = args.json or os.path.join(os.path.dirname(HERE), "out", "bench_suite.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\nJSON: {path}")
    return out


if __name__ == "__main__":
    try:
        main()
    except SuiteError as e:
        print(f"\nSUITE FAILED: {e}", file=sys.stderr)
        sys.exit(2)
