"""Backend parity: every op a backend implements, run on it and on the CPU reference, compared.

The op table (`OP_DB`) already says how to call each op and with which sample inputs (0-d,
broadcasting, non-contiguous views, extreme values). `check_backend_parity("Ascend")` reuses it as
PyTorch's `test_compare_cpu` does: for every OpInfo whose primitive the backend implements (its
`kernels` or `device_kernels` table), for every dtype the entry lists, run each sample on the
backend and on the CPU backend and compare outputs with the shadow-validation rule
(`minispore.backend.validate.max_rel_error`: relative error against max(|ref|, 1); float32 1e-5,
float16 1e-3, bfloat16 1.6e-2, integers and bools exact). With `grads=True` (default) it also
compares float32 gradients of every differentiable implemented op — which is where a plugin's
`*_grad` kernels (softmax_grad, rms_norm_grad, ...) get exercised.

The result is a `ParityReport`: one row per (op, dtype) with the largest error seen and a status —

    ok        every sample within tolerance
    FAIL      some output differs (the row says which sample and by how much)
    ERROR     the backend raised where the CPU reference did not
    fallback  the backend's kernel handed the call to the CPU reference (counted in `fallbacks`):
              nothing of the backend was compared
    skip      the OpInfo or the caller skips this op for this backend (with the reason)

— plus the OpInfo primitives the backend lacks (they run the CPU reference: fallbacks) and the
primitives it implements that no OpInfo covers (untested). `print(report)` gives markdown.

In a plugin's test suite, one line runs it as one pytest case per (op, dtype):

    from minispore.testing.parity import parity_tests
    test_parity = parity_tests("Ascend")
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ..backend import registry
from ..backend.base import BackendFallbackWarning
from ..backend.validate import max_rel_error, result_tolerance, validate_with_cpu
from ..common import context
from ..common import dtype as mstype
from ..common.tensor import Tensor
from ..ops.primitive import PRIMITIVES
from .checks import _flatten
from .opinfo import OP_DB, OpInfo

OK, FAIL, ERROR, FALLBACK, SKIP = "ok", "FAIL", "ERROR", "fallback", "skip"
GRAD_DTYPE = mstype.float32


@dataclass
class ParityRow:
    op: str                   # OpInfo name
    primitive: str
    dtype: str                # "Float32", or "Float32 grad" for gradient rows
    max_rel_err: float
    tol: float
    status: str
    samples: int = 0
    detail: str = ""


@dataclass
class ParityReport:
    backend: str
    rows: list = field(default_factory=list)
    fallbacks: list = field(default_factory=list)      # OpInfo primitives the backend has no kernel for
    untested: list = field(default_factory=list)       # implemented primitives no OpInfo covers

    @property
    def failures(self) -> list:
        return [r for r in self.rows if r.status in (FAIL, ERROR)]

    @property
    def ok(self) -> bool:
        return not self.failures

    def counts(self) -> dict:
        out: dict = {}
        for r in self.rows:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def to_markdown(self, failures_only: bool = False) -> str:
        rows = self.failures if failures_only else self.rows
        lines = [f"Parity of backend '{self.backend}' against the CPU reference "
                 f"({', '.join(f'{n} {s}' for s, n in sorted(self.counts().items()))})", "",
                 "| op | primitive | dtype | max rel err | tol | status |",
                 "|----|-----------|-------|-------------|-----|--------|"]
        for r in rows:
            err = "-" if r.status in (SKIP, FALLBACK, ERROR) else f"{r.max_rel_err:.2e}"
            status = r.status + (f": {r.detail}" if r.detail else "")
            lines.append(f"| {r.op} | {r.primitive} | {r.dtype} | {err} | {r.tol:g} | {status} |")
        if not failures_only:
            lines += ["", f"Fallbacks (no kernel, the CPU reference runs): "
                          f"{', '.join(self.fallbacks) if self.fallbacks else 'none'}",
                      f"Implemented but not covered by any OpInfo: "
                      f"{', '.join(self.untested) if self.untested else 'none'}"]
        return "\n".join(lines)

    def assert_ok(self) -> None:
        if not self.ok:
            raise AssertionError(self.to_markdown(failures_only=True))

    def __str__(self):
        return self.to_markdown()


@dataclass(frozen=True)
class ParityCase:
    """One (op, dtype) to compare; `grad` compares gradients instead of outputs."""
    info: OpInfo
    dtype: object
    grad: bool = False

    @property
    def id(self) -> str:
        return f"{self.info.name}-{self.dtype}{'-grad' if self.grad else ''}"


def primitive_of(info: OpInfo) -> str:
    return info.primitive or info.name


def parity_cases(backend, ops=None, dtypes=None, grads: bool = True) -> list:
    """The cases `check_backend_parity` runs for `backend` (a Backend)."""
    wanted = None if ops is None else set(ops)
    # a requested name that is an OpInfo's name selects that entry only; any other name selects the
    # entries built on that primitive (composites such as deg2rad name `mul` as their primitive, and
    # must not ride along when `mul` itself is asked for)
    by_prim = None if wanted is None else wanted - {info.name for info in OP_DB}
    dts = None if dtypes is None else {mstype.as_dtype(d) for d in dtypes}
    cases = []
    for info in OP_DB:
        if wanted is not None and info.name not in wanted and primitive_of(info) not in by_prim:
            continue
        if not backend.implements(primitive_of(info)):
            continue
        for dt in info.dtypes:
            if dts is None or dt in dts:
                cases.append(ParityCase(info, dt))
        if grads and info.differentiable and GRAD_DTYPE in info.dtypes and (dts is None or GRAD_DTYPE in dts):
            cases.append(ParityCase(info, GRAD_DTYPE, grad=True))
    return cases


# ---------------------------------------------------------------------------------------------
# running one case
def _copy_arg(a):
    return a.copy() if isinstance(a, np.ndarray) else a


def _run_forward(info, args, kwargs):
    out = info.op(*[Tensor(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)
    return [o.asnumpy() if isinstance(o, Tensor) else np.asarray(o) for o in _flatten(out)]


def _grad_positions(sample, args):
    if sample.grad_args is not None:
        return tuple(sample.grad_args)
    return tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")


def _run_grad(info, args, kwargs, positions, weights_seed):
    """Gradients of sum_i <w_i, out_i> with respect to `positions` (fixed random weights)."""
    from ..autograd import grad
    tensors = [Tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    wrng = np.random.default_rng(weights_seed)

    def scalar(*ts):
        outs = _flatten(info.op(*ts, **kwargs))
        if info.grad_output is not None:
            outs = [outs[info.grad_output]]
        total = None
        for o in outs:
            if not o.dtype.is_floating:               # integer outputs (indices) carry no gradient
                continue
            w = Tensor(wrng.standard_normal(o.shape).astype(o.dtype.np))
            term = (o * w).sum()
            total = term if total is None else total + term
        return total

    g = grad(scalar, grad_position=positions)(*tensors)
    g = g if isinstance(g, tuple) else (g,)
    return [x.asnumpy() for x in g]


def _on(backend, fn):
    """Run fn() with `backend` (a Backend) current; restore the previous one after."""
    previous = registry.current_backend()
    if previous is backend:
        return fn()
    registry.use_backend(backend)
    try:
        return fn()
    finally:
        registry.use_backend(previous)


def run_case(backend, case: ParityCase, skip: dict | None = None) -> ParityRow:
    """Compare one (op, dtype) between `backend` and the CPU reference."""
    info, prim = case.info, primitive_of(case.info)
    label = f"{case.dtype}{' grad' if case.grad else ''}"
    reason = (skip or {}).get(info.name) or (skip or {}).get(prim) or info.skips.get(backend.name)
    if reason:
        return ParityRow(info.name, prim, label, 0.0, 0.0, SKIP, 0, reason)
    rng = np.random.default_rng(0)
    worst, tol_used, n, detail = 0.0, 0.0, 0, ""
    for sample in info.sample_inputs(rng, case.dtype.np):
        args, kwargs = sample.args, sample.kwargs
        ref_args = tuple(_copy_arg(a) for a in args)       # the backend run may write its inputs
        if case.grad:
            positions = _grad_positions(sample, args)
            if not positions:
                continue
            run = lambda a: _run_grad(info, a, kwargs, positions, weights_seed=n)   # noqa: E731
        else:
            run = lambda a: _run_forward(info, a, kwargs)                          # noqa: E731
        rng_state = context.get_rng_state()               # random ops draw the same numbers on both
        before = backend.fallbacks.get(prim, 0)
        try:
            got = _on(backend, lambda: run(args))
        except Exception as e:                            # noqa: BLE001 - reported in the row
            return ParityRow(info.name, prim, label, float("inf"), tol_used, ERROR, n,
                             f"{sample!r}: {type(e).__name__}: {str(e)[:200]}")
        if backend.fallbacks.get(prim, 0) > before:
            return ParityRow(info.name, prim, label, 0.0, 0.0, FALLBACK, n,
                             f"{sample!r} ran the CPU reference")
        after = context.get_rng_state()
        context.set_rng_state(rng_state)
        try:
            ref = _on(registry.get_backend("CPU"), lambda: run(ref_args))
        finally:
            context.set_rng_state(after)
        n += 1
        if len(got) != len(ref):
            return ParityRow(info.name, prim, label, float("inf"), tol_used, FAIL, n,
                             f"{sample!r}: {len(got)} outputs, the CPU reference {len(ref)}")
        for i, (g, r) in enumerate(zip(got, ref)):
            if g.shape != r.shape:
                return ParityRow(info.name, prim, label, float("inf"), tol_used, FAIL, n,
                                 f"{sample!r}: output {i} shape {g.shape}, the CPU reference {r.shape}")
            err, tol = max_rel_error(g, r), result_tolerance(g, r)
            tol_used = max(tol_used, tol)
            if err > tol and not detail:
                detail = f"{sample!r} output {i}: {err:.3g} > {tol:g}"
            worst = max(worst, err)
    return ParityRow(info.name, prim, label, worst, tol_used, FAIL if detail else OK, n, detail)


def check_backend_parity(backend_name: str, ops=None, dtypes=None, grads: bool = True,
                         skip: dict | None = None) -> ParityReport:
    """Run every OpInfo whose primitive `backend_name` implements on it and on the CPU reference.

    `ops`: restrict to these OpInfo or primitive names; `dtypes`: to these dtypes; `grads`: also
    compare float32 gradients; `skip`: {op or primitive name: reason} to leave out (e.g. random ops
    on a device whose generator is not NumPy's). Returns a ParityReport (see the module docstring).
    Shadow validation is off during the run (the report is the comparison), and fallback warnings
    are silenced (fallbacks are reported in the table instead)."""
    backend = registry.get_backend(backend_name)
    report = ParityReport(backend.name)
    with warnings.catch_warnings(), validate_with_cpu(False):
        warnings.simplefilter("ignore", BackendFallbackWarning)
        for case in parity_cases(backend, ops, dtypes, grads):
            report.rows.append(run_case(backend, case, skip))
    covered = {primitive_of(i) for i in OP_DB}
    report.fallbacks = sorted(p for p in covered if p in PRIMITIVES and not backend.implements(p))
    implemented = set(backend.kernels) | set(backend.device_kernels)
    report.untested = sorted(p for p in implemented if p not in covered)
    return report


def parity_tests(backend_name: str, ops=None, dtypes=None, grads: bool = True, skip: dict | None = None):
    """A pytest test function with one case per (op, dtype) the backend implements:

        test_parity = parity_tests("Ascend")          # in the plugin's tests/test_parity.py

    The backend is loaded when pytest collects the module; if it cannot be, a single case reports
    why (BackendUnavailableError with what to install) instead of failing collection."""
    import pytest

    try:
        backend = registry.get_backend(backend_name)
        load_error = None
        cases = parity_cases(backend, ops, dtypes, grads)
    except Exception as e:                        # noqa: BLE001 - shown by the test, not at collection
        backend, load_error, cases = None, e, []

    if load_error is not None:
        @pytest.mark.parametrize("case", ["load"])
        def test_backend_parity(case):
            raise load_error
        return test_backend_parity

    @pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])
    def test_backend_parity(case):
        with warnings.catch_warnings(), validate_with_cpu(False):
            warnings.simplefilter("ignore", BackendFallbackWarning)
            row = run_case(backend, case, skip)
        if row.status in (SKIP, FALLBACK):
            pytest.skip(f"{row.status}: {row.detail}")
        assert row.status == OK, (f"{backend_name} vs CPU, {row.op} {row.dtype}: {row.status} "
                                  f"(max rel err {row.max_rel_err:.3g}, tol {row.tol:g}) {row.detail}")

    return test_backend_parity


__all__ = ["ParityRow", "ParityReport", "ParityCase", "parity_cases", "run_case", "check_backend_parity",
           "parity_tests"]
