"""The parity runner against toy backends: a correct one, one with a subtly wrong kernel, one
whose kernel raises, one that hands calls to the fallback; and the one-line pytest helper."""
import numpy as np
import pytest

from minispore.backend import register_backend, registry
from minispore.ops.primitive import get_primitive
from minispore.testing import OP_DB
from minispore.testing.parity import (ERROR, FAIL, FALLBACK, OK, SKIP, ParityCase, check_backend_parity,
                                      parity_cases, parity_tests, run_case)

from backend_toys import QueueToyBackend, make_queue_toy


def _sum(a, axis=(), keep_dims=False):
    """An independent reduce_sum: accumulate in float64 (NumPy's pairwise float32 sum differs
    from it by rounding only)."""
    axes = None if axis in ((), None) else axis
    return np.sum(a.astype(np.float64), axis=axes, keepdims=keep_dims).astype(a.dtype)


GOOD = {"add": np.add, "mul": np.multiply, "exp": np.exp, "reduce_sum": _sum}


def _report(host=None, device=None, **kw):
    register_backend("ParityToy", make_queue_toy(host=host, device=device, name="ParityToy"))
    return check_backend_parity("ParityToy", **kw)


def test_a_correct_backend_passes_every_case_it_implements():
    report = _report(host=GOOD, dtypes=["float32", "float16"])
    assert report.ok, report.to_markdown()
    ops_run = {(r.op, r.dtype) for r in report.rows}
    assert ("add", "Float32") in ops_run and ("add", "Float16") in ops_run and ("sum", "Float32") in ops_run
    assert ("add", "Float32 grad") in ops_run and ("exp", "Float32 grad") in ops_run
    assert ("matmul", "Float32") not in ops_run                      # not implemented: not a row ...
    assert "matmul" in report.fallbacks and "add" not in report.fallbacks   # ... but listed as a fallback
    assert all(r.samples > 0 for r in report.rows)
    # every row of this backend compares against a max error no larger than its dtype's tolerance
    assert all(r.max_rel_err <= r.tol for r in report.rows)


def test_device_kernels_count_as_implemented_and_are_compared():
    report = _report(device={"mul": np.multiply}, ops=["mul"], grads=False)
    assert [(r.op, r.status) for r in report.rows] == [("mul", OK)] * len(report.rows)
    assert {r.dtype for r in report.rows} == {"Float16", "BFloat16", "Float32", "Float64"}


def test_a_subtly_wrong_kernel_fails_with_the_sample_and_the_error():
    wrong = dict(GOOD, mul=lambda a, b: np.multiply(a, b) * np.asarray(1 + 1e-4, a.dtype))
    report = _report(host=wrong, ops=["mul", "add"], dtypes=["float32", "float16"], grads=False)
    status = {(r.op, r.dtype): r for r in report.rows}
    assert status[("mul", "Float32")].status == FAIL                  # 1e-4 > 1e-5
    assert status[("mul", "Float16")].status == OK                    # 1e-4 < 1e-3
    assert status[("add", "Float32")].status == OK
    row = status[("mul", "Float32")]
    assert 5e-5 < row.max_rel_err < 2e-4 and row.tol == 1e-5 and "SampleInput(" in row.detail
    assert not report.ok and report.failures == [row]
    with pytest.raises(AssertionError, match=r"\| mul \| mul \| Float32 \|"):
        report.assert_ok()


def _silu(a):
    x = a.astype(np.float64)
    return (x / (1 + np.exp(-x))).astype(a.dtype)


def _silu_grad(x, dout):
    s = 1 / (1 + np.exp(-x.astype(np.float64)))
    return (dout * s * (1 + x * (1 - s))).astype(x.dtype)


def test_a_wrong_backward_kernel_shows_only_in_the_gradient_row():
    good = _report(host={"silu": _silu, "silu_grad": _silu_grad}, ops=["silu"], dtypes=["float32"])
    assert {r.dtype: r.status for r in good.rows} == {"Float32": OK, "Float32 grad": OK}, good.to_markdown()
    bad = _report(host={"silu": _silu, "silu_grad": lambda x, dout: _silu_grad(x, dout) * np.float32(1.01)},
                  ops=["silu"], dtypes=["float32"])
    assert {r.dtype: r.status for r in bad.rows} == {"Float32": OK, "Float32 grad": FAIL}


