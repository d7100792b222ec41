"""The benchmark suite's models (bench/suite.py, issue 14) at tiny sizes: the numbers it prints rest
on these checks, so they are tested here — never its timings.

* The MindSpore-API model and its PyTorch mirror, started from the same (copied) weights, give the
  same first loss (relative 1e-4), for all four models — and the PyTorch loss is an independent
  oracle: a wrong minispore kernel or a weight that does not map shows up here.
* jit O1 and O2 (and O0) give PyNative's losses over 3 training steps (relative 1e-5): fusion and
  the whole-graph executor change how the step runs, not what it computes — including the
  optimizer updates and BatchNorm's running statistics between the steps.
* The analytic matmul-FLOP counts (the GFLOP/s column) equal the FLOPs of the matrix products a
  PyNative step really runs, counted by wrapping the kernels.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")
sys.path.insert(0, BENCH)

import suite  # noqa: E402

MODELS = list(suite.MODELS)


def tiny(name, n_batches=3):
    spec = suite.MODELS[name]
    size = spec.sizes["tiny"]
    return spec, size, spec.make_batches(size, n_batches, np.random.default_rng(7))


def minispore_losses(spec, size, batches, level):
    import minispore as ms
    cell, step = suite.build_minispore(spec, size, level)
    return cell, [step(ms.Tensor(x), ms.Tensor(y)) for x, y in batches]


@pytest.mark.torch
@pytest.mark.parametrize("name", MODELS)
def test_first_loss_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    spec, size, batches = tiny(name, 2)
    cell, ms_losses = minispore_losses(spec, size, batches, None)
    # the weights minispore started from: rebuild (same seed) rather than read the trained cell
    start, _ = suite.build_minispore(spec, size, None)
    _, t_step = suite.build_torch(spec, size, suite.minispore_params(start))
    t_losses = [t_step(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
    assert np.isfinite(ms_losses).all()
    assert suite.rel(ms_losses[0], t_losses[0]) <= suite.TORCH_TOL, (ms_losses, t_losses)
    # a sanity bound, not a parity claim: after one update both are still close
    assert suite.rel(ms_losses[1], t_losses[1]) <= 1e-2, (ms_losses, t_losses)


@pytest.mark.parametrize("name", MODELS)
def test_jit_levels_equal_pynative_over_three_steps(name):
    spec, size, batches = tiny(name, 3)
    ref_cell, ref = minispore_losses(spec, size, batches, None)
    ref_w = suite.minispore_params(ref_cell)
    for level in suite.LEVELS:
        cell, got = minispore_losses(spec, size, batches, level)
        for a, b in zip(got, ref):
            assert suite.rel(a, b) <= suite.JIT_TOL, (level, got, ref)
        # the updates agree too (and BatchNorm's running statistics, updated by host calls)
        w = suite.minispore_params(cell)
        for k, v in ref_w.items():
            np.testing.assert_allclose(w[k], v, rtol=1e-4, atol=1e-6, err_msg=f"{level} {k}")


def test_check_first_losses_fails_loudly():
    rows = [suite.Row("m", "minispore PyNative", first_loss=2.0), suite.Row("m", "PyTorch eager", first_loss=2.001)]
    with pytest.raises(suite.SuiteError, match="PyTorch eager"):
        suite.check_first_losses(rows)
    rows[1].first_loss = 2.0 * (1 + 5e-5)
    assert suite.check_first_losses(rows) == 2.0


class CountMatmulFlops:
    """Counts the FLOPs of every matrix product a minispore step really runs, by wrapping the
    matmul / bmm / conv2d kernels (and conv2d's two backward kernels): 2 * M * N * K each. An
    oracle for the suite's analytic counts, which are written from the model's description."""

    def __init__(self):
        from minispore.ops.primitive import PRIMITIVES
        self.prims = PRIMITIVES
        self.flops, self._saved = 0, []

    def _wrap(self, name, count):
        p = self.prims[name]
        kernel = p.kernel

        def counted(*args, **kwargs):
            out = kernel(*args, **kwargs)
            self.flops += count(args, out)
            return out
        self._saved.append((p, kernel))
        p.kernel = counted

    def __enter__(self):
        matmul = lambda args, out: 2 * np.asarray(out).size * np.shape(args[0])[-1]     # noqa: E731
        for name in ("matmul", "bmm"):
            self._wrap(name, matmul)
        # conv2d (x, w) -> y; backprop_input (dy, w) -> dx; backprop_filter (dy, x) -> dw: each is
        # 2 * (output pixels) * (C_in/groups * KH * KW) multiply-adds
        self._wrap("conv2d", lambda a, out: 2 * out.size * int(np.prod(a[1].shape[1:])))
        self._wrap("conv2d_backprop_input", lambda a, out: 2 * a[0].size * int(np.prod(a[1].shape[1:])))
        self._wrap("conv2d_backprop_filter", lambda a, out: 2 * a[0].size * out.size // out.shape[0])
        return self

    def __exit__(self, *exc):
        for p, kernel in self._saved:
            p.kernel = kernel
        return False


@pytest.mark.parametrize("name", ["gpt", "resnet", "mlp"])      # the LLaMA preset runs fused flash attention
def test_analytic_matmul_flops_equal_the_executed_products(name):
    import minispore as ms
    spec, size, batches = tiny(name, 1)
    _, step = suite.build_minispore(spec, size, None)
    x, y = (ms.Tensor(a) for a in batches[0])
    with CountMatmulFlops() as count:
        step(x, y)
    assert count.flops > 0
    assert count.flops == spec.matmul_flops(size)


def test_matmul_flop_counts_by_hand():
    # tiny MLP 20-32-32-10, batch 8: forward 2*8*(20*32 + 32*32 + 32*10); x3 minus the first input grad
    fwd = 2 * 8 * (20 * 32 + 32 * 32 + 32 * 10)
    assert suite.MODELS["mlp"].matmul_flops(suite.MODELS["mlp"].sizes["tiny"]) == 3 * fwd - 2 * 8 * 20 * 32


@pytest.mark.torch
def test_quick_run_writes_the_table_and_json(tmp_path, capsys):
    # the command end to end at tiny sizes (torch.compile left out: its compile takes a minute)
    pytest.importorskip("torch")
    path = tmp_path / "suite.json"
    out = suite.main(["--quick", "--no-compile", "--models", "gpt,resnet", "--json", str(path)])
    printed = capsys.readouterr().out
    assert "| model | row | ms/iter |" in printed
    import json
    saved = json.loads(path.read_text())
    assert set(saved["models"]) == {"gpt", "resnet"} == set(out["models"])
    for m in saved["models"].values():
        assert set(m["rows"]) == set(suite.MINISPORE_ROWS) | {"PyTorch eager"}
        for name, r in m["rows"].items():
            assert r["error"] is None and len(r["times_ms"]) == 3, (name, r)
            assert suite.rel(r["first_loss"], m["first_loss"]) <= suite.TORCH_TOL
    assert saved["sgemm_peak_gflops"] > 0 and len(saved["load_average"]["start"]) == 3


@pytest.mark.torch
def test_suite_profile_tables_add_up(tmp_path, capsys):
    # bench/suite_profile.py at tiny sizes, 2 steps: the structure of its tables and that each
    # column's category rows add up to its step (kernel rows never exceed it) — never timings
    pytest.importorskip("torch")
    import suite_profile as SP
    out = SP.main(["--quick", "--iters", "2", "--warmup", "1", "--models", "gpt,resnet", "--json",
                   str(tmp_path / "p.json")])
    printed = capsys.readouterr().out
    assert "| category | minispore PyNative ms |" in printed and "| PyTorch aten op (self) |" in printed
    for name, m in out["models"].items():
        assert set(m["columns"]) == set(SP.COLUMNS)
        for col, a in m["columns"].items():
            cats = a["categories"]
            assert set(cats) == set(SP.CATEGORIES)
            kernels = sum(v for k, v in cats.items() if k != "framework overhead")
            assert all(v >= 0 for k, v in cats.items() if k != "framework overhead"), (col, cats)
            assert kernels <= a["step"] + 1e-9, (name, col, cats, a["step"])
            assert abs(sum(cats.values()) - a["step"]) <= 1e-6 * a["step"]
        py = {(o["op"], o["phase"]): o["calls"] for o in m["columns"]["minispore PyNative"]["ops"]}
        if name == "gpt":      # 1 layer: ln_1, ln_2, ln_f forward, their gradients in the backward
            assert py[("layer_norm", "forward")] == 3 and py[("layer_norm_grad", "backward")] == 3
            assert m["columns"]["PyTorch eager"]["categories"]["matmul"] > 0
        else:
            assert py[("conv2d", "forward")] > 0 and py[("conv2d_backprop_filter", "backward")] > 0
            assert m["columns"]["PyTorch eager"]["categories"]["conv"] > 0


def test_suite_profile_categories():
    import suite_profile as SP
    assert [SP.category(n) for n in ("bmm", "conv2d_backprop_input", "layer_norm_grad", "softmax", "gelu",
                                     "transpose", "reduce_sum", "fused_elementwise_3{add,mul}", "HostCall")] == \
        ["matmul", "conv", "normalization", "softmax/attention", "elementwise", "reduce/index/copy",
         "reduce/index/copy", "fused C", "host call"]
    assert [SP.torch_category(n) for n in ("aten::addmm", "aten::convolution_backward",
                                           "aten::native_layer_norm", "aten::_softmax", "aten::nll_loss_forward",
                                           "aten::gelu", "aten::copy_")] == \
        ["matmul", "conv", "normalization", "softmax/attention", "loss", "elementwise", "reduce/index/copy"]
    assert [len(SP.central(list(range(n)), key=lambda s: s)) for n in (1, 2, 4, 8)] == [1, 2, 2, 4]