def test_a_kernel_that_raises_is_an_error_row():
    def broken(a, b):
        raise RuntimeError("aclnnAdd returned 161002")
    report = _report(host={"add": broken}, ops=["add"], dtypes=["float32"], grads=False)
    (row,) = report.rows
    assert row.status == ERROR and "aclnnAdd returned 161002" in row.detail


def test_a_kernel_that_hands_calls_to_the_cpu_is_reported_as_fallback_not_ok():
    toy = QueueToyBackend()
    toy.name = "ParityToy"
    toy.kernels["add"] = lambda a, b: toy.fallback_kernel(get_primitive("add"))(a, b)
    register_backend("ParityToy", lambda: toy)
    report = check_backend_parity("ParityToy", ops=["add"], dtypes=["float32"], grads=False)
    assert [r.status for r in report.rows] == [FALLBACK]


def test_skips_from_the_caller_are_honoured_with_their_reason():
    report = _report(host=GOOD, ops=["add"], dtypes=["float32"], grads=False, skip={"add": "not today"})
    assert [(r.status, r.detail) for r in report.rows] == [(SKIP, "not today")]


def test_untested_kernels_are_listed():
    report = _report(host={"add": np.add, "embedding_grad": lambda *a, **k: None}, ops=["add"], grads=False)
    assert report.untested == ["embedding_grad"]


def test_markdown_table():
    report = _report(host={"add": np.add}, ops=["add"], dtypes=["float32"], grads=False)
    md = report.to_markdown().splitlines()
    assert md[0] == "Parity of backend 'ParityToy' against the CPU reference (1 ok)"
    assert md[2] == "| op | primitive | dtype | max rel err | tol | status |"
    assert md[4].startswith("| add | add | Float32 | 0.00e+00 | 1e-05 | ok |")
    assert md[-2].startswith("Fallbacks (no kernel, the CPU reference runs): ") and "matmul" in md[-2]
    assert str(report) == report.to_markdown()


def test_random_ops_draw_the_same_numbers_on_both_sides():
    dropout = get_primitive("dropout").impl          # draws its mask from the global generator
    report = _report(host={"dropout": dropout}, ops=["dropout"], grads=False)
    assert report.rows and all(r.status == OK for r in report.rows), report.to_markdown()


def test_parity_cases_cover_exactly_the_implemented_opinfos():
    toy = QueueToyBackend(kernels={"add": np.add, "reduce_sum": _sum})
    cases = parity_cases(toy, grads=False)
    names = {c.info.name for c in cases}
    expected = {i.name for i in OP_DB if (i.primitive or i.name) in ("add", "reduce_sum")}
    assert names == expected and "sum" in names
    assert all(isinstance(c, ParityCase) and c.dtype in c.info.dtypes for c in cases)


# ---------------------------------------------------------------------------------------------
# the one-line pytest helper, used as a plugin would use it
register_backend("HelperToy", make_queue_toy(host={"add": np.add, "mul": np.multiply}, name="HelperToy"))
test_helper_toy_parity = parity_tests("HelperToy", dtypes=["float32"])
registry.unregister_backend("HelperToy")          # the generated test keeps its backend instance


def test_parity_tests_generates_one_case_per_op_and_dtype():
    mark = next(m for m in test_helper_toy_parity.pytestmark if m.name == "parametrize")
    ids = mark.kwargs["ids"]
    assert "add-Float32" in ids and "mul-Float32" in ids and "add-Float32-grad" in ids
    assert not any("Float16" in i for i in ids)


def test_parity_tests_fails_a_wrong_kernel_and_reports_an_unloadable_backend():
    register_backend("WrongToy", make_queue_toy(host={"add": np.subtract}, name="WrongToy"))
    fn = parity_tests("WrongToy", ops=["add"], dtypes=["float32"], grads=False)
    (case,) = next(m for m in fn.pytestmark if m.name == "parametrize").args[1]
    with pytest.raises(AssertionError, match="WrongToy vs CPU, add Float32: FAIL"):
        fn(case)
    fn = parity_tests("NoSuchBackend")
    with pytest.raises(Exception, match="NoSuchBackend"):
        fn("load")


def test_run_case_leaves_the_current_backend_alone():
    register_backend("ParityToy", make_queue_toy(host={"add": np.add}, name="ParityToy"))
    from minispore.backend import current_backend, get_backend
    before = current_backend()
    info = next(i for i in OP_DB if i.name == "add")
    row = run_case(get_backend("ParityToy"), ParityCase(info, info.dtypes[0]))
    assert row.status == OK and current_backend() is before
